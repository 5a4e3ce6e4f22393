// The counting semaphore in the soak: tasks take one or two of its permits along every public
// path, and the invariant is "never more than PERMITS permits held" (invariants.ts,
// checkCapacity); after the run every permit must be back. Its permits have no owner and no
// lease, so no fault it documents may lose them: no force-unlock (it has none), no Redis
// restart without data (the count is lost), no worker killed -9 (its permits go with it).
import { LockTimeoutError, type LockClient } from '../../../src';
import { semaphoreChannelOf } from '../../../src/names';
import type { Invariant } from '../checker';
import type { SoakOptions } from '../harness';
import type { ErrorReading } from '../recorder';
import type { Redis } from 'ioredis';
import { pick, randomInt, recordGrantsAndLosses, type PrimitiveAdapter } from './rlock';

/** Permits of each semaphore: three, with requests for one or two, so reservations happen. */
export const PERMITS = 3;

const errors: ErrorReading = {
  holdGone: () => undefined, // permits cannot be lost
  miss: (error) => (error instanceof LockTimeoutError ? 'timeout' : (error as Error | undefined)?.name === 'TimeoutError' ? 'abort' : undefined),
};

const adapter: PrimitiveAdapter = {
  errors,
  setup: recordGrantsAndLosses,
  async prepare(client, config) {
    // Only the first worker's call sets them; the others find them set.
    for (const name of config.locks) await client.getSemaphore(name).trySetPermits(PERMITS);
  },
  async round(client, recorder, config, stop) {
    const lock = pick(config.locks);
    const semaphore = client.getSemaphore(lock);
    const permits = Math.random() < 0.25 ? 2 : 1;
    const action = Math.random();
    if (action < 0.4) {
      const bounded = Math.random() < 0.5;
      const waitTime = bounded ? randomInt(0, 300) : undefined;
      await recorder.track(lock, bounded ? 'withPermits+waitTime' : 'withPermits', waitTime ?? null, async (rec) => {
        await semaphore.withPermits(
          async (signal) => {
            await rec.section(signal);
            rec.releasing();
          },
          { permits, ...(bounded ? { waitTime } : { signal: stop }) },
        );
        return true;
      });
    } else {
      // tryAcquire with a random waitTime, or acquire() abandoned by its signal; then release.
      const signalled = action >= 0.7;
      const bound = randomInt(signalled ? 1 : 0, 300);
      await recorder.track(lock, signalled ? 'acquire+signal' : 'tryAcquire', bound, async (rec) => {
        if (signalled) await semaphore.acquire({ permits, signal: AbortSignal.timeout(bound) });
        else if (!(await semaphore.tryAcquire({ permits, waitTime: bound }))) return false;
        try {
          await rec.section();
        } finally {
          rec.releasing();
          await semaphore.release({ permits });
        }
        return true;
      });
    }
  },
};

/** Every permit back once the run is over: none lost, none counted twice. */
async function permitsBack(admin: Redis, keyPrefix: string, locks: string[], _options: SoakOptions): Promise<string[]> {
  const violations: string[] = [];
  for (const lock of locks) {
    const free = Number(await admin.get(keyPrefix + lock));
    if (free !== PERMITS) violations.push(`semaphore ${lock} has ${free} free permits after the run, not ${PERMITS}`);
  }
  return violations;
}

export const semaphore = {
  adapter,
  invariant: { conflicts: () => false, fifo: false, capacity: PERMITS, counters: false } satisfies Invariant,
  faults: ['conn-kill', 'sub-kill', 'restart-persist', 'pause'] as const,
  channelOf: semaphoreChannelOf,
  keysGone: false,
  checkRedis: permitsBack,
};
