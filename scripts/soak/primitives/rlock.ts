// RLock in the soak: the adapter a worker plugs in (how to take and give back the lock along
// every public path) and the invariant the checker holds it to. A lock with the same interface
// (FairLock, the read-write lock's handles, FencedLock behind a wrapper) reuses the adapter with
// another way to pick its handles.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { LockLostError, LockTimeoutError, NotLockOwnerError, type LockClient, type RLock } from '../../../src';
import type { Invariant } from '../checker';
import type { ErrorReading, HoldRecorder, Recorder } from '../recorder';
import { FAULT_KINDS, type WorkerArgs, type WorkerConfig } from '../records';

export interface PrimitiveAdapter {
  readonly errors: ErrorReading;
  /** Connects the library's grant and loss reports to the recorder; returns the undo. */
  setup(client: LockClient, recorder: Recorder): () => void;
  /** Runs once in each worker before its tasks start (a semaphore sets its permits). */
  prepare?(client: LockClient, config: WorkerArgs): Promise<void>;
  /**
   * One round of one task: pick a lock and a path, acquire, work, release. Waits without a
   * bound take `stop`, which aborts once the run is over (a starved waiter would stretch it).
   */
  round(client: LockClient, recorder: Recorder, config: WorkerConfig, stop: AbortSignal): Promise<void>;
}

/** The lock interface RLock and FairLock share. */
export type LockLike = Pick<RLock, 'lock' | 'tryLock' | 'unlock' | 'withLock' | 'forceUnlock'>;

/** The handles of one round: the one it acquires with, and a fresh one that re-enters inside `withLock`. */
export interface LockPick {
  handle: LockLike;
  inner(): LockLike;
  /** Appended to the owner field the library reports (a write hold's field ends in ":write"). */
  suffix?: string;
  /** false for a shared hold (a read): its section reads the counter and does not write it. */
  writes?: boolean;
  /** After the section, while the owner still believes it holds (a fenced lock's `fencedSet`). */
  afterSection?(rec: HoldRecorder): Promise<void>;
}

export const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
export const randomInt = (min: number, max: number): number => min + Math.floor(Math.random() * (max - min + 1));

export const lockErrors: ErrorReading = {
  holdGone: (error) => (error instanceof NotLockOwnerError ? 'notOwner' : error instanceof LockLostError ? 'lost' : undefined),
  miss: (error) =>
    error instanceof LockTimeoutError ? 'timeout' : (error as Error | undefined)?.name === 'TimeoutError' ? 'abort' : undefined,
};

/** Connects the library's `rlock:acquired` events (this client's) and `lockLost` to the recorder. */
export function recordGrantsAndLosses(client: LockClient, recorder: Recorder): () => void {
  const acquiredChannel = 'rlock:acquired';
  const onAcquired = (message: unknown): void => {
    const { clientId, ownerId, name, permits } = message as { clientId: string; ownerId: string; name: string; permits?: number };
    if (clientId === client.id) recorder.granted(`${clientId}:${ownerId}`, name, permits);
  };
  subscribe(acquiredChannel, onAcquired);
  const onLost = ({ clientId, ownerId }: { clientId: string; ownerId: string }): void => recorder.lost(`${clientId}:${ownerId}`);
  client.on('lockLost', onLost);
  return () => {
    unsubscribe(acquiredChannel, onAcquired);
    client.off('lockLost', onLost);
  };
}

export function lockAdapter(pickLock: (client: LockClient, name: string, recorder: Recorder) => LockPick, errors: ErrorReading = lockErrors): PrimitiveAdapter {
  return {
    errors,
    setup: recordGrantsAndLosses,
    async round(client, recorder, config, stop) {
      const lock = pick(config.locks);
      const { handle, inner, suffix, writes = true, afterSection } = pickLock(client, lock, recorder);
      const section = async (rec: HoldRecorder, signal?: AbortSignal, holdMs?: number): Promise<void> => {
        await rec.section(signal, writes, holdMs);
        if (afterSection && rec.toldAt === null && !signal?.aborted) await afterSection(rec);
      };
      const track = (via: string, waitTime: number | null, body: Parameters<Recorder['track']>[3]): Promise<void> => recorder.track(lock, via, waitTime, body, suffix);
      const action = Math.random();
      if (action < 0.4) {
        // Reentrant section under the watchdog, waiting as long as it takes; half the time a
        // second handle enters again inside, counting the hold up and down.
        const reenter = Math.random() < 0.5;
        const holdMs = recorder.longHoldMs(lock, config.watchdogTimeout);
        await track(`${reenter ? 'withLock+reenter' : 'withLock'}${holdMs > 0 ? '+long' : ''}`, null, async (rec) => {
          await handle.withLock(async (signal) => {
            if (reenter) {
              const again = inner();
              await again.lock({ signal: stop });
              await again.unlock();
            }
            await section(rec, signal, holdMs);
            rec.releasing();
          }, { signal: stop });
          return true;
        });
      } else if (action < 0.85) {
        // tryLock with a random waitTime and lease, or lock() abandoned by its signal (nothing
        // may be left behind); then a section and unlock().
        const signalled = action >= 0.65;
        const bound = randomInt(signalled ? 1 : 0, 300);
        await track(signalled ? 'lock+signal' : 'tryLock', bound, async (rec) => {
          if (signalled) await handle.lock({ signal: AbortSignal.timeout(bound) });
          else if (!(await handle.tryLock({ waitTime: bound, leaseTime: config.leaseTime }))) return false;
          try {
            await section(rec);
          } finally {
            rec.releasing();
            await handle.unlock();
          }
          return true;
        });
      } else {
        const waitTime = randomInt(0, 300);
        await track('withLock+waitTime', waitTime, async (rec) => {
          await handle.withLock(
            async (signal) => {
              await section(rec, signal);
              rec.releasing();
            },
            { waitTime },
          );
          return true;
        });
      }
    },
  };
}

/** At most one holder at a time. */
export const exclusive: Invariant = { conflicts: () => true, fifo: false, counters: true };

const getLock = (client: LockClient, name: string): LockLike => client.getLock(name);

export const rlock = {
  adapter: lockAdapter((client, name) => ({ handle: getLock(client, name), inner: () => getLock(client, name) })),
  invariant: exclusive,
  faults: FAULT_KINDS,
  getLock,
};
