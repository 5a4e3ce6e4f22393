// Fault 5: the command connection drops during unlock(), after Redis ran the release and before
// its reply arrived. ioredis resends the call on reconnect; the latch must stop a second decrement.
import { type LockClient, LockLostError, NotLockOwnerError, RedisCommandError } from '../../src';
import { TcpProxy, useReplyCuts } from '../helpers/tcpProxy';
import { commandCounts } from '../helpers/testRedis';
import { usePrivateRedis } from '../helpers/privateRedis';

const redis = usePrivateRedis();
let proxy: TcpProxy;
beforeAll(async () => {
  proxy = await TcpProxy.start(redis.server.port);
});
afterAll(async () => {
  await proxy.close();
});

async function releaseCalls(): Promise<number> {
  const counts = await commandCounts(redis.admin);
  return (counts.evalsha ?? 0) + (counts.eval ?? 0);
}

test('a resent release is answered from its latch: the hold count goes down once', async () => {
  expect.assertions(5); // four of them in the callback: it must run
  const client = redis.client({ redis: proxy.url });
  const name = 'drop-during-unlock';
  await client.getLock(name).withLock(async () => {
    const inner = client.getLock(name);
    await inner.lock({ leaseTime: 30_000 }); // two holds, one owner
    const [field] = await redis.admin.hkeys(name);
    expect(await redis.admin.hget(name, field!)).toBe('2');

    const before = await releaseCalls();
    proxy.cutOnNextReply();
    await inner.unlock();
    expect(proxy.cuts).toBe(1);
    // Redis ran the release twice (first call and its resend) yet counted one release.
    expect((await releaseCalls()) - before).toBe(2);
    expect(await redis.admin.hget(name, field!)).toBe('1');
  }, { leaseTime: 30_000 }); // leased: no watchdog call to muddle the count
  expect(await redis.admin.exists(name)).toBe(0);
});

test('a resent last release succeeds from its latch and reports no loss; the latch expires by itself', async () => {
  const client = redis.client({ redis: proxy.url });
  const name = 'drop-during-last-unlock';
  const lost = jest.fn();
  client.on('lockLost', lost);
  const lock = client.getLock(name);
  await lock.lock();
  const before = await releaseCalls();
  const cuts = proxy.cuts;
  proxy.cutOnNextReply();
  // The resend finds the latch its first run left: "released", not "not held".
  await lock.unlock();
  expect(proxy.cuts - cuts).toBe(1);
  expect((await releaseCalls()) - before).toBe(2);
  expect(await redis.admin.exists(name)).toBe(0);
  expect(lost).not.toHaveBeenCalled();
  const [latch] = await redis.admin.keys(`rlock__unlock_latch:{${name}}:*`);
  expect(await redis.admin.pttl(latch!)).toBeGreaterThan(0);
});

test('a hold force-unlocked before a release that spans a reconnect is reported lost, not released', async () => {
  const client = redis.client({ redis: proxy.url });
  const name = 'forced-then-drop-during-unlock';
  const lost: string[] = [];
  client.on('lockLost', ({ name: lostName }) => lost.push(lostName));
  const lock = client.getLock(name);
  await lock.lock(); // under the watchdog
  expect(await redis.client().getLock(name).forceUnlock()).toBe(true);
  const before = await releaseCalls();
  const cuts = proxy.cuts;
  proxy.cutOnNextReply();
  // First run and resend both find the field gone and no latch: the hold was taken away.
  await expect(lock.unlock()).rejects.toBeInstanceOf(NotLockOwnerError);
  expect(proxy.cuts - cuts).toBe(1);
  expect((await releaseCalls()) - before).toBe(2);
  expect(lost).toEqual([name]);
  expect(client.stats.renewals).toBe(0);
});

test('a force between acquire and release is reported lost; inside withLock it aborts the scope', async () => {
  const client = redis.client();
  const operator = redis.client();
  const name = 'forced-before-unlock';
  const lost: string[] = [];
  client.on('lockLost', ({ name: lostName }) => lost.push(lostName));
  const lock = client.getLock(name);
  await lock.lock();
  await operator.getLock(name).forceUnlock();
  await expect(lock.unlock()).rejects.toBeInstanceOf(NotLockOwnerError);
  expect(lost).toEqual([name]);

  // A nested hold released after the force: the scope learns it lost the lock.
  let aborted: unknown;
  const outcome = client.getLock(name).withLock(async (signal) => {
    const inner = client.getLock(name);
    await inner.lock();
    await operator.getLock(name).forceUnlock();
    await expect(inner.unlock()).rejects.toBeInstanceOf(NotLockOwnerError);
    aborted = signal.reason;
  });
  await expect(outcome).rejects.toBeInstanceOf(LockLostError);
  expect(aborted).toBeInstanceOf(LockLostError);
  expect(lost).toEqual([name, name]);
  // A leased hold (no watchdog) is told by the NotLockOwnerError alone.
  await lock.lock({ leaseTime: 10_000 });
  await operator.getLock(name).forceUnlock();
  await expect(lock.unlock()).rejects.toBeInstanceOf(NotLockOwnerError);
  expect(lost).toEqual([name, name]);
});

test('an unlock whose outcome stays unknown rejects with RedisCommandError, and the lock is no longer renewed', async () => {
  // A proxy of its own, which stops taking connections: the resend has nowhere to go, and
  // ioredis gives up after one retry.
  const lonely = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: { host: '127.0.0.1', port: lonely.port, maxRetriesPerRequest: 1 } });
    const lock = client.getLock('drop-unknown-outcome');
    await lock.lock(); // under the watchdog
    expect(client.stats.renewals).toBe(1);
    lonely.stopAccepting();
    lonely.cutOnNextReply();
    await expect(lock.unlock()).rejects.toBeInstanceOf(RedisCommandError);
    // Had the release not run, nothing would keep the lock alive past its lease.
    expect(client.stats.renewals).toBe(0);
  } finally {
    await lonely.close(); // also when an expectation failed: its server must not outlive the suite
  }
});

describe('every reentrant lock: a release resent after a reconnect gives back one hold, and the last one frees it once', () => {
  // The semaphores' and the latch's resends have their own tests (semaphore, permitExpirableSemaphore, countDownLatch).
  const cuts = useReplyCuts(redis);
  // Leased: no watchdog renewal (the reconnect renews every kept lock at once) joins the script calls counted.
  const leased = { leaseTime: 30_000 };
  interface Reentrant {
    withLock(fn: () => Promise<void>, options: typeof leased): Promise<void>;
    lock(options: typeof leased): Promise<unknown>;
    unlock(): Promise<void>;
    getHoldCount(): Promise<number>;
    isLocked(): Promise<boolean>;
  }
  const handles: Record<string, (client: LockClient, name: string) => Reentrant> = {
    fair: (client, name) => client.getFairLock(name),
    fenced: (client, name) => {
      const lock = client.getFencedLock(name);
      return { withLock: (fn, options) => lock.withLock(fn, options), lock: (options) => lock.lock(options), unlock: () => lock.unlock(), getHoldCount: () => lock.getHoldCount(), isLocked: () => lock.isLocked() };
    },
    read: (client, name) => client.getReadWriteLock(name).readLock(),
    write: (client, name) => client.getReadWriteLock(name).writeLock(),
  };

  test.each(Object.keys(handles))('%s', async (kind) => {
    expect.assertions(10); // eight of them in the callback (two per resend): it must run
    const name = `drop-during-unlock-${kind}`;
    const client = redis.client({ redis: cuts.url });
    const other = redis.client();
    const outer = handles[kind]!(client, name);
    await outer.withLock(async () => {
      const inner = handles[kind]!(client, name);
      await inner.lock(leased); // two holds, one owner
      expect(await inner.getHoldCount()).toBe(2);
      await cuts.resent(() => inner.unlock());
      expect(await inner.getHoldCount()).toBe(1);
      // The last hold, resent too: released once (a second run would find no hold and report a loss).
      await cuts.resent(() => inner.unlock());
      expect(await inner.getHoldCount()).toBe(0);
      expect(await handles[kind]!(other, name).isLocked()).toBe(false);
      // Entered again: the withLock's own release below is the only one left.
      await inner.lock(leased);
    }, leased);
    expect(await handles[kind]!(other, name).isLocked()).toBe(false);
    expect(await redis.admin.exists(name)).toBe(0);
  });
});

describe('an acquire resent after a reconnect: Redis may count the hold twice, and unlock() gives back both', () => {
  const cuts = useReplyCuts(redis);
  const leased = { leaseTime: 30_000 }; // no watchdog renewal joins the script calls counted
  const kinds: Record<string, (client: LockClient, name: string) => { lock(options: typeof leased): Promise<unknown>; unlock(): Promise<void>; getHoldCount(): Promise<number> }> = {
    plain: (client, name) => client.getLock(name),
    fair: (client, name) => client.getFairLock(name),
    fenced: (client, name) => client.getFencedLock(name),
    read: (client, name) => client.getReadWriteLock(name).readLock(),
    write: (client, name) => client.getReadWriteLock(name).writeLock(),
  };

  test.each(Object.keys(kinds))('%s', async (kind) => {
    const name = `drop-during-acquire-${kind}`;
    const client = redis.client({ redis: cuts.url });
    const lost = jest.fn();
    client.on('lockLost', lost);
    const lock = kinds[kind]!(client, name);
    expect(await lock.getHoldCount()).toBe(0); // connected: the reply cut below is the acquire's
    // Redis ran the acquire, its reply was cut, ioredis sent it again: the second run re-enters.
    await cuts.resent(() => lock.lock(leased));
    // The fair lock's acquire is idempotent: a field of the owner's own that its first run wrote
    // is taken as is, as a grant made while it waited would be (fairLock/acquire-3.lua).
    expect(await lock.getHoldCount()).toBe(kind === 'fair' ? 1 : 2);
    // A handle's own owner holds once: the hold Redis counted on top goes back with it, instead
    // of keeping the lock for its whole lease after the owner let go.
    await lock.unlock();
    expect(await redis.admin.exists(name)).toBe(0);
    expect(lost).not.toHaveBeenCalled();
  });
});
