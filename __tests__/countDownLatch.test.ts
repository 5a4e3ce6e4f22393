// The count-down latch against a private redis-server: awaiters in several processes all woken
// by the one message of the countDown that reaches 0, re-checking after subscribing.
import { startFixture, type FixtureProcess } from './helpers/child';
import { usePrivateRedis } from './helpers/privateRedis';
import { commandCounts, settledCommandCounts } from './helpers/testRedis';
import { orAfter, sleep, until } from './helpers/time';
import { TcpProxy, withReplyCut } from './helpers/tcpProxy';
import { ClientClosedError, diagnostics, LatchDeletedError } from '../src';
import { latchChannelOf, latchOpsKeyOf, latchRoundsKeyOf } from '../src/names';
import { readWithIncludes } from '../src/services/scripts';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `latch:${process.pid}:${++counter}`;
// A script file as the client runs it (its `--@include` fragments pulled in).
const lua = (file: string): string => readWithIncludes(file);
const children: FixtureProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.child.kill('SIGKILL');
});

const subscribersOf = async (name: string): Promise<number> => Number(((await redis.admin.pubsub('NUMSUB', `rlock__latch:{${name}}`)) as [string, number])[1]);

test('trySetCount only when no count is set; countDown never goes below 0 and deletes the key at 0', async () => {
  const latch = redis.client().getCountDownLatch(uniqueName());
  expect(await latch.getCount()).toBe(0);
  expect(await latch.trySetCount(3)).toBe(true);
  expect(await latch.trySetCount(5)).toBe(false);
  for (let i = 0; i < 5; i++) await latch.countDown();
  expect(await latch.getCount()).toBe(0);
  expect(await redis.admin.exists(latch.key)).toBe(0);
  expect(await latch.trySetCount(2)).toBe(true); // opened: it may be set again
  expect(await latch.getCount()).toBe(2);
});

test('awaiters in 5 processes (20 each) all resolve within a second of the countDown that reaches 0, each woken by its one message (Redisson #5349: one woken)', async () => {
  const name = uniqueName();
  const latch = redis.client().getCountDownLatch(name);
  await latch.trySetCount(2);
  const processes = [0, 1, 2, 3, 4].map(() => startFixture('latchAwaiter.ts', [redis.server.url, name, '20']));
  children.push(...processes);
  await until('every process is subscribed', async () => (await subscribersOf(name)) === 5, 20_000);
  await latch.countDown();
  await sleep(100); // a negative (a count of 1 opens no awaiter), with no event to wait for: time for a wrong opening to show
  expect(processes.flatMap((p) => p.lines).filter((line) => line.startsWith('opened'))).toEqual([]);
  // An awaiter's re-check after it subscribed may still be on its way from a slow process.
  const before = await settledCommandCounts(redis.admin);
  const openedAt = Number(process.hrtime.bigint()) / 1e6;
  await latch.countDown();
  const results = await Promise.all(processes.map((p) => p.exited()));
  for (const result of results) expect(result.code).toBe(0);
  const opened = processes.flatMap((p) => p.lines.filter((line) => line.startsWith('opened')));
  expect(opened).toHaveLength(100);
  // Their waitTime is 20 s: only the countDown's message wakes them this soon.
  for (const line of opened) expect(Number(line.split(' ')[2]) - openedAt).toBeLessThan(1_000);
  const after = await commandCounts(redis.admin);
  // One script call for the countDown, one read (count and state, one script call) per awaiter
  // re-checking: nothing else.
  expect((after.evalsha ?? 0) + (after.eval ?? 0) - (before.evalsha ?? 0) - (before.eval ?? 0)).toBe(101);
  // The countDown script's own reads of the kind marker and the count, and the two of each
  // awaiter's read (the marker, checked and answered, and the count).
  expect((after.get ?? 0) - (before.get ?? 0)).toBe(2 + 2 * 100);
}, 30_000);

test('await times out with false, rejects on abort, and close() settles it', async () => {
  const client = redis.client();
  const latch = client.getCountDownLatch(uniqueName());
  await latch.trySetCount(1);
  expect(await latch.await({ waitTime: 100 })).toBe(false);
  const controller = new AbortController();
  const aborted = latch.await({ signal: controller.signal });
  await until('the awaiter is parked', () => client.stats.waiters === 1);
  controller.abort(new Error('stop'));
  await expect(aborted).rejects.toThrow('stop');
  const closing = latch.await().then(() => 'resolved', (error: unknown) => error);
  await until('the awaiter is parked', () => client.stats.waiters === 1);
  await client.close();
  expect(await closing).toBeInstanceOf(ClientClosedError);
});

test('an awaiter re-checks after subscribing: a latch opened between its first look and its subscription is not missed', async () => {
  const name = uniqueName();
  const client = redis.client();
  const latch = client.getCountDownLatch(name);
  await latch.trySetCount(1);
  // Opened without a message (DEL, not countDown) right when the awaiter starts waiting, after
  // its first look and before its subscription is confirmed: only the re-check can see it.
  const open = (): void => void redis.admin.del(latch.key);
  diagnostics.waitStart.subscribe(open);
  try {
    const started = performance.now();
    expect(await latch.await({ waitTime: 10_000 })).toBe(true);
    // Not by the last look at the end of its waitTime: at once, by the re-check.
    expect(performance.now() - started).toBeLessThan(5_000);
  } finally {
    diagnostics.waitStart.unsubscribe(open);
  }
});

test('the subscriber connection killed during await: it resubscribes and the countDown still opens the awaiter', async () => {
  const name = uniqueName();
  const client = redis.client();
  const latch = client.getCountDownLatch(name);
  await latch.trySetCount(1);
  const opened = latch.await({ waitTime: 20_000 });
  await until('the awaiter subscribed', async () => (await subscribersOf(name)) === 1);
  expect(await redis.admin.client('KILL', 'TYPE', 'pubsub')).toBeGreaterThanOrEqual(1);
  await until('the subscriber came back', async () => (await subscribersOf(name)) === 1);
  const countedAt = performance.now();
  await redis.client().getCountDownLatch(name).countDown();
  expect(await opened).toBe(true);
  expect(performance.now() - countedAt).toBeLessThan(5_000); // by the message, not the 20 s bound
});

test('the subscriber back on a slow link: a countDown between the waiters\' retry and the SUBSCRIBE\'s confirmation still opens an awaiter with no waitTime', async () => {
  const name = uniqueName();
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: proxy.url });
    const latch = client.getCountDownLatch(name);
    await latch.trySetCount(1);
    const opened = latch.await(); // no waitTime: nothing but a message (or a retry) ends it
    await until('the awaiter subscribed', async () => (await subscribersOf(name)) === 1);
    const subscriber = (client as unknown as { pubsub: { subscriber: { once(event: 'ready', listener: () => void): void } } }).pubsub.subscriber;
    const back = new Promise<void>((resolve) => subscriber.once('ready', resolve));
    proxy.newConnectionDelayMs = 400; // the new subscriber connection's SUBSCRIBE reaches Redis late
    await redis.admin.client('KILL', 'TYPE', 'pubsub');
    await back; // the awaiter retried (still closed) and sleeps with no bound
    await redis.client().getCountDownLatch(name).countDown(); // published before the SUBSCRIBE arrives
    const countedAt = performance.now();
    await expect(orAfter(opened, 8_000, 'still waiting')).resolves.toBe(true);
    expect(performance.now() - countedAt).toBeLessThan(5_000);
  } finally {
    await proxy.close();
  }
});

test('a first SUBSCRIBE slower than the awaiter waits for it: a countDown before its confirmation still opens an awaiter with no waitTime', async () => {
  const name = uniqueName();
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: proxy.url });
    const latch = client.getCountDownLatch(name);
    await latch.trySetCount(1); // the command connection is up, at full speed
    proxy.newConnectionDelayMs = 1_500; // the subscriber, made on the first wait, is slow: past the 1 s a waiter waits for it
    const opened = latch.await();
    await until('the awaiter stopped waiting for its SUBSCRIBE and sleeps', () => client.stats.waiters === 1 && (client as unknown as { pubsub: { peek(c: string): { confirmed: boolean } | undefined } }).pubsub.peek(latchChannelOf('', name))?.confirmed === false);
    await sleep(1_100); // past SUBSCRIBE_WAIT_MS: it retried, found the latch closed, and sleeps with no bound
    await redis.client().getCountDownLatch(name).countDown(); // before the SUBSCRIBE reaches Redis
    await expect(orAfter(opened, 8_000, 'still waiting')).resolves.toBe(true);
  } finally {
    await proxy.close();
  }
});

test('the same countDown operation run twice by the script counts once; another operation counts', async () => {
  const latch = redis.client().getCountDownLatch(uniqueName());
  await latch.trySetCount(3);
  const script = lua('latch/countDown-5.lua');
  const opsKey = latchOpsKeyOf('', latch.key);
  const run = (opId: string): Promise<unknown> =>
    redis.admin.eval(script, 5, latch.key, latchChannelOf('', latch.key), opsKey, latchRoundsKeyOf('', latch.key), `rlock__kind:{${latch.key}}`, 'publish', opId, 600_000, 0);
  expect(await run('op-1')).toBe(2);
  expect(await run('op-1')).toBe(2); // a resend: nothing counted
  expect(await latch.getCount()).toBe(2);
  expect(await run('op-2')).toBe(1);
  expect(await redis.admin.pttl(opsKey)).toBeGreaterThan(590_000); // the ids are forgotten after a while
  expect(await run('op-3')).toBe(0);
  expect(await latch.getState()).toBe('open');
  // Set again: a late resend of an operation of the last round counts nothing.
  expect(await latch.trySetCount(1)).toBe(true);
  expect(await run('op-3')).toBe(1);
  expect(await latch.getCount()).toBe(1);
  // One that first ran on an open latch counted nothing; its resend after the latch was set again counts nothing either.
  expect(await run('op-4')).toBe(0);
  expect(await latch.getState()).toBe('open');
  expect(await run('op-5')).toBe(0); // on the open latch
  expect(await latch.trySetCount(2)).toBe(true);
  expect(await run('op-5')).toBe(2); // its resend
  expect(await latch.getCount()).toBe(2);
});

test("countDown with the caller's operationId counts once per id, so a call whose outcome is unknown may be made again; calls without one each count; an id used in an earlier round counts nothing in the next", async () => {
  const latch = redis.client().getCountDownLatch(uniqueName());
  await latch.trySetCount(4);
  await latch.countDown({ operationId: 'job-17' });
  await redis.client().getCountDownLatch(latch.name).countDown({ operationId: 'job-17' }); // retried by another process
  expect(await latch.getCount()).toBe(3);
  await latch.countDown({ operationId: 'job-18' });
  expect(await latch.getCount()).toBe(2);
  await latch.countDown();
  await latch.countDown();
  expect(await latch.getState()).toBe('open');
  // An idempotency key, remembered across rounds: an id used in an earlier round counts nothing in the next.
  expect(await latch.trySetCount(2)).toBe(true);
  await latch.countDown({ operationId: 'job-17' });
  expect(await latch.getCount()).toBe(2);
  await latch.countDown({ operationId: 'round-2:job-17' });
  expect(await latch.getCount()).toBe(1);
});

test('a countDown whose reply is lost is resent by ioredis after the reconnect and counts once', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: proxy.url });
    await client.getCountDownLatch(uniqueName()).countDown(); // the script is loaded: no NOSCRIPT reply to cut below
    const latch = client.getCountDownLatch(uniqueName());
    await latch.trySetCount(3);
    const calls = async (): Promise<number> => {
      const counts = await commandCounts(redis.admin);
      return (counts.evalsha ?? 0) + (counts.eval ?? 0);
    };
    const before = await calls();
    proxy.cutOnNextReply();
    await latch.countDown();
    expect(proxy.cuts).toBe(1);
    expect((await calls()) - before).toBe(2); // Redis ran it twice: the call and its resend
    expect(await latch.getCount()).toBe(2);
  } finally {
    await proxy.close();
  }
});

test('a trySetCount or delete whose reply is lost answers what its first run did on the resend: no false for the count it set, no new latch deleted', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: proxy.url });
    const warm = client.getCountDownLatch(uniqueName());
    await warm.trySetCount(1); // the scripts are loaded: no NOSCRIPT reply to cut below
    await warm.delete();
    const latch = client.getCountDownLatch(uniqueName());
    expect(await withReplyCut(proxy, redis.admin, () => latch.trySetCount(2))).toBe(true); // before: false
    expect(await latch.getCount()).toBe(2);
    expect(await withReplyCut(proxy, redis.admin, () => latch.delete())).toBe(true); // before: false
    expect(await latch.getState()).toBe('deleted');
  } finally {
    await proxy.close();
  }
});

test('never set, closed, open and deleted are told apart; requireInit waits on a latch never set', async () => {
  const client = redis.client();
  const latch = client.getCountDownLatch(uniqueName());
  expect(await latch.getState()).toBe('unset');
  expect(await latch.await({ waitTime: 0 })).toBe(true); // as Redisson: a latch never set is open
  expect(await latch.await({ waitTime: 0, requireInit: true })).toBe(false);
  const awaited = latch.await({ waitTime: 20_000, requireInit: true });
  await until('the awaiter is parked', () => client.stats.waiters === 1);
  expect(await latch.trySetCount(1)).toBe(true);
  expect(await latch.getState()).toBe('closed');
  await latch.countDown();
  expect(await awaited).toBe(true);
  expect(await latch.getState()).toBe('open');
  expect(await latch.await({ waitTime: 0, requireInit: true })).toBe(true); // open, not never set
  expect(await latch.delete()).toBe(true);
  expect(await latch.getState()).toBe('deleted');
  expect(await latch.delete()).toBe(false); // nothing left to delete
  expect(await latch.trySetCount(2)).toBe(true); // a deleted latch may be set again
  expect(await latch.getState()).toBe('closed');
});

test('delete() while awaited: awaiters in this and another client reject with LatchDeletedError, nothing is left but the marker for a while', async () => {
  const name = uniqueName();
  const client = redis.client();
  const other = redis.client();
  const latch = client.getCountDownLatch(name);
  await latch.trySetCount(2);
  const settled = [client, client, other].map((c) => c.getCountDownLatch(name).await({ waitTime: 20_000 }).then((opened) => opened, (error: unknown) => error));
  await until('every awaiter is parked', () => client.stats.waiters === 2 && other.stats.waiters === 1);
  await until('both clients are subscribed', async () => (await subscribersOf(name)) === 2);
  expect(await redis.client().getCountDownLatch(name).delete()).toBe(true);
  for (const result of await Promise.all(settled)) expect(result).toBeInstanceOf(LatchDeletedError);
  await expect(latch.await({ waitTime: 1_000 })).rejects.toBeInstanceOf(LatchDeletedError); // started after the delete
  expect(await redis.admin.exists(name)).toBe(0);
  expect(await redis.admin.pttl(`rlock__kind:{${name}}`)).toBeGreaterThan(0); // the marker goes by itself
  expect(await redis.admin.pttl(latchRoundsKeyOf('', name))).toBeGreaterThan(0); // and the rounds with it
});

describe('rounds: an awaiter waits for the round it saw closed, not for the next one', () => {
  const keysOf = (name: string) => ({ kind: `rlock__kind:{${name}}`, channel: latchChannelOf('', name), ops: latchOpsKeyOf('', name), rounds: latchRoundsKeyOf('', name), request: `rlock__unlock_latch:{${name}}:test:${++counter}` });

  /** Runs the given latch operations in one MULTI, so that nothing (an awaiter's re-read) can come between them. */
  type Operation = 'countDown' | 'trySetCount' | 'delete' | 'forgetRounds' | 'oldCountDownToZero' | 'oldTrySetCount';
  const atOnce = async (name: string, ...operations: Operation[]): Promise<void> => {
    const keys = keysOf(name);
    const multi = redis.admin.multi();
    for (const operation of operations) {
      if (operation === 'countDown') multi.eval(lua('latch/countDown-5.lua'), 5, name, keys.channel, keys.ops, keys.rounds, keys.kind, 'publish', `op-${++counter}`, 600_000, 0);
      if (operation === 'trySetCount') multi.eval(lua('latch/trySetCount-4.lua'), 4, name, keys.kind, `${keys.request}.${++counter}`, keys.rounds, 1, 60_000);
      if (operation === 'forgetRounds') multi.del(keys.rounds); // as when a deleted latch's rounds expire
      // What a client of the version before rounds does: the count goes and the awaiters are told,
      // or a count is set and marked, and the rounds are left as they are.
      if (operation === 'oldCountDownToZero') multi.del(name).publish(keys.channel, 'wake:all');
      if (operation === 'oldTrySetCount') multi.set(name, 1).set(keys.kind, 'latch');
      if (operation === 'delete') multi.eval(lua('latch/delete-5.lua'), 5, name, keys.kind, keys.channel, `${keys.request}.${++counter}`, keys.rounds, 'publish', 60_000, 60_000, 0);
    }
    const replies = await multi.exec();
    for (const [error] of replies ?? []) expect(error).toBeNull();
  };

  // (In an object: an async function's returned promise would be awaited with it.)
  const parkedAwaiter = async (name: string, requireInit = false): Promise<{ settled: Promise<unknown> }> => {
    const client = redis.client();
    const settled = client.getCountDownLatch(name).await({ waitTime: 10_000, requireInit }).then((opened) => opened, (error: unknown) => error);
    await until('the awaiter is parked', () => client.stats.waiters === 1);
    await until('its client is subscribed', async () => (await subscribersOf(name)) === 1);
    return { settled };
  };

  test('opened and set again before the awaiter re-read: it resolves true (before: it waited on the new round, for good without a waitTime)', async () => {
    const name = uniqueName();
    await redis.client().getCountDownLatch(name).trySetCount(1);
    const { settled: awaited } = await parkedAwaiter(name);
    await atOnce(name, 'countDown', 'trySetCount');
    expect(await awaited).toBe(true);
    expect(await redis.client().getCountDownLatch(name).getCount()).toBe(1); // the new round waits on
  });

  // Set, an awaiter parked on that round, then the operations in one MULTI before it can re-read.
  test.each<[string, Operation[], true | typeof LatchDeletedError]>([
    ['deleted and set again before the awaiter re-read: it rejects with LatchDeletedError (before: it waited on the new round)', ['delete', 'trySetCount'], LatchDeletedError],
    ['deleted, its rounds gone (expired) and set again before the awaiter re-read: it rejects with LatchDeletedError, not taken for opened', ['delete', 'forgetRounds', 'trySetCount'], LatchDeletedError],
    ['a client without rounds opened it and a round was set since, before the awaiter re-read: it resolves true (it rejected, its round taken for lost)', ['oldCountDownToZero', 'trySetCount'], true],
    ['opened and then deleted before the awaiter re-read: it resolves true, its round opened (before: LatchDeletedError)', ['countDown', 'delete'], true],
    [
      'deleted, its rounds gone, then set and opened 9 times before the awaiter re-read: it rejects with LatchDeletedError (its round came before the rounds kept now; it resolved true)',
      ['delete', 'forgetRounds', ...Array.from({ length: 9 }, () => ['trySetCount', 'countDown'] as const).flat()],
      LatchDeletedError,
    ],
  ])('%s', async (_title, operations, expected) => {
    const name = uniqueName();
    await redis.client().getCountDownLatch(name).trySetCount(1);
    const { settled: awaited } = await parkedAwaiter(name);
    await atOnce(name, ...operations);
    if (expected === true) expect(await awaited).toBe(true);
    else expect(await awaited).toBeInstanceOf(expected);
  });

  test('set and opened 10 times before the awaiter re-read: it resolves true, and the rounds keep the last 8 outcomes only', async () => {
    const name = uniqueName();
    await redis.client().getCountDownLatch(name).trySetCount(1);
    const { settled: awaited } = await parkedAwaiter(name);
    const rounds: Operation[] = Array.from({ length: 10 }, () => ['countDown', 'trySetCount'] as const).flat();
    await atOnce(name, ...rounds);
    expect(await awaited).toBe(true); // its round's outcome is gone: counted as opened
    const ended = await redis.admin.hget(latchRoundsKeyOf('', name), 'ended');
    expect(ended?.split(';')).toHaveLength(8); // the last 8 outcomes only
    expect(ended?.split(';').every((entry) => /^\d+=open$/.test(entry))).toBe(true);
  });

  test('requireInit on a latch never set: set, opened and set again before the awaiter re-read: it resolves true (it waited on the second round)', async () => {
    const name = uniqueName();
    const { settled } = await parkedAwaiter(name, true);
    await atOnce(name, 'trySetCount', 'countDown', 'trySetCount');
    expect(await settled).toBe(true);
  });

  test('a rounds key of another type fails trySetCount, countDown and delete with nothing written', async () => {
    const name = uniqueName();
    const latch = redis.client().getCountDownLatch(name);
    await redis.admin.set(latchRoundsKeyOf('', name), 'not a hash');
    await expect(latch.trySetCount(2)).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.admin.exists(name, `rlock__kind:{${name}}`)).toBe(0);
    await redis.admin.set(name, '1');
    await expect(latch.countDown()).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.admin.get(name)).toBe('1');
    await expect(latch.delete()).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.admin.get(name)).toBe('1');
  });

  /** A latch whose round opened, then a count set by a client without rounds (no round of its own). */
  const oldCountOverOpenedRound = async () => {
    const name = uniqueName();
    const latch = redis.client().getCountDownLatch(name);
    await latch.trySetCount(1);
    await latch.countDown();
    await atOnce(name, 'oldTrySetCount');
    return { name, latch };
  };

  test('a count set by a client without rounds over a round that opened: a new awaiter waits for it (it resolved true at once)', async () => {
    const { latch } = await oldCountOverOpenedRound();
    expect(await latch.getState()).toBe('closed');
    expect(await latch.await({ waitTime: 300 })).toBe(false);
    const awaited = latch.await({ waitTime: 10_000 });
    await latch.countDown();
    expect(await awaited).toBe(true);
  });

  test('a count set by a client without rounds, opened and set again before its awaiter re-read: the awaiter resolves true (it waited on the new round)', async () => {
    const { name } = await oldCountOverOpenedRound();
    const { settled: awaited } = await parkedAwaiter(name);
    await atOnce(name, 'countDown', 'trySetCount');
    expect(await awaited).toBe(true);
  });

  test('requireInit on a latch never set: its first round deleted, then 7 more set and opened before it re-read: it rejects with LatchDeletedError (exactly 8 kept: it resolved true)', async () => {
    const name = uniqueName();
    const { settled } = await parkedAwaiter(name, true);
    const rounds: Operation[] = Array.from({ length: 7 }, () => ['trySetCount', 'countDown'] as const).flat();
    await atOnce(name, 'trySetCount', 'delete', ...rounds);
    expect(await settled).toBeInstanceOf(LatchDeletedError);
  });

});
