// Fault 12: on a Cluster, the slot of a lock with a parked waiter migrates to another master.
// Calls follow the slot (MOVED/ASK); the sharded subscription follows it on the subscriber's
// next slots refresh, and the waiter retries then, instead of sleeping out its pttl.
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { LockClient } from '../../src';
import { contenderNames, contenders } from '../helpers/contenders';
import { holdWithWaiter, slotOwnerPort, useCluster } from '../helpers/handoff';
import { until } from '../helpers/time';

const clusterOf = useCluster({ masters: 3 });

/** Marks `slot` as moving from one master to another, as `redis-cli --cluster reshard` does first. */
async function beginMigration(slot: number, from: Redis, to: Redis): Promise<void> {
  await to.cluster('SETSLOT', slot, 'IMPORTING', await from.cluster('MYID'));
  await from.cluster('SETSLOT', slot, 'MIGRATING', await to.cluster('MYID'));
}

/** Moves the keys `slot` still has on `from`, then gives the slot to `to`. */
async function endMigration(slot: number, from: Redis, to: Redis, toPort: number): Promise<void> {
  for (;;) {
    const keys = await from.cluster('GETKEYSINSLOT', slot, 100);
    if (keys.length === 0) break;
    await from.migrate('127.0.0.1', toPort, '', 0, 5000, 'KEYS', ...keys);
  }
  const toId = await to.cluster('MYID');
  for (const node of [to, from]) await node.cluster('SETSLOT', slot, 'NODE', toId);
}

/** Moves `slot` and its keys from one master to another. */
async function migrateSlot(slot: number, from: Redis, to: Redis, toPort: number): Promise<void> {
  await beginMigration(slot, from, to);
  await endMigration(slot, from, to, toPort);
}

/**
 * A reshard of `key`'s slot from its master (`from`) to the next one that stops between two
 * MIGRATE calls (`half`), and its end (`finish`, for a clean-up: it never throws).
 */
async function halfMigration(connection: Cluster, key: string) {
  const direct = clusterOf().servers.map((server) => server.connect());
  const slot = calculateSlot(key);
  const fromPort = await slotOwnerPort(connection, key);
  const fromIndex = clusterOf().servers.findIndex((server) => server.port === fromPort);
  const toIndex = (fromIndex + 1) % clusterOf().servers.length;
  const [from, to] = [direct[fromIndex]!, direct[toIndex]!];
  const toPort = clusterOf().servers[toIndex]!.port;
  return {
    from,
    /** Marks the slot migrating and moves `keys` only. */
    async half(...keys: string[]): Promise<void> {
      await beginMigration(slot, from, to);
      await from.migrate('127.0.0.1', toPort, '', 0, 5000, 'KEYS', ...keys);
    },
    async finish(): Promise<void> {
      await endMigration(slot, from, to, toPort).catch(() => undefined);
      for (const redis of direct) redis.disconnect();
    },
  };
}

test('a waiter on a lock whose slot moves still gets the lock after the release', async () => {
  const lease = 15_000;
  const connections = [clusterOf().connect(), clusterOf().connect()];
  const [holder, waiting] = connections.map((redis) => new LockClient({ redis, watchdogTimeout: lease, queueTimeout: 1500 }));
  const direct = clusterOf().servers.map((server) => server.connect());
  try {
    const name = 'moving';
    const slot = calculateSlot(name);
    const first = await holdWithWaiter(holder!, waiting!, name);
    const { lock } = first;
    const fromPort = await slotOwnerPort(connections[0]!, name);
    const fromIndex = clusterOf().servers.findIndex((server) => server.port === fromPort);
    const toIndex = (fromIndex + 1) % clusterOf().servers.length;
    await migrateSlot(slot, direct[fromIndex]!, direct[toIndex]!, clusterOf().servers[toIndex]!.port);
    expect(await direct[toIndex]!.exists(name)).toBe(1);

    // The holder's renewals and release follow the slot.
    await until('the lock answers on its new master', () => lock.isLocked(), 10_000);
    const releasedAt = performance.now();
    await lock.unlock();
    await first.waiter;
    let heldAt = first.heldAt();
    // The release message may be lost while the subscription moves; the subscriber's slot
    // refresh (every 2 s) notices the move and wakes the waiter to retry, well before its pttl.
    expect(heldAt - releasedAt).toBeLessThan(4000);
    console.log(`slot migration: waiter held ${Math.round(heldAt - releasedAt)} ms after the release`);

    // From then on the waiter's subscription moves to the new master (sent again at a slot
    // refresh if ioredis routed it by its old map) and, until it is there, its client's heartbeat
    // (queueTimeout 1500: every 500 ms) covers: the next release reaches it well within its pttl.
    await lock.lock();
    const again = waiting!.getLock(name).withLock(() => {
      heldAt = performance.now();
    });
    await until('the waiter is in line', async () => (await lock.inspect()).waitingClients === 1, 10_000);
    const secondRelease = performance.now();
    await lock.unlock();
    await again;
    expect(heldAt - secondRelease).toBeLessThan(3000);
    const [, count] = (await direct[toIndex]!.pubsub('SHARDNUMSUB', `rlock__channel:{${name}}:${waiting!.id}`)) as [string, number];
    console.log(`slot migration: second waiter held ${Math.round(heldAt - secondRelease)} ms after the release; subscribed on the new master: ${Number(count) === 1}`);
  } finally {
    await holder!.close();
    await waiting!.close();
    for (const redis of [...connections, ...direct]) redis.disconnect();
  }
}, 60_000);

describe("every primitive's waiter follows its slot to another master", () => {
  // The same move for each primitive that parks waiters: all of a primitive's keys share the
  // name's slot (hash tag), so they move together; its scripts follow the slot (MOVED), and its
  // waiter, whose wake-up may be lost while the sharded subscription moves, is woken when the
  // subscriber's slot refresh (every 2 s) sees the move, or by its queue's heartbeat.
  test.each(contenderNames)('%s', async (kind) => {
    const { hold, wait } = contenders[kind];
    const connections = [clusterOf().connect(), clusterOf().connect()];
    const [holder, waiting] = connections.map((redis) => new LockClient({ redis, watchdogTimeout: 15_000, queueTimeout: 1500 }));
    const direct = clusterOf().servers.map((server) => server.connect());
    try {
      const name = `moving-${kind.replace(/ /g, '-')}`;
      const giveBack = await hold(holder!, name);
      let gotAt = 0;
      const waiter = wait(waiting!, name).then(() => {
        gotAt = performance.now();
      });
      await until('the waiter parked', () => waiting!.stats.waiters === 1);
      const fromPort = await slotOwnerPort(connections[0]!, name);
      const fromIndex = clusterOf().servers.findIndex((server) => server.port === fromPort);
      const toIndex = (fromIndex + 1) % clusterOf().servers.length;
      await migrateSlot(calculateSlot(name), direct[fromIndex]!, direct[toIndex]!, clusterOf().servers[toIndex]!.port);
      // Something of it moved (else this would prove nothing).
      expect((await direct[toIndex]!.cluster('COUNTKEYSINSLOT', calculateSlot(name))) as number).toBeGreaterThan(0);
      expect(gotAt).toBe(0);
      const releasedAt = performance.now();
      await giveBack();
      await waiter;
      // Well before any lease or bound could have ended the wait (15 s).
      expect(gotAt - releasedAt).toBeLessThan(4_000);
      console.log(`slot migration, ${kind}: the waiter had it ${Math.round(gotAt - releasedAt)} ms after the release`);
    } finally {
      await holder!.close();
      await waiting!.close();
      for (const redis of [...connections, ...direct]) redis.disconnect();
    }
  }, 60_000);
});

test('holds of one slot, renewed in one call, keep their leases while the slot is half migrated (TRYAGAIN): the watchdog renews them one by one', async () => {
  // Not shorter: ioredis retries a refused call 16 times, 100 ms apart, before it fails.
  const lease = 6_000;
  const connection = clusterOf().connect();
  const client = new LockClient({ redis: connection, watchdogTimeout: lease });
  const lost: string[] = [];
  client.on('lockLost', ({ name }: { name: string }) => lost.push(name));
  const names = ['{half-migrated}a', '{half-migrated}b'];
  const migration = await halfMigration(connection, names[0]!);
  const { from } = migration;
  try {
    for (const name of names) await client.getLock(name).lock(); // kept by the watchdog, in one call
    await migration.half(names[0]!); // one key moved
    const refused = await from.eval("return redis.call('pttl', KEYS[1])", 2, ...names).then(() => '', (error: Error) => error.message);
    expect(refused).toMatch(/^TRYAGAIN/);
    // Two leases: a call refused tick after tick would let both run out within the first.
    const stop = performance.now() + 2 * lease;
    while (performance.now() < stop && lost.length === 0) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(lost).toEqual([]);
    for (const name of names) expect(await connection.pttl(name)).toBeGreaterThan(0);
  } finally {
    await client.close();
    connection.disconnect();
    await migration.finish();
  }
}, 60_000);

test("fair-lock waiters of locks in one slot keep their queue entries while the slot is half migrated: the heartbeat refreshes them one call per lock", async () => {
  // The heartbeat beats every queueTimeout / 3; not shorter: ioredis retries a refused call ~1.6 s.
  const queueTimeout = 6_000;
  const connection = clusterOf().connect();
  const holderConnection = clusterOf().connect();
  const waiting = new LockClient({ redis: connection, queueTimeout });
  const holder = new LockClient({ redis: holderConnection });
  const names = ['{half-queued}a', '{half-queued}b'];
  const migration = await halfMigration(connection, names[0]!);
  const { from } = migration;
  const deadlineAhead = async (name: string): Promise<number> => {
    const [member] = await connection.zrange(`rlock__queue_expiry:${name}`, 0, 0);
    if (member === undefined) return -Infinity; // the entry ran out (and its keys with it)
    const deadline = Number(await connection.zscore(`rlock__queue_expiry:${name}`, member));
    const [seconds, micros] = await from.time();
    return deadline - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
  };
  const waits: Promise<boolean>[] = [];
  try {
    // Held with a lease (no watchdog) well past the test: the waiters stay queued.
    for (const name of names) await holder.getFairLock(name).lock({ leaseTime: 60_000 });
    // They end with ClientClosedError at the clean-up.
    for (const name of names) waits.push(waiting.getFairLock(name).tryLock({ waitTime: 50_000 }).catch(() => false));
    await until('both waiters are queued', async () => (await Promise.all(names.map((name) => connection.zcard(`rlock__queue:${name}`)))).every((n) => n === 1));
    // Lock a's keys (hash, queue, deadlines) moved, lock b's not.
    await migration.half(names[0]!, `rlock__queue:${names[0]}`, `rlock__queue_expiry:${names[0]}`);
    // Two queue timeouts: entries the heartbeat could not refresh would be past their deadline.
    await new Promise((resolve) => setTimeout(resolve, 2 * queueTimeout));
    for (const name of names) expect(await deadlineAhead(name)).toBeGreaterThan(0);
  } finally {
    await waiting.close();
    await holder.close();
    await Promise.all(waits);
    connection.disconnect();
    holderConnection.disconnect();
    await migration.finish();
  }
}, 60_000);

test('a slot that moves and holds no channel of a client does not make its waiters subscribe again', async () => {
  // ioredis says subscribersReady after every change of the slot map; the client subscribed every
  // channel again and woke every waiter on each (a second reader's find), where only a replaced
  // subscriber calls for it (faults/13 "a sharded subscriber connection dropped ...").
  const cluster = clusterOf();
  const waiting = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  const opener = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  const direct = cluster.servers.map((server) => server.connect());
  const ssubscribes = async (): Promise<number> =>
    (await Promise.all(direct.map(async (node) => Number(/^cmdstat_ssubscribe:calls=(\d+)/m.exec(await node.info('commandstats'))?.[1] ?? 0)))).reduce((a, b) => a + b, 0);
  const name = 'unrelated-slot-move';
  const slot = (calculateSlot(name) + 8192) % 16384;
  const ports = cluster.servers.map((server) => server.port);
  let moved: { from: number; to: number } | undefined;
  try {
    await opener.getCountDownLatch(name).trySetCount(1);
    const opened = waiting.getCountDownLatch(name).await();
    await until('the awaiter is subscribed', async () => (await opener.getCountDownLatch(name).inspect()).waitingClients === 1, 10_000);
    const subscriber = (waiting as unknown as { pubsub: { subscriber: Cluster } }).pubsub.subscriber;
    let refreshed = false;
    subscriber.on('subscribersReady', () => (refreshed = true));
    const before = await ssubscribes();
    const ranges = await direct[0]!.cluster('SLOTS');
    const owner = ports.indexOf(Number(ranges.find(([start, end]) => start <= slot && slot <= end)![2]![1]));
    moved = { from: owner, to: (owner + 1) % ports.length };
    await migrateSlot(slot, direct[moved.from]!, direct[moved.to]!, ports[moved.to]!);
    await until('the subscriber saw the new slot map', () => refreshed, 10_000);
    // ioredis sends its own channels again after a new slot map (one SSUBSCRIBE here); the client
    // sent a second one, and woke its waiters, before.
    expect((await ssubscribes()) - before).toBeLessThanOrEqual(1);
    await opener.getCountDownLatch(name).countDown();
    await opened;
  } finally {
    if (moved) await migrateSlot(slot, direct[moved.to]!, direct[moved.from]!, ports[moved.from]!);
    await waiting.close();
    await opener.close();
    for (const node of direct) node.disconnect();
  }
}, 60_000);

test('a give-back refused for longer than ioredis redirects, its slot half migrated (TRYAGAIN), is sent again and runs once the slot moved', async () => {
  // A script naming keys on both sides of a migrating slot is refused (TRYAGAIN) until the slot
  // has moved; ioredis gives up after its redirections (~1 s). unlock(), a semaphore's release,
  // a permit's release and a latch's countDown failed then: the lock stayed taken for its lease
  // (30 s), the semaphore's permit and the latch's count for good, their waiters parked.
  const connection = clusterOf().connect();
  const client = new LockClient({ redis: connection, queueTimeout: 1500 });
  const waiting = new LockClient({ redis: { clusterNodes: clusterOf().startupNodes }, queueTimeout: 1500 });
  const tag = '{half-release}';
  const migration = await halfMigration(connection, tag);
  try {
    const lock = client.getLock(`${tag}lock`);
    await lock.lock();
    const semaphore = client.getSemaphore(`${tag}semaphore`);
    await semaphore.trySetPermits(1);
    await semaphore.acquire();
    const permits = client.getPermitExpirableSemaphore(`${tag}permits`);
    await permits.trySetPermits(1);
    const id = await permits.acquire();
    const latch = client.getCountDownLatch(`${tag}latch`);
    await latch.trySetCount(1);
    const waits = [waiting.getLock(`${tag}lock`).lock(), waiting.getSemaphore(`${tag}semaphore`).acquire(), waiting.getPermitExpirableSemaphore(`${tag}permits`).acquire(), waiting.getCountDownLatch(`${tag}latch`).await()].map((wait) =>
      wait.then(
        () => 'got it',
        (error: Error) => error.message,
      ),
    );
    await until('the waiters parked', () => waiting.stats.waiters === 4, 10_000);
    await migration.half(`${tag}lock`); // one key moved: every script of the tag is refused
    const settled: string[] = [];
    const giveBacks = [lock.unlock(), semaphore.release(), permits.release(id), latch.countDown()].map((call, i) =>
      call.then(
        () => settled.push(`${i}: ok`),
        (error: Error) => settled.push(`${i}: ${error.message}`),
      ),
    );
    // Well past ioredis's redirections.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(settled).toEqual([]);
    const endedAt = performance.now();
    await migration.finish();
    await Promise.all(giveBacks);
    expect(settled.sort()).toEqual(['0: ok', '1: ok', '2: ok', '3: ok']);
    expect(await Promise.all(waits)).toEqual(['got it', 'got it', 'got it', 'got it']);
    // Well before the lock's 30 s lease.
    expect(performance.now() - endedAt).toBeLessThan(5000);
  } finally {
    await client.close();
    await waiting.close();
    connection.disconnect();
    await migration.finish();
  }
}, 60_000);
