// Fault 3: the subscriber connection is killed (CLIENT KILL TYPE pubsub) while waiters wait.
import { Redis } from 'ioredis';
import { holdAllWithWaiters } from '../helpers/contenders';
import type { ChannelEntry } from '../../src/services/ChannelEntry';
import { LockPubSub } from '../../src/services/LockPubSub';
import { commandCounts } from '../helpers/testRedis';
import { usePrivateRedis, parkedWaiters, subscribers } from '../helpers/privateRedis';
import { TcpProxy } from '../helpers/tcpProxy';
import { orAfter, until } from '../helpers/time';

const redis = usePrivateRedis();

test('it resubscribes, and the next unlock wakes the waiter long before its pttl', async () => {
  const holder = redis.client(); // default lease 30 s: a waiter relying on its pttl would wait that long
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat (a script call, a wake-up) within the test
  const name = 'subscriber-killed';
  const lock = holder.getLock(name);
  await lock.lock();
  let acquiredAt = 0;
  const waiter = waiting.getLock(name).withLock(async () => {
    acquiredAt = performance.now();
  });
  await until('the waiter subscribed', async () => (await subscribers(redis.admin, name)) === 1);

  const killed = await redis.admin.client('KILL', 'TYPE', 'pubsub');
  expect(killed).toBeGreaterThanOrEqual(1);
  await until('the subscriber came back', async () => (await subscribers(redis.admin, name)) === 1);
  const before = await commandCounts(redis.admin);

  const unlockedAt = performance.now();
  await lock.unlock();
  await waiter;
  expect(acquiredAt - unlockedAt).toBeLessThan(3_000); // room for a loaded machine; far below 30 s
  const after = await commandCounts(redis.admin);
  // One release, one acquire (maybe two if the reconnect wake-up raced the release), one release.
  expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBeLessThanOrEqual(4);
});

test('every waiter retries once on the reconnect, then sleeps again', async () => {
  const holder = redis.client();
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat among the script calls counted below
  const name = 'subscriber-killed:retry-once';
  const lock = holder.getLock(name);
  // Leased, so no watchdog renewal joins the script calls counted below; 30 s: no waiter wakes
  // on its pttl during the test.
  await lock.lock({ leaseTime: 30_000 });
  const waiters = [1, 2, 3].map(() => waiting.getLock(name).withLock(() => undefined));
  // Parked as handoff candidates: past their first attempts (and the retry after subscribing),
  // so that none of those is counted below.
  await until(
    'the waiters parked',
    async () => parkedWaiters(waiting, name) === 3 && (await subscribers(redis.admin, name)) === 1,
  );
  const attempts = async (): Promise<number> => (await commandCounts(redis.admin)).evalsha ?? 0;
  const before = await attempts();

  await redis.admin.client('KILL', 'TYPE', 'pubsub');
  await until('each waiter retried', async () => (await attempts()) - before >= 3);
  await new Promise((resolve) => setTimeout(resolve, 300)); // room for a second retry, if any came
  expect((await attempts()) - before).toBe(3);
  expect(waiting.stats.waiters).toBe(3);

  await lock.unlock();
  await Promise.all(waiters);
});

test('every primitive: releases published while the subscriber is away (killed) still reach their waiters, long before any lease', async () => {
  const holder = redis.client(); // default leases of 30 s
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat within the test
  const held = await holdAllWithWaiters(holder, waiting, 'subscriber-killed-family');
  const channels = async (): Promise<number> => {
    const list = String(await redis.admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
    return [...list.matchAll(/ sub=(\d+)/g)].reduce((sum, [, n]) => sum + Number(n), 0);
  };
  const subscribed = await channels();
  expect(subscribed).toBeGreaterThanOrEqual(held.length);
  // No new connection until the releases are out: the subscriber stays away meanwhile.
  const connected = Number(/connected_clients:(\d+)/.exec(await redis.admin.info('clients'))![1]);
  const [, maxclients] = (await redis.admin.config('GET', 'maxclients')) as [string, string];
  await redis.admin.config('SET', 'maxclients', String(connected - 1));
  let releasedAt: number;
  try {
    expect(await redis.admin.client('KILL', 'TYPE', 'pubsub')).toBeGreaterThanOrEqual(1);
    // Every release while the subscriber is away: their messages reach nobody.
    releasedAt = performance.now();
    await Promise.all(held.map(({ giveBack }) => giveBack()));
    expect(await channels()).toBe(0);
    expect(held.map(({ gotAt }) => gotAt())).toEqual(held.map(() => 0));
  } finally {
    await redis.admin.config('SET', 'maxclients', maxclients);
  }
  // The waiters retry once the subscriber is back.
  await Promise.all(held.map(({ waiter }) => waiter));
  for (const { kind, gotAt } of held) {
    // A latch's await has no bound at all; every other wait would last its 30 s lease.
    expect(gotAt() - releasedAt).toBeLessThan(3_000);
    console.log(`subscriber killed, ${kind}: the waiter had it ${Math.round(gotAt() - releasedAt)} ms after the release`);
  }
});

test("a channel joined while the subscriber's handshake runs is subscribed after it: the ready check is not refused and the connection is not dropped", async () => {
  // ioredis writes a SUBSCRIBE at once while the connection is up but not ready (SUBSCRIBE may run
  // while Redis loads), ahead of its ready check's INFO, which Redis then refuses in subscriber
  // mode: the connection was dropped and made again, and waiters could not hear meanwhile (the
  // fair-lock soak saw grants passed over then).
  const subscriber = new Redis(redis.server.url, { connectionName: 'handshake-test' });
  const events: string[] = [];
  subscriber.on('close', () => events.push('close'));
  subscriber.on('error', (error: Error) => events.push(`error: ${error.message}`));
  const pubsub = new LockPubSub(() => subscriber, async () => 'publish');
  try {
    const joined = new Promise<ChannelEntry>((resolve) => subscriber.once('connect', () => resolve(pubsub.join('handshake:channel'))));
    const entry = await joined;
    expect(await entry.subscribed).toBe(true);
    expect(Number(((await redis.admin.pubsub('NUMSUB', 'handshake:channel')) as [string, number])[1])).toBe(1);
    expect(subscriber.status).toBe('ready');
    expect(events).toEqual([]);
  } finally {
    await pubsub.close();
  }
});

test('a client on a lazyConnect connection: its subscriber connects, and a release wakes the waiter by message', async () => {
  const connection = new Redis(redis.server.url, { lazyConnect: true });
  const client = redis.client({ redis: connection });
  try {
    const holder = redis.client().getLock('lazy-subscriber');
    await holder.lock(); // 30 s watchdog lease: a waiter left to its pttl would wait that long
    const waiting = client.getLock('lazy-subscriber').tryLock({ waitTime: 20_000 });
    await until('the waiter subscribed', async () => (await subscribers(redis.admin, 'lazy-subscriber')) === 1);
    const released = performance.now();
    await holder.unlock();
    expect(await waiting).toBe(true);
    expect(performance.now() - released).toBeLessThan(3_000);
  } finally {
    await client.close();
    connection.disconnect();
  }
});

test('a subscriber that ioredis gave up on (retryStrategy null, then killed): a later subscribe fails at once instead of queueing every later one behind it for good', async () => {
  const subscriber = new Redis(redis.server.url, { retryStrategy: () => null, connectionName: 'ended-subscriber', disconnectTimeout: 0 });
  subscriber.on('error', () => undefined);
  const pubsub = new LockPubSub(() => subscriber, async () => 'publish');
  try {
    expect(await pubsub.join('ended:a').subscribed).toBe(true);
    await redis.admin.client('KILL', 'TYPE', 'pubsub');
    await until('ioredis ended the subscriber', () => subscriber.status === 'end');
    const later = pubsub.join('ended:b');
    expect(await later.subscribed).toBe(false);
    expect(later.failed).toBe(true);
  } finally {
    await pubsub.close();
  }
});

test('a channel whose subscribe failed (its subscriber ended before it was ever ready) and is tried again when the subscriber is back: its waiters retry then, and a latch opened meanwhile is seen (before: the await never resolved)', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const name = 'subscriber-failed-then-back';
    const opener = redis.client();
    // Gives up after 2 reconnects: the subscriber ends (rlock connects it again later).
    const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, retryStrategy: (times: number) => (times > 2 ? null : 50) } });
    await opener.getCountDownLatch(name).trySetCount(1);
    expect(await client.getCountDownLatch(name).getCount()).toBe(1); // the command connection is up
    proxy.closingNew = true; // the subscriber cannot connect
    const opened = client.getCountDownLatch(name).await();
    const pubsub = (client as unknown as { pubsub: { entries: Map<string, ChannelEntry> } }).pubsub;
    await until("the channel's subscribe failed", () => [...pubsub.entries.values()].some((entry) => entry.failed));
    await opener.getCountDownLatch(name).countDown(); // published to nobody on this client
    proxy.closingNew = false;
    await expect(orAfter(opened, 8_000, 'still waiting')).resolves.toBe(true);
  } finally {
    await proxy.close();
  }
});

test('a SUBSCRIBE Redis refuses while the subscriber stays connected (an ACL without the channel) is sent again: once it is allowed, a latch opened meanwhile is seen', async () => {
  // Before (a helper audit): a refused subscribe was retried only on a reconnect or a slot
  // refresh, neither of which comes while the connection is fine: await() hung for good, even
  // after the ACL was fixed (and a BUSY script's refusal, gone a moment later, did the same).
  const name = 'subscribe-refused';
  const user = `limited-${process.pid}`;
  await redis.admin.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '+@all', 'resetchannels');
  try {
    const opener = redis.client();
    await opener.getCountDownLatch(name).trySetCount(1);
    const client = redis.client({ redis: { host: '127.0.0.1', port: redis.server.port, username: user, password: 'pw' } });
    const opened = client.getCountDownLatch(name).await();
    const pubsub = (client as unknown as { pubsub: { entries: Map<string, ChannelEntry> } }).pubsub;
    await until("the channel's subscribe was refused", () => [...pubsub.entries.values()].some((entry) => entry.failed));
    await redis.admin.call('ACL', 'SETUSER', user, 'allchannels');
    await opener.getCountDownLatch(name).countDown(); // may reach nobody on this client yet
    await expect(orAfter(opened, 8_000, 'still waiting')).resolves.toBe(true);
  } finally {
    await redis.admin.call('ACL', 'DELUSER', user);
  }
});
