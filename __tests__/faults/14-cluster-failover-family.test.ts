// Fault 14: on a Cluster, every primitive's slot changes master under a parked waiter: a failover
// of every shard at once (CLUSTER FAILOVER on each replica: the roles swap, nothing is lost).
// What the holder holds stays held, renewed on the new masters; each release goes there, and
// reaches its waiter. (Fault 11 kills a master instead, with the plain lock.)
import { LockClient } from '../../src';
import { holdAllWithWaiters, releaseEachToItsWaiter } from '../helpers/contenders';
import { slotPorts, useCluster } from '../helpers/handoff';
import { untilReplicaHasAll } from '../helpers/testRedis';
import { sleep, until } from '../helpers/time';

const clusterOf = useCluster({ masters: 3, replicas: 1 });

test('a failover of every shard under every primitive at once: each hold lives on, renewed on its new master, and each release reaches its waiter', async () => {
  const connections = [clusterOf().connect(), clusterOf().connect()];
  // Leases of 6 s, renewed every 2 s: a hold lasts past the sleep below only if renewed there.
  const [holder, waiting] = connections.map((redis) => new LockClient({ redis, watchdogTimeout: 6000, queueTimeout: 1500 }));
  const lost = jest.fn();
  holder!.on('lockLost', lost);
  const direct = new Map(clusterOf().servers.map((server) => [server.port, server.connect()]));
  try {
    const held = await holdAllWithWaiters(holder!, waiting!, 'failover');
    // Each on a shard with a replica, which takes over below.
    const replicaOf = new Map<string, number>();
    for (const { name } of held) {
      // CLUSTER SLOTS lists a replica once it is linked to its master, which may come after the
      // Cluster reports itself up (a full CI run missed one here).
      let replicaPort: number | undefined;
      await until(`a replica of the shard of ${name} is listed`, async () => (replicaPort = (await slotPorts(connections[0]!, name))[1]) !== undefined, 20_000);
      replicaOf.set(name, replicaPort!);
    }
    // Every replica has what its master wrote (the holds, the queue entries), then takes over.
    const shards = new Map<number, number>(); // replica port -> master port
    for (const server of clusterOf().servers) {
      const info = await direct.get(server.port)!.info('replication');
      const master = /master_port:(\d+)/.exec(info);
      if (master) shards.set(server.port, Number(master[1]));
    }
    expect(shards.size).toBe(3);
    for (const [replica, master] of shards) {
      await untilReplicaHasAll(direct.get(master)!, direct.get(replica)!);
      await direct.get(replica)!.cluster('FAILOVER');
    }
    for (const [name, replicaPort] of replicaOf) {
      await until(`the replica took over the slot of ${name}`, async () => (await slotPorts(connections[1]!, name))[0] === replicaPort, 20_000);
    }
    await sleep(7_000); // past a full lease (6 s): a hold lives only if its renewals reach the new master
    expect(lost).not.toHaveBeenCalled();
    // Well within a lease (6 s), and a latch's await has no bound at all: by the release's
    // wake-up, or, lost in the move, by the slot refresh (2 s) or the queue's heartbeat.
    await releaseEachToItsWaiter(held, 3_500, 'cluster failover');
  } finally {
    await holder!.close();
    await waiting!.close();
    for (const redis of [...connections, ...direct.values()]) redis.disconnect();
  }
}, 60_000);
