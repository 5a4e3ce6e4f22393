// Fault 11: on a Cluster, the master owning a lock's slot is killed and its replica promoted.
// Renewals and releases follow the slot to the new master; waiters do not hang.
import { LockClient } from '../../src';
import { RedisCluster } from '../../scripts/redisTopologies';
import { holdWithWaiter, slotOwnerPort } from '../helpers/handoff';
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
    const { lock, waiter, heldAt } = await holdWithWaiter(holder!, waiting!, name);

    // Kill the master that owns the lock's slot.
    const ownerPort = await slotOwnerPort(connections[0]!, name);
    await cluster.servers.find((server) => server.port === ownerPort)!.kill();
    await until('a replica took over the slot', async () => {
      const port = await slotOwnerPort(connections[1]!, name);
      return port !== undefined && port !== ownerPort;
    }, 20_000);
    await until('the lock answers on the new master', () => lock.isLocked().catch(() => false), 10_000);
    expect(lost).not.toHaveBeenCalled();

    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    // Within the pttl bound at worst (6 s), and no hang.
    expect(heldAt() - releasedAt).toBeLessThan(6000);
    console.log(`cluster failover: waiter held ${Math.round(heldAt() - releasedAt)} ms after the release`);
  } finally {
    await holder!.close();
    await waiting!.close();
    for (const redis of connections) redis.disconnect();
  }
}, 60_000);
