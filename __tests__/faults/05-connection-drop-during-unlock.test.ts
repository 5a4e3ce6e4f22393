// Fault 5: the command connection drops during unlock(), after Redis ran the release and before
// its reply arrived. ioredis resends the call on reconnect; the latch must stop a second decrement.
import { RedisCommandError } from '../../src';
import { TcpProxy } from '../helpers/tcpProxy';
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

test('a resent last release succeeds, reports no loss and leaves no latch behind', async () => {
  const client = redis.client({ redis: proxy.url });
  const name = 'drop-during-last-unlock';
  const lost = jest.fn();
  client.on('lockLost', lost);
  const lock = client.getLock(name);
  await lock.lock();
  proxy.cutOnNextReply();
  // The resend finds the lock gone (its first run released it): that is a success, not a loss.
  await lock.unlock();
  expect(await redis.admin.exists(name)).toBe(0);
  expect(lost).not.toHaveBeenCalled();
  // The reply of the resend arrived, so the latch was deleted.
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(await redis.admin.keys('rlock__unlock_latch:*')).toEqual([]);
});

test('an unlock whose outcome stays unknown rejects with RedisCommandError, and the lock is no longer renewed', async () => {
  // A proxy of its own, which stops taking connections: the resend has nowhere to go, and
  // ioredis gives up after one retry.
  const lonely = await TcpProxy.start(redis.server.port);
  const client = redis.client({ redis: { host: '127.0.0.1', port: lonely.port, maxRetriesPerRequest: 1 } });
  const lock = client.getLock('drop-unknown-outcome');
  await lock.lock(); // under the watchdog
  expect(client.stats.renewals).toBe(1);
  lonely.stopAccepting();
  lonely.cutOnNextReply();
  await expect(lock.unlock()).rejects.toBeInstanceOf(RedisCommandError);
  // Had the release not run, nothing would keep the lock alive past its lease.
  expect(client.stats.renewals).toBe(0);
  await lonely.close();
});
