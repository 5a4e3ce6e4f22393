// The least-privilege ACL recipe on a 3-master Redis Cluster and on Sentinel (docs/security.md):
// the names a lock uses stay under the prefix and in the lock's slot (sharded pub/sub included),
// nothing is refused, nothing is printed.
import type { Redis } from 'ioredis';
import { LockClient } from '../src';
import { RedisCluster, RedisSentinelGroup } from '../scripts/redisTopologies';
import { until } from './helpers/time';

/** The exact single-node list plus what a Cluster needs (docs/security.md; keep the two identical). */
const CLUSTER_COMMANDS =
  '+evalsha +eval +exists +hexists +hget +hgetall +hkeys +hincrby +pexpire +pttl +del +get +set ' +
  '+publish +subscribe +unsubscribe +pubsub|numsub +scan +client|setname ' +
  '+hset +time +zadd +zrange +zrangebyscore +zrem +zremrangebyscore +zscore ' +
  '+spublish +ssubscribe +sunsubscribe +pubsub|shardnumsub +command|info +cluster|slots +cluster|info';

let cluster: RedisCluster;
const clients: LockClient[] = [];

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3 });
  // ACL users are per node: a Cluster's operator sets them on every one.
  for (const server of cluster.servers) {
    const admin = server.connect();
    try {
      await admin.call('ACL', 'SETUSER', 'app', 'on', '>pw-app', 'resetkeys', 'resetchannels', '~app:*', '&app:*', '-@all', ...CLUSTER_COMMANDS.split(' '));
      await admin.call('ACL', 'LOG', 'RESET');
    } finally {
      admin.disconnect();
    }
  }
}, 60_000);

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

afterAll(async () => {
  await cluster?.stop();
});

function clientAs(): LockClient {
  const client = new LockClient({
    redis: { clusterNodes: cluster.startupNodes, clusterOptions: { redisOptions: { username: 'app', password: 'pw-app' } } },
    keyPrefix: 'app:',
  });
  clients.push(client);
  return client;
}

test('lock, wait and wake, reentry, force unlock, inspect, listLocks and the fair lock as the exact ACL user, on every kind of name', async () => {
  const warn = jest.spyOn(console, 'warn');
  try {
    const a = clientAs();
    const b = clientAs();
    // Plain, own hash tag, and a stray `}` (its channel gets a tag of the key's slot).
    for (const name of ['orders:1', '{user:1}:cart', 'a}b', '{}x']) {
      const lock = a.getLock(name);
      await lock.withLock(async () => {
        await a.getLock(name).withLock(async () => undefined); // a partial release: the latch
      });
      await lock.lock();
      const waiter = b.getLock(name);
      const waiting = waiter.tryLock({ waitTime: 20_000, leaseTime: 5000 });
      await until('the waiter parked and subscribed', async () => b.stats.waiters === 1 && (await b.inspect(name)).waitingClients === 1);
      const info = await b.inspect(name);
      expect(info).toMatchObject({ locked: true, waitingClients: 1, holders: [{ clientId: a.id, clientName: undefined }] });
      await lock.unlock();
      expect(await waiting).toBe(true);
      const listed: string[] = [];
      for await (const listedName of a.listLocks()) listed.push(listedName);
      expect(listed).toEqual([name]);
      expect(await a.getLock(name).forceUnlock()).toBe(true);

      // The fair lock of the same name: queue, grant channel, handover, force unlock.
      const fair = a.getFairLock(name);
      await fair.lock();
      const fairWaiting = b.getFairLock(name).tryLock({ waitTime: 20_000 });
      await until('the fair waiter is queued', async () => (await fair.inspect()).queue?.length === 1);
      await fair.unlock();
      expect(await fairWaiting).toBe(true);
      expect(await a.getFairLock(name).forceUnlock()).toBe(true);
    }
    expect(warn).not.toHaveBeenCalled();
  } finally {
    warn.mockRestore();
  }
  const denials: string[] = [];
  for (const server of cluster.servers) {
    const admin = server.connect();
    try {
      const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
      for (const entry of entries) denials.push(`${String(entry[entry.indexOf('reason') + 1])}:${String(entry[entry.indexOf('object') + 1])}`);
    } finally {
      admin.disconnect();
    }
  }
  // inspect() asks CLIENT LIST for holder names; the recipe leaves it out on purpose.
  expect([...new Set(denials)]).toEqual(['command:client|list']);
});

/** The single-node list (security.test.ts) plus INFO, which ioredis's Sentinel connector needs. */
const SENTINEL_COMMANDS =
  '+evalsha +eval +exists +hexists +hget +hgetall +hkeys +hincrby +pexpire +pttl +del +get +set ' +
  '+publish +subscribe +unsubscribe +pubsub|numsub +scan +client|setname ' +
  '+hset +time +zadd +zrange +zrangebyscore +zrem +zremrangebyscore +zscore +info';

async function denialsOn(admins: Redis[]): Promise<string[]> {
  const denials: string[] = [];
  for (const admin of admins) {
    const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
    for (const entry of entries) denials.push(`${String(entry[entry.indexOf('reason') + 1])}:${String(entry[entry.indexOf('object') + 1])}`);
  }
  return [...new Set(denials)];
}

describe('Sentinel', () => {
  let group: RedisSentinelGroup;
  const admins: Redis[] = [];
  beforeAll(async () => {
    group = await RedisSentinelGroup.start();
    for (const server of [group.master, group.replica]) {
      const admin = server.connect();
      admins.push(admin);
      await admin.call('ACL', 'SETUSER', 'app', 'on', '>pw-app', 'resetkeys', 'resetchannels', '~app:*', '&app:*', '-@all', ...SENTINEL_COMMANDS.split(' '));
      await admin.call('ACL', 'LOG', 'RESET');
    }
  }, 60_000);
  afterAll(async () => {
    for (const admin of admins) admin.disconnect();
    await group?.stop();
  });

  test('lock, wait and wake, inspect and the fair lock through Sentinel as the ACL user, with no warning', async () => {
    const warn = jest.spyOn(console, 'warn');
    try {
      const options = { sentinels: group.sentinels, name: group.masterName, username: 'app', password: 'pw-app' };
      const a = new LockClient({ redis: options, keyPrefix: 'app:' });
      const b = new LockClient({ redis: options, keyPrefix: 'app:' });
      clients.push(a, b);
      const lock = a.getLock('s');
      await lock.lock();
      const waiter = b.getLock('s');
      const waiting = waiter.tryLock({ waitTime: 20_000, leaseTime: 5000 });
      await until('the waiter parked and subscribed', async () => b.stats.waiters === 1 && (await b.inspect('s')).waitingClients === 1);
      await lock.unlock();
      expect(await waiting).toBe(true);
      await waiter.unlock();
      const fair = a.getFairLock('f');
      await fair.lock();
      const fairWaiting = b.getFairLock('f').tryLock({ waitTime: 20_000 });
      await until('the fair waiter is queued', async () => (await fair.inspect()).queue?.length === 1);
      await fair.unlock();
      expect(await fairWaiting).toBe(true);
      expect(await a.getFairLock('f').forceUnlock()).toBe(true);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
    expect(await denialsOn(admins)).toEqual(['command:client|list']);
  });
});
