import type { Cluster } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import type { LockClient, RLock } from '../../src';
import { RedisCluster } from '../../scripts/redisTopologies';
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

/** The ports of the nodes serving `key`'s slot: its master first, then its live replicas. */
export async function slotPorts(cluster: Cluster, key: string): Promise<number[]> {
  const slot = calculateSlot(key);
  const slots = await cluster.cluster('SLOTS');
  const range = slots.find(([from, to]) => slot >= from && slot <= to);
  return range ? range.slice(2).map((node) => (node as unknown as [string, number])[1]) : [];
}

/** The port of the master serving `key`'s slot. */
export async function slotOwnerPort(cluster: Cluster, key: string): Promise<number | undefined> {
  return (await slotPorts(cluster, key))[0];
}

/** A Cluster of this test file's own, started in beforeAll and stopped in afterAll. */
export function useCluster(options: Parameters<typeof RedisCluster.start>[0]): () => RedisCluster {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await RedisCluster.start(options);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return () => {
    if (!cluster) throw new Error('the Cluster starts in beforeAll');
    return cluster;
  };
}
