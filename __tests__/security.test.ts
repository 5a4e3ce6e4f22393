// Least-privilege ACL users and tenants kept apart, on a private redis-server (docs/security.md).
import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { InvalidArgumentError, LockClient, RedisCommandError } from '../src';
import { clientQueueExpiryKeyOf, clientQueueKeyOf, derivedName, grantChannelPrefixOf, kindKeyOf, latchChannelOf, latchOpsKeyOf, latchPrefixOf, latchRoundsKeyOf, permitChannelOf, permitsKeyOf, queueExpiryKeyOf, queueKeyOf, reservationKeyOf, semaphoreChannelOf, wakeChannelPrefixOf } from '../src/names';

/** A plain lock's wake channel for one client. */
const channelOf = (prefix: string, key: string, clientId = 'Zq3xNbW1mBvH9sTyK0aL_'): string => wakeChannelPrefixOf(prefix, key) + clientId;
import { runCli } from './helpers/cliInProcess';
import { subscribers, usePrivateRedis } from './helpers/privateRedis';
import { until } from './helpers/time';

const redis = usePrivateRedis();

/** The commands of the exact recipe in docs/security.md (single node; keep the two identical). */
const EXACT_COMMANDS =
  '+evalsha +eval +exists +hexists +hget +hgetall +hkeys +hincrby +pexpire +pttl +del +get +set ' +
  '+publish +subscribe +unsubscribe +pubsub|numsub +scan +client|setname ' +
  // The fair lock's queue.
  '+hset +time +zadd +zrange +zrangebyscore +zrem +zremrangebyscore +zscore';

/** What the semaphores and the latch add to the exact recipe (docs/security.md; keep the two identical). */
const SEMAPHORE_COMMANDS = '+incrby +decrby +decr +zcount +sadd +sismember';

/** What the read-write lock adds to the exact recipe (docs/security.md; keep the two identical). */
const READ_WRITE_COMMANDS = '+hdel +zcard +pexpireat';

const USERS: Record<string, string> = {
  // The recipe: everything but @dangerous, on the prefix only.
  app: 'on >pw-app resetkeys resetchannels ~app:* &app:* +@all -@dangerous',
  // The exact recipe: only the commands rlock sends.
  'app-exact': `on >pw-exact resetkeys resetchannels ~app:* &app:* -@all ${EXACT_COMMANDS}`,
  // The exact recipe plus CLIENT LIST, for holder names in inspect().
  'app-names': `on >pw-names resetkeys resetchannels ~app:* &app:* -@all ${EXACT_COMMANDS} +client|list`,
  // The exact recipe plus what the semaphores and the latch run in their scripts.
  'app-sem': `on >pw-sem resetkeys resetchannels ~app:* &app:* -@all ${EXACT_COMMANDS} ${SEMAPHORE_COMMANDS}`,
  // The exact recipe plus what the read-write lock runs in its scripts.
  'app-rw': `on >pw-rw resetkeys resetchannels ~app:* &app:* -@all ${EXACT_COMMANDS} ${READ_WRITE_COMMANDS}`,
  // Another tenant.
  other: 'on >pw-other resetkeys resetchannels ~other:* &other:* +@all -@dangerous',
};

const clients: LockClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

beforeAll(async () => {
  for (const [user, rules] of Object.entries(USERS)) await redis.admin.call('ACL', 'SETUSER', user, ...rules.split(' '));
});

function urlOf(user: string): string {
  const password = /^on >(\S+)/.exec(USERS[user]!)![1]!;
  return `redis://${user}:${password}@127.0.0.1:${redis.server.port}`;
}

function clientAs(user: string, keyPrefix: string, options: { watchdogTimeout?: number; name?: string } = {}): LockClient {
  const client = new LockClient({ redis: urlOf(user), keyPrefix, ...options });
  clients.push(client);
  return client;
}

/** What the server refused since the last ACL LOG RESET: `<username> <object>` per entry. */
async function aclDenials(): Promise<string[]> {
  const entries = (await redis.admin.call('ACL', 'LOG')) as unknown[][];
  return entries
    .map((entry) => {
      const fields = new Map<string, unknown>();
      for (let i = 0; i < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
      return `${String(fields.get('username'))} ${String(fields.get('reason'))}:${String(fields.get('object'))}`;
    })
    .sort();
}

const expectNoPerm = async (call: () => Promise<unknown>): Promise<void> => {
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RedisCommandError);
  expect((error as RedisCommandError).code).toBe('NOPERM');
};

describe('names: every key and channel starts with keyPrefix and hashes to the lock key slot', () => {
  const names = ['plain', '{other:v}', 'a}b', '{}x', 'x{', 'x{y}z', '*', '?', '[a-z]*', 'line\nbreak', '}{', 'rlock__channel:{other:v}', 'é'.repeat(400)];
  test.each(['', 'app:', '{tenant}:', 'a}b:', '{t}{'])('prefix %j', (prefix) => {
    expect.assertions(names.length * 12);
    for (const name of names) {
      const key = prefix + name;
      const slot = calculateSlot(key);
      const channel = channelOf(prefix, key);
      const latch = `${latchPrefixOf(prefix, key)}Zq3xNbW1mBvH9sTyK0aL_`;
      const grant = `${grantChannelPrefixOf(prefix, key)}Zq3xNbW1mBvH9sTyK0aL_`;
      expect(channel.startsWith(`${prefix}rlock__channel:`)).toBe(true);
      expect(latch.startsWith(`${prefix}rlock__unlock_latch:`)).toBe(true);
      expect(calculateSlot(channel)).toBe(slot);
      expect(calculateSlot(latch)).toBe(slot);
      // The fair lock's names.
      for (const fairName of [queueKeyOf(prefix, key), queueExpiryKeyOf(prefix, key), grant]) {
        expect(fairName.startsWith(`${prefix}rlock__`) && calculateSlot(fairName) === slot).toBe(true);
      }
      // The plain lock's queue of waiting clients.
      for (const queueName of [clientQueueKeyOf(prefix, key), clientQueueExpiryKeyOf(prefix, key)]) {
        expect(queueName.startsWith(`${prefix}rlock__`) && calculateSlot(queueName) === slot).toBe(true);
      }
      expect(new Set([channel, latch, grant, queueKeyOf(prefix, key), queueExpiryKeyOf(prefix, key), clientQueueKeyOf(prefix, key), clientQueueExpiryKeyOf(prefix, key)]).size).toBe(7);
      expect(derivedName(prefix, 'queue', key)).not.toBe(channel); // a kind of its own
      expect(channel).toContain(key); // unique per lock
    }
  });

  test.each(['', 'app:', '{tenant}:', 'a}b:'])('the semaphores\' and the latch\'s names, prefix %j', (prefix) => {
    for (const name of names) {
      const key = prefix + name;
      const derived = [
        semaphoreChannelOf(prefix, key), reservationKeyOf(prefix, key), permitsKeyOf(prefix, key), permitChannelOf(prefix, key), latchChannelOf(prefix, key),
        kindKeyOf(prefix, key), latchOpsKeyOf(prefix, key), latchRoundsKeyOf(prefix, key),
      ];
      for (const derivedKey of derived) expect(derivedKey.startsWith(`${prefix}rlock__`) && calculateSlot(derivedKey) === calculateSlot(key)).toBe(true);
      expect(new Set([...derived, channelOf(prefix, key), queueKeyOf(prefix, key)]).size).toBe(10);
    }
  });

  test('the common names', () => {
    expect(channelOf('app:', 'app:orders:1', 'c')).toBe('app:rlock__channel:{app:orders:1}:c');
    expect(latchPrefixOf('app:', 'app:orders:1')).toBe('app:rlock__unlock_latch:{app:orders:1}:');
    expect(channelOf('app:', 'app:{user:1}:orders', 'c')).toBe('app:rlock__channel:app:{user:1}:orders:c');
    expect(clientQueueKeyOf('app:', 'app:orders:1')).toBe('app:rlock__clients:{app:orders:1}');
    // Unchanged without a prefix: the names before 0.2.0.
    expect(channelOf('', 'orders:1', 'c')).toBe('rlock__channel:{orders:1}:c');
  });

  test('a keyPrefix whose "{" opens no hash tag of its own is refused before anything is sent', () => {
    for (const keyPrefix of ['a{b:', '{}app:', 'x{']) {
      expect(() => new LockClient({ redis: redis.server.url, keyPrefix })).toThrow(InvalidArgumentError);
    }
  });
});

describe.each([
  ['app', undefined],
  ['app-exact', undefined],
  ['app-names', 'holder'],
])('as ACL user %s', (user, holderName) => {
  test('lock, wait and wake by message, reentry, watchdog, force unlock, inspect, listLocks and the fair lock work, and nothing is refused but CLIENT LIST', async () => {
    const warn = jest.spyOn(console, 'warn');
    await redis.admin.call('ACL', 'LOG', 'RESET');
    await redis.admin.script('FLUSH'); // so that the EVAL fallback on NOSCRIPT runs too
    try {
      const holder = clientAs(user, 'app:', { name: 'holder' });
      const waiter = clientAs(user, 'app:');
      const lost: unknown[] = [];
      holder.on('lockLost', (event) => lost.push(event));
      holder.on('renewalFailed', (error) => lost.push(error));

      // Lock (watchdog lease 30 s), a waiter parks, and is woken by the release message long before that lease.
      const lock = holder.getLock('orders:1');
      await lock.lock();
      const waiterLock = waiter.getLock('orders:1');
      const waiting = waiterLock.tryLock({ waitTime: 20_000, leaseTime: 5000 });
      // Subscribed, then in line (its attempt after subscribing put its client in the queue).
      await until('the waiter parked, subscribed and in line', async () => waiter.stats.waiters === 1 && (await subscribers(redis.admin, 'app:orders:1', 'app:')) === 1 && (await waiter.inspect('orders:1')).waitingClients === 1);
      const info = await waiter.inspect('orders:1');
      expect(info).toMatchObject({ key: 'app:orders:1', locked: true, waitingClients: 1 });
      expect(info.holders).toEqual([{ clientId: holder.id, ownerId: expect.any(String), holdCount: 1, clientName: holderName }]);
      expect(info.ttl).toBeGreaterThan(20_000);
      const releasedAt = performance.now();
      await lock.unlock();
      expect(await waiting).toBe(true);
      expect(performance.now() - releasedAt).toBeLessThan(15_000); // not the 30 s lease: the message woke it
      await waiterLock.unlock();

      // Reentry inside withLock: the partial release writes its latch key.
      await holder.getLock('nested').withLock(async () => {
        await holder.getLock('nested').withLock(async () => {
          expect(await holder.getLock('nested').getHoldCount()).toBe(2);
        });
        expect(await holder.getLock('nested').isHeldByCurrentOwner()).toBe(true);
      });
      expect(await holder.getLock('nested').isLocked()).toBe(false);

      // The watchdog renews a lock past several of its leases.
      const short = clientAs(user, 'app:', { watchdogTimeout: 1_000 });
      short.on('lockLost', (event) => lost.push(event));
      await short.getLock('kept').lock();
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      expect(await short.getLock('kept').remainTimeToLive()).toBeGreaterThan(0);

      // listLocks and force unlock.
      const listed: string[] = [];
      for await (const name of waiter.listLocks()) listed.push(name);
      expect(listed).toEqual(['kept']);
      expect(await waiter.getLock('kept').forceUnlock()).toBe(true);
      expect(await redis.admin.exists('app:kept')).toBe(0);
      await until('the watchdog noticed the force unlock', () => lost.length === 1);
      expect(lost).toEqual([expect.objectContaining({ name: 'kept' })]);

      // The fair lock: a queued waiter, handed the lock by the release (grant channel), inspect's queue, force unlock.
      const fair = holder.getFairLock('fair');
      // A queue entry its process stopped refreshing long ago: the next acquire purges it.
      await redis.admin.zadd(queueKeyOf('app:', 'app:fair'), 1, 'gone');
      await redis.admin.zadd(queueExpiryKeyOf('app:', 'app:fair'), 1, 'gone');
      await fair.lock();
      const fairWaiter = waiter.getFairLock('fair');
      const fairWaiting = fairWaiter.tryLock({ waitTime: 20_000 });
      await until('the fair waiter is queued', async () => (await fair.inspect()).queue?.length === 1);
      await fair.unlock();
      expect(await fairWaiting).toBe(true);
      expect(await holder.getFairLock('fair').tryLock()).toBe(false);
      expect(await holder.getFairLock('fair').forceUnlock()).toBe(true);
      expect(await redis.admin.exists('app:fair')).toBe(0);

      expect(warn).not.toHaveBeenCalled();
      expect(await aclDenials()).toEqual(holderName ? [] : [`${user} command:client|list`]);
    } finally {
      warn.mockRestore();
    }
  });
});

test('as ACL user app-sem (the exact recipe plus the semaphores\' commands): semaphores, permits with the watchdog and a latch, waits woken by message, nothing refused', async () => {
  await redis.admin.call('ACL', 'LOG', 'RESET');
  await redis.admin.script('FLUSH'); // so that the EVAL fallback on NOSCRIPT runs too
  const a = clientAs('app-sem', 'app:', { watchdogTimeout: 1_000 });
  const b = clientAs('app-sem', 'app:');
  const sem = a.getSemaphore('sem');
  expect(await sem.trySetPermits(2)).toBe(true);
  await sem.acquire({ permits: 2 });
  const big = b.getSemaphore('sem').tryAcquire({ permits: 2, waitTime: 10_000 }); // reserves
  await until('the reservation is made', async () => (await redis.admin.exists(reservationKeyOf('app:', 'app:sem'))) === 1);
  await sem.release({ permits: 2 });
  expect(await big).toBe(true);
  expect(await sem.drainPermits()).toBe(0);
  expect((await sem.inspect()).availablePermits).toBe(0);
  const pes = a.getPermitExpirableSemaphore('pes');
  await pes.trySetPermits(1);
  const id = await pes.acquire();
  const waiting = b.getPermitExpirableSemaphore('pes').acquire({ leaseTime: 5_000 });
  await until('the permit waiter parked', () => b.stats.waiters === 1);
  await new Promise((resolve) => setTimeout(resolve, 2_100)); // past two watchdog leases
  expect(await pes.updateLeaseTime(id, 60_000)).toBe(true);
  expect((await pes.inspect()).permits).toHaveLength(1);
  await pes.release(id);
  await b.getPermitExpirableSemaphore('pes').release(await waiting);
  expect(await pes.availablePermits()).toBe(1);
  const latch = a.getCountDownLatch('latch');
  await latch.trySetCount(1);
  const opened = b.getCountDownLatch('latch').await({ waitTime: 10_000 });
  await until('the awaiter parked', () => b.stats.waiters === 1);
  await latch.countDown();
  expect(await opened).toBe(true);
  expect((await latch.inspect()).count).toBe(0);
  expect(await aclDenials()).toEqual([]);
});

test("as ACL user app-rw (the exact recipe plus the read-write lock's commands): reads, a waiting writer woken by message, downgrade, watchdog, leave, force unlock, nothing refused but CLIENT LIST", async () => {
  await redis.admin.call('ACL', 'LOG', 'RESET');
  await redis.admin.script('FLUSH'); // so that the EVAL fallback on NOSCRIPT runs too
  const a = clientAs('app-rw', 'app:', { watchdogTimeout: 1_000 });
  const b = clientAs('app-rw', 'app:');
  const rw = a.getReadWriteLock('rw');
  await rw.readLock().lock();
  expect(await b.getReadWriteLock('rw').readLock().tryLock({ leaseTime: 200 })).toBe(true);
  const writer = b.getReadWriteLock('rw').writeLock();
  const writing = writer.tryLock({ waitTime: 10_000 });
  await until('the writer waits', async () => (await rw.readLock().inspect()).waitingWriters === 1);
  await new Promise((resolve) => setTimeout(resolve, 2_100)); // past two watchdog leases, and the short lease ran out
  expect(await rw.readLock().getHoldCount()).toBe(1);
  await rw.readLock().unlock();
  expect(await writing).toBe(true);
  await b.getReadWriteLock('rw').readLock().tryLock({ waitTime: 50 }); // gives up behind the writer
  const downgraded = b.getReadWriteLock('rw2');
  await downgraded.writeLock().lock();
  await downgraded.readLock().lock();
  await downgraded.writeLock().unlock();
  expect(await downgraded.readLock().isLocked()).toBe(true);
  const aborted = new AbortController();
  const leaving = a.getReadWriteLock('rw2').writeLock().lock({ signal: aborted.signal });
  await until('the second writer waits', async () => (await downgraded.readLock().inspect()).waitingWriters === 1);
  aborted.abort();
  await expect(leaving).rejects.toMatchObject({ name: 'AbortError' });
  expect(await a.getReadWriteLock('rw2').readLock().forceUnlock()).toBe(true);
  await writer.unlock();
  // inspect() asks CLIENT LIST for holder names, which the exact recipe leaves out on purpose.
  expect((await aclDenials()).filter((denial) => denial !== 'app-rw command:client|list')).toEqual([]);
});

describe('tenants apart: a user scoped to other: cannot touch app: locks', () => {
  test('read, take, release, force-unlock, wake and subscribe all fail with NOPERM; the lock stays as it was', async () => {
    const victim = clientAs('app', 'app:');
    const lock = victim.getLock('v');
    await lock.lock();
    const before = await redis.admin.hgetall('app:v');

    // The attacker points a LockClient at the victim's prefix.
    const attacker = clientAs('other', 'app:');
    const theirs = attacker.getLock('v');
    expect.assertions(2 * 15 + 1 + 6);
    await expectNoPerm(() => theirs.tryLock());
    await expectNoPerm(() => theirs.lock());
    await expectNoPerm(() => theirs.tryLock({ waitTime: 1000 }));
    await expectNoPerm(() => theirs.unlock());
    await expectNoPerm(() => theirs.forceUnlock());
    await expectNoPerm(() => theirs.inspect());
    await expectNoPerm(() => theirs.isLocked());
    await expectNoPerm(() => theirs.remainTimeToLive());
    await expectNoPerm(async () => {
      for await (const name of attacker.listLocks()) void name;
    });
    const theirFair = attacker.getFairLock('v');
    await expectNoPerm(() => theirFair.tryLock({ waitTime: 1000 }));
    await expectNoPerm(() => theirFair.forceUnlock());
    await expectNoPerm(() => theirFair.inspect());

    // And by hand: publish a release, subscribe to the channel, delete the key, from a script too.
    const raw = new Redis(urlOf('other'), { enableReadyCheck: false });
    const sub = raw.duplicate();
    try {
      const channel = channelOf('app:', 'app:v');
      await expectNoPerm(() => raw.publish(channel, '0').catch((e) => Promise.reject(new RedisCommandError('publish', e))));
      await expectNoPerm(() => sub.subscribe(channel).catch((e) => Promise.reject(new RedisCommandError('subscribe', e))));
      await expectNoPerm(() => raw.del('app:v').catch((e) => Promise.reject(new RedisCommandError('del', e))));
      // A key a script did not declare is checked when the script calls it: Redis answers ERR then.
      await expect(raw.eval("return redis.call('del', 'app:v')", 0)).rejects.toThrow(/^ERR The user executing the script can't access at least one of the keys/);
    } finally {
      raw.disconnect();
      sub.disconnect();
    }

    // The attacker's own prefix, with names that try to climb out of it.
    const own = clientAs('other', 'other:');
    for (const name of ['{app:v}', '../app:v', '}app:v', 'x}{app:v}']) {
      await own.getLock(name).lock({ leaseTime: 5000 });
      await own.getLock(name).forceUnlock();
    }

    expect(await redis.admin.hgetall('app:v')).toEqual(before);
    expect(await redis.admin.pttl('app:v')).toBeGreaterThan(20_000);
    expect(await lock.isHeldByCurrentOwner()).toBe(true);
    await lock.unlock();
    expect(await redis.admin.exists('app:v')).toBe(0);
    expect(before).not.toEqual({});
    expect(Object.keys(before)[0]!.startsWith(`${victim.id}:`)).toBe(true);
  });
});

describe('names chosen by an attacker stay under the prefix', () => {
  test('braces, globs, newlines and 1 KiB names lock, wake and release as the exact ACL user, with nothing refused', async () => {
    await redis.admin.call('ACL', 'LOG', 'RESET');
    const a = clientAs('app-exact', 'app:');
    const b = clientAs('app-exact', 'app:');
    const names = ['{other:v}', 'a}b', '{}x', 'x{', '*', '?', '[a-z]*', 'line\nbreak', '}{', 'rlock_channel:{other:v}', 'x'.repeat(1020)];
    for (const name of names) {
      await a.getLock(name).withLock(async () => {
        await a.getLock(name).withLock(async () => undefined); // a partial release: the latch
        const bLock = b.getLock(name);
        const waiting = bLock.tryLock({ waitTime: 20_000, leaseTime: 5000 });
        await until('the waiter parked', () => b.stats.waiters === 1);
        return { bLock, waiting }; // not awaited by withLock: the waiter gets the lock once it is released
      }).then(async ({ bLock, waiting }) => {
        expect(await waiting).toBe(true);
        await bLock.unlock();
      });
    }
    expect(await aclDenials()).toEqual([]);
    // A name one byte too long is refused before anything is sent, and so is one under the
    // library's own `rlock__` keys (it could be another lock's queue or wake channel).
    expect(() => a.getLock('x'.repeat(1021))).toThrow(InvalidArgumentError);
    expect(() => a.getLock('rlock__channel:{other:v}')).toThrow(InvalidArgumentError);
  });
});

describe('what an ACL cannot stop (docs/security.md says so)', () => {
  test('one who may publish on the prefix can forge a fair lock grant: the queued waiter believes it holds the lock until its watchdog looks', async () => {
    const holder = clientAs('app', 'app:');
    const waiter = clientAs('app', 'app:', { watchdogTimeout: 600 });
    const lost: unknown[] = [];
    waiter.on('lockLost', (event) => lost.push(event));
    const fair = holder.getFairLock('forged');
    await fair.lock();
    const waiterLock = waiter.getFairLock('forged');
    const waiting = waiterLock.tryLock({ waitTime: 20_000 });
    await until('the waiter is queued', async () => (await fair.inspect()).queue?.length === 1);
    const [member] = await redis.admin.zrange(queueKeyOf('app:', 'app:forged'), 0, 0);
    const field = member!.slice(member!.indexOf(':') + 1); // `<lease>:<clientId>:<ownerId>`
    const forger = new Redis(urlOf('app-exact'), { enableReadyCheck: false });
    try {
      // A grant names its Redis time and lease (`<field>@<µs>:<ttl ms>`): a bare field, one
      // without a lease, or one stamped no later than the waiter's last attempt or later than
      // now is confirmed by an attempt, so the forger stamps Redis's time now, with a lease.
      const [seconds, micros] = await forger.time();
      const now = `${seconds}${String(micros).padStart(6, '0')}`;
      expect(await forger.publish(`${grantChannelPrefixOf('app:', 'app:forged')}${waiter.id}`, `${field}@${now}:5000`)).toBe(1);
    } finally {
      forger.disconnect();
    }
    expect(await waiting).toBe(true); // while the holder still holds it
    expect(await fair.isHeldByCurrentOwner()).toBe(true);
    await until('the waiter learnt it never held it', () => lost.length === 1);
    await fair.unlock();
  });

  test('another tenant sees key and channel names (SCAN, PUBSUB) and may flush scripts; one with write access to the prefix may delete a lock', async () => {
    const owner = clientAs('app', 'app:', { watchdogTimeout: 300 });
    const waiter = clientAs('app', 'app:');
    const lost: unknown[] = [];
    owner.on('lockLost', (event) => lost.push(event));
    const lock = owner.getLock('seen');
    await lock.lock();
    const waiterLock = waiter.getLock('seen');
    const waiting = waiterLock.tryLock({ waitTime: 20_000, leaseTime: 1000 });
    await until('the waiter subscribed', async () => (await subscribers(redis.admin, 'app:seen', 'app:')) === 1);

    const other = new Redis(urlOf('other'), { enableReadyCheck: false });
    const sameTenant = new Redis(urlOf('app-exact'), { enableReadyCheck: false });
    try {
      const [, keys] = await other.scan('0', 'MATCH', 'app:*', 'COUNT', 1000);
      expect(keys).toContain('app:seen');
      expect(await other.pubsub('CHANNELS', 'app:*')).toEqual([channelOf('app:', 'app:seen', waiter.id)]);
      expect(await other.script('FLUSH')).toBe('OK'); // allowed by +@all -@dangerous: costs an EVAL, nothing else
      expect(await sameTenant.del('app:seen')).toBe(1);
    } finally {
      other.disconnect();
      sameTenant.disconnect();
    }
    await until('the owner learnt of the loss', () => lost.length === 1);
    expect(await waiting).toBe(true); // the lock went to the waiter: the delete broke the owner's exclusion
    await waiterLock.unlock();
  });
});

describe('a database Redis refuses: each call fails with a typed error naming it, and nothing runs in database 0', () => {
  // Before, ioredis's SELECT after connecting only emitted an error, and every call then ran in
  // database 0: a lock taken there, beside another client's lock of the same name in the right one.
  const refusal = async (call: () => Promise<unknown>): Promise<RedisCommandError> => {
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RedisCommandError);
    return error as RedisCommandError;
  };
  const databaseAt = (db: number): Redis => new Redis(redis.server.port, '127.0.0.1', { db, disconnectTimeout: 0 });
  /** Resolves once the watchdog renewed `key` twice in the database `connection` is on: its PTTL went up again, twice. */
  const renewedTwiceIn = async (connection: Redis, key: string): Promise<void> => {
    let renewals = 0;
    let last = await connection.pttl(key);
    await until(`two renewals of ${key} in database ${connection.options.db}`, async () => {
      const now = await connection.pttl(key);
      if (now > last) renewals++;
      last = now;
      return renewals >= 2;
    });
  };

  test('an index past `databases` (99 of 16): locks, the fair lock, a semaphore, a latch and the plain reads fail; database 0 stays empty', async () => {
    const client = new LockClient({ redis: `${redis.server.url}/99`, keyPrefix: 'db99:' });
    clients.push(client);
    const calls = [
      () => client.getLock('a').lock(),
      () => client.getLock('a').tryLock({ waitTime: 50 }),
      () => client.getFairLock('b').lock(),
      () => client.getFencedLock('c').lock(),
      () => client.getReadWriteLock('d').writeLock().lock(),
      () => client.getSemaphore('e').trySetPermits(1),
      () => client.getCountDownLatch('f').trySetCount(1),
      // The plain reads too (no script): they used to answer from database 0.
      () => client.getLock('a').isLocked(),
      () => client.getLock('a').isHeldByCurrentOwner(),
      () => client.getLock('a').getHoldCount(),
      () => client.getLock('a').remainTimeToLive(),
      () => client.getLock('a').inspect(),
      () => client.getFairLock('b').inspect(),
      () => client.getReadWriteLock('d').readLock().inspect(),
      () => client.getSemaphore('e').availablePermits(),
      () => client.getSemaphore('e').inspect(),
      async () => {
        for await (const name of client.listLocks()) return name;
      },
    ];
    for (const call of calls) expect((await refusal(call)).message).toMatch(/cannot select database 99 \(ERR DB index is out of range\)/);
    expect(await redis.admin.keys('db99:*')).toEqual([]);
  });

  test('an ACL without +select (the exact recipe, database 5): refused, then granted +select, the same client and connection lock in database 5 and the watchdog renews there', async () => {
    await redis.admin.call('ACL', 'SETUSER', 'app-db', ...`on >pw-db resetkeys resetchannels ~app:* &app:* -@all ${EXACT_COMMANDS}`.split(' '));
    const client = new LockClient({ redis: `redis://app-db:pw-db@127.0.0.1:${redis.server.port}/5`, keyPrefix: 'app:', watchdogTimeout: 300 });
    clients.push(client);
    const lock = client.getLock('db5');
    // ioredis's own SELECT is refused as the connection comes up: a call waiting for it may be
    // told so; one made later is refused by its script.
    expect((await refusal(() => lock.lock())).message).toMatch(/NOPERM this user has no permissions to run the 'select' command|cannot select database 5 \(ERR The user executing the script can't run this command/);
    await until('the connection is up', () => (client as unknown as { redis: Redis }).redis.status === 'ready');
    expect((await refusal(() => lock.lock())).message).toMatch(/cannot select database 5 \(ERR The user executing the script can't run this command/);
    expect((await refusal(() => lock.isLocked())).message).toMatch(/cannot select database 5 \(NOPERM this user has no permissions to run the 'select' command\)/);
    expect(await redis.admin.exists('app:db5')).toBe(0);
    // Granted later (ioredis's own SELECT stays refused on this connection, which sits in database
    // 0): the calls go to database 5 from now on, with no reconnect.
    await redis.admin.call('ACL', 'SETUSER', 'app-db', '+select');
    const db5 = databaseAt(5);
    try {
      await lock.lock();
      expect(await db5.hlen('app:db5')).toBe(1);
      expect(await redis.admin.exists('app:db5')).toBe(0);
      await renewedTwiceIn(db5, 'app:db5');
      expect(await lock.isHeldByCurrentOwner()).toBe(true);
      await lock.unlock();
      expect(await db5.exists('app:db5')).toBe(0);
    } finally {
      db5.disconnect();
    }
  });

  test('BUSY at connect (ioredis’s SELECT refused while another client’s script runs long): the connection sits in database 0, yet locks, renewals, reads, listLocks and a nested release’s latch all go to database 2', async () => {
    const busy = redis.server.connect();
    const db2 = databaseAt(2);
    try {
      // The test's own connections are up (and db2's SELECT answered) before Redis turns BUSY:
      // one still connecting then had its SELECT refused, and read database 0.
      await busy.ping();
      expect(await db2.call('CLIENT', 'INFO')).toMatch(/ db=2 /);
      await redis.admin.config('SET', 'busy-reply-threshold', '50');
      // A script that runs 600 ms: every other call is answered BUSY after the first 50.
      const running = busy.eval("local t0 = redis.call('TIME') while true do local t = redis.call('TIME') if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 600000 then break end end return 1", 0);
      await until('Redis answers BUSY', () => redis.admin.ping().then(() => false, (error: Error) => /^BUSY/.test(error.message)));
      const client = new LockClient({ redis: `${redis.server.url}/2`, keyPrefix: 'busy:', watchdogTimeout: 300 });
      clients.push(client);
      const connection = (client as unknown as { redis: Redis }).redis;
      await until('ioredis’s SELECT was refused', async () => connection.status === 'ready');
      await running;
      // ioredis believes the connection is in database 2; Redis has it in 0.
      expect(await connection.call('CLIENT', 'INFO')).toMatch(/ db=0 /);
      const lock = client.getLock('r');
      await lock.withLock(async () => {
        // listLocks first: a read's SELECT moves the connection to database 2 for the calls after it.
        const names: string[] = [];
        for await (const name of client.listLocks()) names.push(name);
        expect(names).toEqual(['r']);
        await lock.withLock(async () => undefined); // a nested release: answered 0, its latch deleted
        expect(await lock.isHeldByCurrentOwner()).toBe(true);
        expect(await lock.getHoldCount()).toBe(1);
        await renewedTwiceIn(db2, 'busy:r');
        expect(await db2.keys('busy:*unlock_latch*')).toEqual([]);
      });
      // The last release's latch stays for its TTL (a resend would find it), as in any database.
      expect((await db2.keys('busy:*')).filter((key) => !key.includes('unlock_latch'))).toEqual([]);
      expect(await redis.admin.keys('busy:*')).toEqual([]);
    } finally {
      await redis.admin.config('SET', 'busy-reply-threshold', '5000');
      busy.disconnect();
      db2.disconnect();
    }
  });

  test('a connection passed in whose user selected another database keeps it: the library’s reads select its own and then the user’s again', async () => {
    const shared = databaseAt(1);
    const db3 = databaseAt(3);
    try {
      await shared.select(3);
      const client = new LockClient({ redis: shared });
      clients.push(client);
      const lock = client.getLock('shared');
      await lock.lock();
      expect(await lock.isLocked()).toBe(true);
      await shared.set('users-own', '1');
      expect(await db3.get('users-own')).toBe('1');
      await lock.unlock();
    } finally {
      shared.disconnect();
      db3.disconnect();
    }
  });

  test('a client on database 2 and one on database 0 hold locks of the same name at once, each in its own database', async () => {
    const inTwo = new LockClient({ redis: `${redis.server.url}/2` });
    const inZero = new LockClient({ redis: redis.server.url });
    clients.push(inTwo, inZero);
    await inTwo.getLock('same').lock();
    expect(await inZero.getLock('same').tryLock()).toBe(true);
    const db2 = databaseAt(2);
    try {
      expect(await db2.hlen('same')).toBe(1);
      expect(await redis.admin.hlen('same')).toBe(1);
    } finally {
      db2.disconnect();
    }
  });
});

test('the CLI as the exact ACL user: inspect, list and force-unlock work, with no warning and no holder name', async () => {
  const holder = clientAs('app-exact', 'app:');
  await holder.getLock('cli').lock();
  const env = { REDIS_URL: urlOf('app-exact') };
  const cli = (...args: string[]): ReturnType<typeof runCli> => runCli(['--prefix', 'app:', ...args], env);
  const inspected = await cli('inspect', 'cli');
  expect(inspected).toMatchObject({ code: 0, stderr: '' });
  expect(inspected.stdout).toMatch(/^cli \(key app:cli\): locked, ttl [\d.]+ s, 0 client\(s\) waiting\n {2}held by \S+ × 1, client \(unknown: not connected, or CLIENT LIST refused\)\n$/);
  expect(await cli('list', '--kind', 'lock')).toEqual({ code: 0, stdout: 'cli\n', stderr: '' });
  // Semaphores (of the app-sem test above) are told apart with the exact recipe's commands too (GET of their kind marker).
  expect(await cli('list', '--kind', 'semaphore')).toEqual({ code: 0, stdout: 'sem (semaphore)\n', stderr: '' });
  expect(await cli('force-unlock', 'cli', '--yes', '--if-holder', holder.id)).toMatchObject({ code: 0, stderr: '' });
  expect(await redis.admin.exists('app:cli')).toBe(0);
});
