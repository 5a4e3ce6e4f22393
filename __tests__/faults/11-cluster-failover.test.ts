// Fault 11: on a Cluster, the master owning a lock's slot is killed and its replica promoted.
// Renewals and releases follow the slot to the new master; waiters do not hang.
import calculateSlot from 'cluster-key-slot';
import { LockClient } from '../../src';
import { RedisCluster } from '../../scripts/redisTopologies';
import { until } from '../helpers/time';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 1 });
}, 60_000);
afterAll(async () => {
  await cluster.stop();
});

test('killing the slot owner: the lock is renewed on the promoted replica and its release reaches the waiter', async () => {
  const connections = [cluster.connect(), cluster.connect()];
  const [holder, waiting] = connections.map((redis) => new LockClient({ redis, watchdogTimeout: 6000 }));
  const lost = jest.fn();
  holder!.on('lockLost', lost);
  try {
    const name = 'cluster-failover';
    const lock = holder!.getLock(name);
    await lock.lock();
    let heldAt = 0;
    const waiter = waiting!.getLock(name).withLock(() => {
      heldAt = performance.now();
    });
    await until('the waiter parked', () => waiting!.stats.waiters === 1);

    // Find and kill the master that owns the lock's slot.
    const slot = calculateSlot(name);
    const slots = await connections[0]!.cluster('SLOTS');
    const ownerPort = slots.find(([from, to]) => slot >= from && slot <= to)![2]![1];
    const owner = cluster.servers.find((server) => server.port === ownerPort)!;
    await owner.kill();
    await until('a replica took over the slot', async () => {
      const now = await connections[1]!.cluster('SLOTS');
      const port = now.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1];
      return port !== undefined && port !== ownerPort;
    }, 20_000);
    await until('the lock answers on the new master', () => lock.isLocked().catch(() => false), 10_000);
    expect(lost).not.toHaveBeenCalled();

    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    // Within the pttl bound at worst (6 s), and no hang.
    expect(heldAt - releasedAt).toBeLessThan(6000);
    console.log(`cluster failover: waiter held ${Math.round(heldAt - releasedAt)} ms after the release`);
  } finally {
    await holder!.close();
    await waiting!.close();
    for (const redis of connections) redis.disconnect();
  }
}, 60_000);
