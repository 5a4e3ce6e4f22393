// Fault 11: on a Cluster, the master owning a lock's slot is killed and its replica promoted.
// Renewals and releases follow the slot to the new master; waiters do not hang. With
// syncReplicas, only an acquire the slot's replica acknowledged counts, and it survives.
import { LockClient } from '../../src';
import { holdWithWaiter, slotOwnerPort, slotPorts, useCluster } from '../helpers/handoff';
import { until } from '../helpers/time';

const clusterOf = useCluster({ masters: 3, replicas: 1 });

test('killing the slot owner: the lock is renewed on the promoted replica and its release reaches the waiter', async () => {
  const connections = [clusterOf().connect(), clusterOf().connect()];
  // The waiting client's heartbeat (every queueTimeout / 3 = 500 ms) repairs a wake-up lost to
  // the failover; the holder's lease (6 s) is the pttl the waiter sleeps at most otherwise.
  const [holder, waiting] = connections.map((redis) => new LockClient({ redis, watchdogTimeout: 6000, queueTimeout: 1500 }));
  const lost = jest.fn();
  holder!.on('lockLost', lost);
  try {
    const name = 'cluster-failover';
    const { lock, waiter, heldAt } = await holdWithWaiter(holder!, waiting!, name);

    // Kill the master that owns the lock's slot.
    const ownerPort = await slotOwnerPort(connections[0]!, name);
    await clusterOf().servers.find((server) => server.port === ownerPort)!.kill();
    await until('a replica took over the slot', async () => {
      const port = await slotOwnerPort(connections[1]!, name);
      return port !== undefined && port !== ownerPort;
    }, 20_000);
    await until('the lock answers on the new master', () => lock.isLocked().catch(() => false), 10_000);
    expect(lost).not.toHaveBeenCalled();

    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    // Well within the 6 s pttl: by the release message, or by the heartbeat if the failover lost it.
    expect(heldAt() - releasedAt).toBeLessThan(3000);
    console.log(`cluster failover: waiter held ${Math.round(heldAt() - releasedAt)} ms after the release`);
  } finally {
    await holder!.close();
    await waiting!.close();
    for (const redis of connections) redis.disconnect();
  }
}, 60_000);

test('syncReplicas on Cluster: WAIT reaches the slot\'s master; an unacknowledged acquire is refused, an acknowledged one survives the failover', async () => {
  const connections = [clusterOf().connect(), clusterOf().connect()];
  const synced = new LockClient({ redis: connections[0]!, syncReplicas: { replicas: 1, timeout: 300 } });
  const other = new LockClient({ redis: connections[1]! });
  try {
    // A lock whose slot still has a master and a replica (the test above killed one master).
    let name = '';
    let ports: number[] = [];
    for (let i = 0; ports.length < 2; i++) {
      name = `synced-${i}`;
      ports = await slotPorts(connections[0]!, name);
    }
    const [ownerPort, replicaPort] = ports;
    const lock = synced.getLock(name);

    const replica = clusterOf().servers.find((server) => server.port === replicaPort)!;
    replica.pause();
    try {
      expect(await lock.tryLock({ leaseTime: 60_000 })).toBe(false);
      expect(await lock.isLocked()).toBe(false); // the unconfirmed hold was given back
    } finally {
      replica.resume();
    }
    expect(await lock.tryLock({ waitTime: 5000, leaseTime: 60_000 })).toBe(true);

    await clusterOf().servers.find((server) => server.port === ownerPort)!.kill();
    await until('the replica took over the slot', async () => (await slotOwnerPort(connections[1]!, name).catch(() => undefined)) === replicaPort, 20_000);
    await until('the lock answers on the new master', () => lock.isLocked().catch(() => false), 10_000);
    expect(await other.getLock(name).tryLock({ waitTime: 1000, leaseTime: 60_000 })).toBe(false);
    expect(await lock.isHeldByCurrentOwner()).toBe(true);
  } finally {
    await synced.close();
    await other.close();
    for (const redis of connections) redis.disconnect();
  }
}, 60_000);
