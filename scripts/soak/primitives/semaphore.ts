// The counting semaphore in the soak: tasks take one or two of its permits along every public
// path, and the invariant is "never more than PERMITS permits held" (invariants.ts,
// checkCapacity); after the run every permit must be back. Its permits have no owner and no
// lease, so no fault it documents may lose them: no force-unlock (it has none), no Redis
// restart without data (the count is lost), no worker killed -9 (its permits go with it).
import type { LockClient } from '../../../src';
import { semaphoreChannelOf } from '../../../src/names';
import type { Invariant } from '../checker';
import { oneChannel } from './channels';
import type { SoakOptions } from '../records';
import type { ErrorReading, Recorder } from '../recorder';
import type { Redis } from 'ioredis';
import { lockErrors, pick, randomInt, recordGrantsAndLosses, type PrimitiveAdapter } from './rlock';

/** Permits of each semaphore: three, with requests for one or two, so reservations happen. */
export const PERMITS = 3;

const errors: ErrorReading = { holdGone: () => undefined, miss: lockErrors.miss }; // permits cannot be lost

/** A worker's `prepare` that sets PERMITS on every semaphore: only the first worker's call sets them. */
export function settingPermits(get: (client: LockClient, name: string) => { trySetPermits(permits: number): Promise<boolean> }): PrimitiveAdapter['prepare'] {
  return async (client, config) => {
    for (const name of config.locks) await get(client, name).trySetPermits(PERMITS);
  };
}

/** How one kind of semaphore is used in a round: `P` is what a taken permit is (nothing, or its id). */
export interface PermitCalls<P> {
  /** `withPermits` / `withPermit` running `fn`, waiting `waitTime` or until `signal` aborts. */
  within(fn: (signal: AbortSignal) => Promise<void>, bound: { waitTime: number } | { signal: AbortSignal }): Promise<unknown>;
  /** tryAcquire within `bound` ms (null: not taken), or acquire() aborted after `bound` ms when `signalled`. */
  take(bound: number, signalled: boolean): Promise<P | null>;
  give(taken: P): Promise<void>;
  /** The watchdog timeout keeping `within`'s permits (ms), when a watchdog keeps them: long sections test it. */
  watchdogKept?: number;
}

/**
 * One round on a semaphore: its `with…` call, waiting without a bound or with a random
 * `waitTime`, or an acquire (bounded, or abandoned by its signal) and a release; the section
 * reads the counter only (holders overlap by design).
 */
export async function permitRound<P>(recorder: Recorder, lock: string, calls: PermitCalls<P>, stop: AbortSignal, withName: string): Promise<void> {
  const action = Math.random();
  if (action < 0.4) {
    const bounded = Math.random() < 0.5;
    const waitTime = randomInt(0, 300);
    // A long section where the permits are watchdog-kept (see Recorder.longHoldMs).
    const holdMs = calls.watchdogKept ? recorder.longHoldMs(lock, calls.watchdogKept) : 0;
    await recorder.track(lock, `${bounded ? `${withName}+waitTime` : withName}${holdMs > 0 ? '+long' : ''}`, bounded ? waitTime : null, async (rec) => {
      await calls.within(
        async (signal) => {
          await rec.section(signal, false, holdMs);
          rec.releasing();
        },
        bounded ? { waitTime } : { signal: stop },
      );
      return true;
    });
    return;
  }
  const signalled = action >= 0.7;
  const bound = randomInt(signalled ? 1 : 0, 300);
  await recorder.track(lock, signalled ? 'acquire+signal' : 'tryAcquire', bound, async (rec) => {
    const taken = await calls.take(bound, signalled);
    if (taken === null) return false;
    try {
      await rec.section(undefined, false);
    } finally {
      rec.releasing();
      await calls.give(taken);
    }
    return true;
  });
}

const adapter: PrimitiveAdapter = {
  errors,
  setup: recordGrantsAndLosses,
  prepare: settingPermits((client, name) => client.getSemaphore(name)),
  async round(client, recorder, config, stop) {
    const lock = pick(config.locks);
    const semaphore = client.getSemaphore(lock);
    const permits = Math.random() < 0.25 ? 2 : 1;
    await permitRound(recorder, lock, {
      within: (fn, bound) => semaphore.withPermits(fn, { permits, ...bound }),
      take: async (bound, signalled) => {
        if (signalled) await semaphore.acquire({ permits, signal: AbortSignal.timeout(bound) });
        else if (!(await semaphore.tryAcquire({ permits, waitTime: bound }))) return null;
        return permits;
      },
      give: (taken) => semaphore.release({ permits: taken }),
    }, stop, 'withPermits');
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
  channels: oneChannel(semaphoreChannelOf),
  keysGone: false,
  checkRedis: permitsBack,
};
