// RLock in the soak: the adapter a worker plugs in (how to take and give back the lock along
// every public path) and the invariant the checker holds it to. A lock with the same interface
// (FairLock) reuses it with another getter and channel.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { LockLostError, LockTimeoutError, NotLockOwnerError, type LockClient, type RLock } from '../../../src';
import type { Invariant } from '../checker';
import type { ErrorReading, Recorder } from '../recorder';
import type { WorkerConfig } from '../records';

export interface PrimitiveAdapter {
  readonly errors: ErrorReading;
  /** Connects the library's grant and loss reports to the recorder; returns the undo. */
  setup(client: LockClient, recorder: Recorder): () => void;
  /**
   * One round of one task: pick a lock and a path, acquire, work, release. Waits without a
   * bound take `stop`, which aborts once the run is over (a starved waiter would stretch it).
   */
  round(client: LockClient, recorder: Recorder, config: WorkerConfig, stop: AbortSignal): Promise<void>;
}

/** The lock interface RLock and FairLock share. */
export type LockLike = Pick<RLock, 'lock' | 'tryLock' | 'unlock' | 'withLock' | 'forceUnlock'>;

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
const randomInt = (min: number, max: number): number => min + Math.floor(Math.random() * (max - min + 1));

export const lockErrors: ErrorReading = {
  holdGone: (error) => (error instanceof NotLockOwnerError ? 'notOwner' : error instanceof LockLostError ? 'lost' : undefined),
  miss: (error) =>
    error instanceof LockTimeoutError ? 'timeout' : (error as Error | undefined)?.name === 'TimeoutError' ? 'abort' : undefined,
};

export function lockAdapter(getLock: (client: LockClient, name: string) => LockLike, errors: ErrorReading = lockErrors): PrimitiveAdapter {
  const acquiredChannel = 'rlock:acquired';
  return {
    errors,
    setup(client, recorder) {
      const onAcquired = (message: unknown): void => {
        const { clientId, ownerId, name } = message as { clientId: string; ownerId: string; name: string };
        if (clientId === client.id) recorder.granted(`${clientId}:${ownerId}`, name);
      };
      subscribe(acquiredChannel, onAcquired);
      const onLost = ({ clientId, ownerId }: { clientId: string; ownerId: string }): void => recorder.lost(`${clientId}:${ownerId}`);
      client.on('lockLost', onLost);
      return () => {
        unsubscribe(acquiredChannel, onAcquired);
        client.off('lockLost', onLost);
      };
    },
    async round(client, recorder, config, stop) {
      const lock = pick(config.locks);
      const handle = getLock(client, lock);
      const action = Math.random();
      if (action < 0.4) {
        // Reentrant section under the watchdog, waiting as long as it takes; half the time a
        // second handle enters again inside, counting the hold up and down.
        const reenter = Math.random() < 0.5;
        await recorder.track(lock, reenter ? 'withLock+reenter' : 'withLock', null, async (rec) => {
          await handle.withLock(async (signal) => {
            if (reenter) {
              const inner = getLock(client, lock);
              await inner.lock({ signal: stop });
              await inner.unlock();
            }
            await rec.section(signal);
            rec.releasing();
          }, { signal: stop });
          return true;
        });
      } else if (action < 0.65) {
        const waitTime = randomInt(0, 300);
        await recorder.track(lock, 'tryLock', waitTime, async (rec) => {
          if (!(await handle.tryLock({ waitTime, leaseTime: config.leaseTime }))) return false;
          try {
            await rec.section();
          } finally {
            rec.releasing();
            await handle.unlock();
          }
          return true;
        });
      } else if (action < 0.85) {
        // An abandoned wait: the signal aborts it, and nothing may be left behind.
        const abortAfter = randomInt(1, 300);
        await recorder.track(lock, 'lock+signal', abortAfter, async (rec) => {
          await handle.lock({ signal: AbortSignal.timeout(abortAfter) });
          try {
            await rec.section();
          } finally {
            rec.releasing();
            await handle.unlock();
          }
          return true;
        });
      } else {
        const waitTime = randomInt(0, 300);
        await recorder.track(lock, 'withLock+waitTime', waitTime, async (rec) => {
          await handle.withLock(
            async (signal) => {
              await rec.section(signal);
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
export const exclusive: Invariant = { conflicts: () => true, fifo: false };

const getLock = (client: LockClient, name: string): LockLike => client.getLock(name);

export const rlock = {
  adapter: lockAdapter(getLock),
  invariant: exclusive,
  getLock,
};
