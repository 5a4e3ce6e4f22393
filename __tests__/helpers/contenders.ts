// A holder and a waiter for each primitive that parks waiters, for the fault tests that move a
// primitive's slot under a parked waiter (faults/12, 14).
import type { LockClient } from '../../src';
import { until } from './time';

export interface Contender {
  /** Takes it through `holder`; resolves with the give-back. */
  hold(holder: LockClient, name: string): Promise<() => Promise<unknown>>;
  /** Waits through `waiting` until it gets it (no waitTime). */
  wait(waiting: LockClient, name: string): Promise<unknown>;
}

/** Takes `lock` and resolves with its unlock. */
async function heldUntilGivenBack(lock: { lock(): Promise<unknown>; unlock(): Promise<void> }): Promise<() => Promise<void>> {
  await lock.lock();
  return () => lock.unlock();
}

export const contenders = {
  fair: {
    hold: (holder, name) => heldUntilGivenBack(holder.getFairLock(name)),
    wait: (waiting, name) => waiting.getFairLock(name).lock(),
  },
  fenced: {
    hold: (holder, name) => heldUntilGivenBack(holder.getFencedLock(name)),
    wait: (waiting, name) => waiting.getFencedLock(name).lock(),
  },
  'write behind a read': {
    hold: (holder, name) => heldUntilGivenBack(holder.getReadWriteLock(name).readLock()),
    wait: (waiting, name) => waiting.getReadWriteLock(name).writeLock().lock(),
  },
  'read behind a write': {
    hold: (holder, name) => heldUntilGivenBack(holder.getReadWriteLock(name).writeLock()),
    wait: (waiting, name) => waiting.getReadWriteLock(name).readLock().lock(),
  },
  semaphore: {
    hold: async (holder, name) => {
      const semaphore = holder.getSemaphore(name);
      await semaphore.trySetPermits(1);
      await semaphore.acquire();
      return () => semaphore.release();
    },
    wait: (waiting, name) => waiting.getSemaphore(name).acquire(),
  },
  permitSemaphore: {
    hold: async (holder, name) => {
      const semaphore = holder.getPermitExpirableSemaphore(name);
      await semaphore.trySetPermits(1);
      const id = await semaphore.acquire();
      return () => semaphore.release(id);
    },
    wait: (waiting, name) => waiting.getPermitExpirableSemaphore(name).acquire(),
  },
  latch: {
    hold: async (holder, name) => {
      const latch = holder.getCountDownLatch(name);
      await latch.trySetCount(1);
      return () => latch.countDown();
    },
    wait: (waiting, name) => waiting.getCountDownLatch(name).await(),
  },
} satisfies Record<string, Contender>;

export const contenderNames = Object.keys(contenders) as (keyof typeof contenders)[];

/** A contender held through one client with a waiter parked on another. */
export interface HeldWithWaiter {
  readonly kind: ContenderName;
  readonly name: string;
  readonly giveBack: () => Promise<unknown>;
  readonly waiter: Promise<void>;
  /** When the waiter got it (performance.now()), 0 until then. */
  gotAt(): number;
}

export type ContenderName = keyof typeof contenders;

/** Every contender, named `<prefix>-<kind>`, held by `holder`, with a waiter of `waiting` parked on it. */
export async function holdAllWithWaiters(holder: LockClient, waiting: LockClient, prefix: string): Promise<HeldWithWaiter[]> {
  const parkedBefore = waiting.stats.waiters;
  const held: HeldWithWaiter[] = [];
  for (const kind of contenderNames) {
    const name = `${prefix}-${kind.replace(/ /g, '-')}`;
    const { hold, wait } = contenders[kind];
    const giveBack = await hold(holder, name);
    let gotAt = 0;
    const waiter = wait(waiting, name).then(() => {
      gotAt = performance.now();
    });
    held.push({ kind, name, giveBack, waiter, gotAt: () => gotAt });
  }
  await until('every waiter parked', () => waiting.stats.waiters === parkedBefore + contenderNames.length);
  return held;
}

/** Gives each back in turn: its waiter, which had not got it before, gets it within `withinMs`. */
export async function releaseEachToItsWaiter(held: HeldWithWaiter[], withinMs: number, label: string): Promise<void> {
  for (const { kind, giveBack, waiter, gotAt } of held) {
    expect(gotAt()).toBe(0);
    const releasedAt = performance.now();
    await giveBack();
    await waiter;
    expect(gotAt() - releasedAt).toBeLessThan(withinMs);
    console.log(`${label}, ${kind}: the waiter had it ${Math.round(gotAt() - releasedAt)} ms after the release`);
  }
}
