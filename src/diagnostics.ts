import { channel } from 'node:diagnostics_channel';

/**
 * Lock events on `node:diagnostics_channel`, the way undici and pg publish theirs: APM and
 * OpenTelemetry code subscribes by name, and the library depends on neither. A message is only
 * built when a channel has subscribers.
 */
export const diagnostics = {
  /** `{ name, key, clientId, ownerId, holds, leaseTime }`: an acquire succeeded. */
  acquired: channel('rlock:acquired'),
  /** `{ name, key, clientId, ownerId, released }`: a hold was given back (`released`: the lock is free). */
  released: channel('rlock:released'),
  /** `{ name, key, clientId, ownerId }`: a call found the lock taken and starts waiting. */
  waitStart: channel('rlock:wait:start'),
  /** `{ name, key, clientId, ownerId, durationMs, acquired }`: a wait ended (acquired, timed out, aborted, failed). */
  waitEnd: channel('rlock:wait:end'),
  /** `{ clientId, error }`: a watchdog renewal call failed; it is retried at the next tick. */
  renewalFailed: channel('rlock:renewal:failed'),
  /** `{ name, key, clientId, ownerId, holds, error }`: an owner lost a lock it believed it held (`holds` of them). */
  lost: channel('rlock:lost'),
  /** `{ name, key, clientId, removed, holders }`: `forceUnlock()` ran; `holders` are the owner fields (`<clientId>:<ownerId>`) it removed. */
  forceUnlocked: channel('rlock:force-unlocked'),
} as const;

export type DiagnosticsChannelName = (typeof diagnostics)[keyof typeof diagnostics]['name'];

/** The common part of every message about one owner's lock. */
export interface LockEvent {
  name: string;
  key: string;
  clientId: string;
  ownerId: string;
}

/** The `rlock:wait:start` and `rlock:wait:end` reports of one wait, for the waiting loop. */
export function waitReports(event: () => LockEvent): { waitStarted(): void; waitEnded(durationMs: number, acquired: boolean): void } {
  return {
    waitStarted: () => {
      if (diagnostics.waitStart.hasSubscribers) diagnostics.waitStart.publish(event());
    },
    waitEnded: (durationMs, acquired) => {
      if (diagnostics.waitEnd.hasSubscribers) diagnostics.waitEnd.publish({ ...event(), durationMs, acquired });
    },
  };
}
