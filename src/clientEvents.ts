import type { EventEmitter } from 'node:events';
import type { LockLostError } from './errors';
import { diagnostics } from './diagnostics';
import { redactError } from './redact';
import type { RenewalTarget } from './services/RenewalTarget';

/** Payload of the `lockLost` event. */
export interface LockLostEvent {
  name: string;
  key: string;
  clientId: string;
  ownerId: string;
  error: LockLostError;
}

export interface LockClientEvents {
  /** A lock the watchdog kept was found no longer held by its owner (by a renewal, or by the owner's release). */
  lockLost: [LockLostEvent];
  /** A watchdog renewal call failed (network, Redis error), once per batch of holds (a batch a migrating Cluster slot refused: only if its per-lock resend failed too); it is retried next tick. */
  renewalFailed: [unknown];
}

/** What a client's watchdog reports (its `onLost` and `onFailed`), published on the diagnostics channels and emitted as the client's events. */
export interface WatchdogReports {
  lost(target: RenewalTarget, error: LockLostError, holds: number): void;
  failed(error: unknown): void;
}

/** The watchdog's reports of `client`. */
export function watchdogReports(client: EventEmitter<LockClientEvents> & { readonly id: string }): WatchdogReports {
  return {
    lost: (target, error, holds) => {
      const event = { name: target.name, key: target.key, clientId: client.id, ownerId: target.owner.id, error };
      if (diagnostics.lost.hasSubscribers) diagnostics.lost.publish({ ...event, holds });
      emitApart(client, 'lockLost', event);
    },
    failed: (error) => {
      redactError(error); // a failed AUTH carries the password in its `command.args`
      if (diagnostics.renewalFailed.hasSubscribers) diagnostics.renewalFailed.publish({ clientId: client.id, error });
      emitApart(client, 'renewalFailed', error);
    },
  };
}

/**
 * Emits an event of the watchdog's, which runs inside its renewal calls and timers: a listener
 * that throws must not end the batch (the other holds' losses went unreported, the deadline
 * timer was not re-armed) nor surface as the watchdog's unhandled rejection, or as the error
 * of an unlock() that found its lock gone. Its error is thrown apart, on the next tick, as an
 * uncaught exception: what Node does with a throwing diagnostics_channel subscriber.
 */
function emitApart(client: EventEmitter<LockClientEvents>, event: 'lockLost' | 'renewalFailed', payload: unknown): void {
  try {
    client.emit(event, payload);
  } catch (error) {
    process.nextTick(() => {
      throw error;
    });
  }
}
