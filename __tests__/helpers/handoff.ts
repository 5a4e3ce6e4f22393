import type { Cluster } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import type { LockClient, RLock } from '../../src';
import { until } from './time';

/** `holder` takes lock `name`; a `withLock` of `waiting` parks behind it. `heldAt()` tells when the waiter got it. */
export async function holdWithWaiter(holder: LockClient, waiting: LockClient, name: string): Promise<{ lock: RLock; waiter: Promise<void>; heldAt: () => number }> {
  const lock = holder.getLock(name);
  await lock.lock();
  let heldAt = 0;
  const waiter = waiting.getLock(name).withLock(() => {
    heldAt = performance.now();
  });
  await until('the waiter parked', () => waiting.stats.waiters === 1);
  return { lock, waiter, heldAt: () => heldAt };
}

/** The port of the master serving `key`'s slot. */
export async function slotOwnerPort(cluster: Cluster, key: string): Promise<number | undefined> {
  const slot = calculateSlot(key);
  const slots = await cluster.cluster('SLOTS');
  return slots.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1];
}
