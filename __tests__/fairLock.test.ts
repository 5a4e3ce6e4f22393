// The fair lock against a private redis-server: first come, first served across processes, the
// release handing the lock straight to the next waiter, and dead or stopped waiters never
// blocking the queue for long.
import { getEventListeners } from 'node:events';
import { join } from 'node:path';
import { startFixture, type FixtureProcess, runFixture } from './helpers/child';
import { usePrivateRedis } from './helpers/privateRedis';
import { commandCounts, scriptCallCount } from './helpers/testRedis';
import { orAfter, until } from './helpers/time';
import { Redis } from 'ioredis';
import { type FairLock, InvalidArgumentError, type LockClient, LockUsageError, NotLockOwnerError } from '../src';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `fair:${process.pid}:${++counter}`;
const children: FixtureProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) {
    child.child.kill('SIGCONT');
    child.child.kill('SIGKILL');
  }
});

function waiterProcess(name: string, queueTimeout: number, holdMs: number, watchdogTimeout = 30_000, skewedClock = false): FixtureProcess {
  const nodeArgs = skewedClock ? ['--require', join(__dirname, 'fixtures', 'skewedClock.cjs')] : [];
  const child = startFixture('fairWaiter.ts', [redis.server.url, name, String(queueTimeout), String(holdMs), String(watchdogTimeout)], nodeArgs);
  children.push(child);
  return child;
}

async function queueLength(name: string): Promise<number> {
  return (await redis.client().getFairLock(name).inspect()).queue?.length ?? 0;
}

const scriptCalls = (): Promise<number> => scriptCallCount(redis.admin);

/** Samples the queue's deadlines for `ms`: the furthest any was ahead of Redis's clock, and how many were seen. */
async function queueDeadlinesAhead(name: string, ms: number): Promise<{ latest: number; samples: number }> {
  let latest = -Infinity;
  let samples = 0;
  const stop = performance.now() + ms;
  while (performance.now() < stop) {
    const deadlines = await redis.admin.zrange(`rlock__queue_expiry:{${name}}`, 0, -1, 'WITHSCORES');
    const [seconds, micros] = await redis.admin.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    for (let i = 1; i < deadlines.length; i += 2) latest = Math.max(latest, Number(deadlines[i]) - redisNow);
    samples += deadlines.length / 2;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { latest, samples };
}

const acquiredAt = (child: FixtureProcess, id: string, timeoutMs?: number): Promise<number> =>
  child.line((line) => line.startsWith(`acquired ${id} `), timeoutMs).then((line) => Number(line.split(' ')[2]));

describe('first come, first served across processes', () => {
  test('waiters queued from 3 processes are served in their order of arrival, each handed the lock by the release alone', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const processes = [waiterProcess(name, 30_000, 20), waiterProcess(name, 30_000, 20), waiterProcess(name, 30_000, 20)];
    await Promise.all(processes.map((p) => p.line((line) => line.startsWith('ready'))));
    // Arrival order: p2, p0, p1 (not the order the processes were started in).
    for (const [i, index] of [2, 0, 1].entries()) {
      processes[index]!.send(`wait w${index}`);
      await until(`waiter ${index} is queued`, async () => (await queueLength(name)) === i + 1);
    }
    const info = await holder.inspect();
    expect(info.queue!.map((waiter) => waiter.leaseMs)).toEqual([30_000, 30_000, 30_000]);
    const before = await scriptCalls();
    await holder.unlock();
    const times = await Promise.all([acquiredAt(processes[2]!, 'w2'), acquiredAt(processes[0]!, 'w0'), acquiredAt(processes[1]!, 'w1')]);
    expect(times[0]).toBeLessThan(times[1]!);
    expect(times[1]).toBeLessThan(times[2]!);
    await Promise.all(processes.map((p, i) => p.line((line) => line === `released w${i}`)));
    // One release by the holder and one by each waiter: no waiter came back to ask (direct
    // handoff), no process was woken to retry in vain.
    expect((await scriptCalls()) - before).toBe(4);
    expect(await holder.isLocked()).toBe(false);
    expect(await redis.admin.exists(`rlock__queue:{${name}}`, `rlock__queue_expiry:{${name}}`)).toBe(0);
  }, 30_000);

  test('no lost update: 3 processes × 4 tasks on one fair lock', async () => {
    const name = uniqueName();
    const results = await Promise.all([0, 1, 2].map(() => runFixture('counterWorker.ts', [redis.server.url, name, '15', 'fair'])));
    for (const result of results) expect(result).toMatchObject({ code: 0 });
    expect(await redis.admin.get(`${name}:counter`)).toBe(String(3 * 4 * 15));
  }, 90_000);

  test('a newcomer does not jump a queue whose lock just became free', async () => {
    const name = uniqueName();
    const a = redis.client();
    const b = redis.client();
    const holder = a.getFairLock(name);
    await holder.lock({ leaseTime: 10_000 });
    const queued = b.getFairLock(name).tryLock({ waitTime: 10_000 });
    await until('b is queued', async () => (await queueLength(name)) === 1);
    await holder.unlock();
    // The release handed the lock to b: a third party's single attempt finds it taken.
    expect(await redis.client().getFairLock(name).tryLock()).toBe(false);
    expect(await queued).toBe(true);
  });
});

describe('dead and stopped waiters', () => {
  test('a holder whose lease runs out without an unlock: the head of the queue holds within lease + 3 s (not the 30 s queue timeout), the rest in order (Redisson #3730)', async () => {
    const name = uniqueName();
    const lease = 1_500;
    // A long queue timeout: only the lease's end, not a heartbeat, can let the waiters in.
    const holder = redis.client({ queueTimeout: 30_000 }).getFairLock(name);
    const took = performance.now();
    await holder.lock({ leaseTime: lease });
    const order: number[] = [];
    const heldAt: number[] = [];
    const waiters = [0, 1, 2].map(async (i) => {
      const lock = redis.client({ queueTimeout: 30_000 }).getFairLock(name);
      await until(`waiter ${i} comes after ${i} others`, async () => (await queueLength(name)) === i);
      const wait = lock.tryLock({ waitTime: 10_000, leaseTime: 30_000 });
      await until(`waiter ${i} is queued`, async () => (await queueLength(name)) >= i + 1 || order.length > 0);
      expect(await wait).toBe(true);
      heldAt[i] = performance.now();
      order.push(i);
      await lock.unlock();
    });
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2]);
    // The holder never unlocks: its lease alone frees the lock.
    expect(heldAt[0]! - took).toBeGreaterThan(lease - 50);
    // The head takes it on its pttl, not after the queue timeout (30 s; Redisson #3730). Three
    // seconds of slack: the timer and one round trip of a loaded machine.
    expect(heldAt[0]! - took).toBeLessThan(lease + 3_000);
  });

  test('a holder process killed without an unlock: the waiter in another process holds within its watchdog lease + 3 s, then the next in order (Redisson #3730)', async () => {
    const name = uniqueName();
    const lease = 1_000;
    // The holder keeps the lock under a 1 s watchdog lease for a minute, unless it dies; the
    // waiters' queue timeout is long, so only the lock's expiry can let them in.
    const holder = waiterProcess(name, 30_000, 60_000, lease);
    const waiters = waiterProcess(name, 30_000, 0);
    await Promise.all([holder, waiters].map((p) => p.line((line) => line.startsWith('ready'))));
    holder.send('wait h');
    await acquiredAt(holder, 'h');
    waiters.send('wait w1');
    await until('w1 is queued', async () => (await queueLength(name)) === 1);
    waiters.send('wait w2');
    await until('w2 is queued behind it', async () => (await queueLength(name)) === 2);
    const killedAt = Number(process.hrtime.bigint()) / 1e6;
    holder.child.kill('SIGKILL');
    const w1 = await acquiredAt(waiters, 'w1');
    const w2 = await acquiredAt(waiters, 'w2');
    expect(w2).toBeGreaterThan(w1);
    // No renewal after the kill: the lock ends within a lease, and the head, asleep no longer
    // than the lock's pttl, takes it then; not after the 30 s queue timeout. Three seconds of
    // slack: the timer and a round trip on a loaded machine.
    expect(w1 - killedAt).toBeLessThan(lease + 3_000);
  }, 30_000);

  test('waiters that give up and queue again do not push deadlines ahead: each entry lives one queue timeout (Redisson #1104, #2099)', async () => {
    const name = uniqueName();
    const queueTimeout = 2_000;
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock({ leaseTime: 20_000 });
    const clients = [0, 1, 2].map(() => redis.client({ queueTimeout }));
    const stop = performance.now() + 3_000;
    // Three clients loop tryLock(wait 150 ms, lease 30 s), as in the reports, while the lock stays taken.
    const loops = clients.map(async (client) => {
      while (performance.now() < stop) expect(await client.getFairLock(name).tryLock({ waitTime: 150, leaseTime: 30_000 })).toBe(false);
    });
    const { latest, samples } = await queueDeadlinesAhead(name, 3_000);
    await Promise.all(loops);
    expect(samples).toBeGreaterThan(10);
    expect(latest).toBeLessThanOrEqual(queueTimeout);
    // A waiter that comes now, with the lock freed, is served at once: nothing of the loops blocks it.
    await holder.unlock();
    expect(await redis.client({ queueTimeout }).getFairLock(name).tryLock({ waitTime: 1_000 })).toBe(true);
  }, 20_000);

  test('3 processes looping tryLock(500 ms, lease 30 s): every queue deadline stays within one queue timeout; one process stopped, the other two hold within 2.5 queue timeouts of the release (Redisson #2278)', async () => {
    const name = uniqueName();
    const queueTimeout = 2_000;
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock();
    const loopers = [0, 1, 2].map(() => waiterProcess(name, queueTimeout, 0));
    await Promise.all(loopers.map((p) => p.line((line) => line.startsWith('ready'))));
    for (const [i, looper] of loopers.entries()) looper.send(`try t${i + 1} 500 30000`);
    await until('the three loops are queued', async () => (await queueLength(name)) === 3);
    const { latest, samples } = await queueDeadlinesAhead(name, 3_000);
    expect(samples).toBeGreaterThan(10);
    expect(latest).toBeLessThanOrEqual(queueTimeout);
    loopers[0]!.child.kill('SIGSTOP');
    const released = Number(process.hrtime.bigint()) / 1e6;
    await holder.unlock();
    const taken = await Promise.all([acquiredAt(loopers[1]!, 't2'), acquiredAt(loopers[2]!, 't3')]);
    // The stopped loop's entry (or a grant to it) lives one queue timeout at most, not hours.
    for (const at of taken) expect(at - released).toBeLessThan(queueTimeout * 2.5);
  }, 30_000);

  test('waiters of a killed process are skipped by the release itself, all of them at once, its channel published to once', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const dead = waiterProcess(name, 30_000, 0);
    // Holds a while, so that its own release comes after the count below.
    const live = waiterProcess(name, 30_000, 3_000);
    await Promise.all([dead, live].map((p) => p.line((line) => line.startsWith('ready'))));
    for (const id of ['d1', 'd2', 'd3']) dead.send(`wait ${id}`);
    await until('3 dead-to-be waiters are queued', async () => (await queueLength(name)) === 3);
    live.send('wait l1');
    await until('the live waiter is queued behind them', async () => (await queueLength(name)) === 4);
    dead.child.kill('SIGKILL');
    await until('the killed process has no subscription left', async () => {
      const [, count] = (await redis.admin.pubsub('NUMSUB', `rlock__grant:{${name}}:${dead.lines[0]!.split(' ')[1]}`)) as [string, number];
      return Number(count) === 0;
    });
    const publishes = async (): Promise<number> => (await commandCounts(redis.admin)).publish ?? 0;
    const publishedBefore = await publishes();
    const released = performance.now();
    await holder.unlock();
    // One message to the dead client (its receiver count tells for its three entries), one to the live one.
    expect((await publishes()) - publishedBefore).toBe(2);
    await live.line((line) => line.startsWith('acquired l1'));
    // Well below the 30 s queue timeout: the dead entries cost nothing.
    expect(performance.now() - released).toBeLessThan(3_000);
  }, 30_000);

  test('W1..W5 queued from five processes in order, W1..W3 killed: the release passes all three over, W4 holds at once, then W5 (Redisson #1353, #4595)', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const waiters = [0, 1, 2, 3, 4].map(() => waiterProcess(name, 30_000, 0));
    const clientIds = await Promise.all(waiters.map((p) => p.line((line) => line.startsWith('ready')).then((line) => line.split(' ')[1]!)));
    for (const [i, waiter] of waiters.entries()) {
      waiter.send(`wait w${i + 1}`);
      await until(`w${i + 1} is queued`, async () => (await queueLength(name)) === i + 1);
    }
    for (const waiter of waiters.slice(0, 3)) waiter.child.kill('SIGKILL');
    await until('the killed processes have no subscription left', async () => {
      const counts = await Promise.all(clientIds.slice(0, 3).map((id) => redis.admin.pubsub('NUMSUB', `rlock__grant:{${name}}:${id}`) as Promise<[string, number]>));
      return counts.every(([, count]) => Number(count) === 0);
    });
    const released = Number(process.hrtime.bigint()) / 1e6;
    await holder.unlock();
    const w4 = await acquiredAt(waiters[3]!, 'w4');
    const w5 = await acquiredAt(waiters[4]!, 'w5');
    // Far below one 30 s queue timeout, let alone three in turn: the dead entries cost nothing.
    expect(w4 - released).toBeLessThan(3_000);
    expect(w5).toBeGreaterThan(w4);
    // Left: the killed waiters' entries, passed over in place until their deadline (a process
    // whose subscriber only reconnects keeps its turn so: "a waiter whose subscriber is reconnecting").
    const left = (await redis.client().getFairLock(name).inspect()).queue!.map((waiter) => waiter.clientId);
    expect(left).toEqual(clientIds.slice(0, 3));
  }, 30_000);

  test('a stopped process is skipped once its entries run out: k stopped waiters cost one queue timeout together', async () => {
    const name = uniqueName();
    // Not shorter: the window below must hold a loaded machine's lag, and stay below 3 timeouts.
    const queueTimeout = 3_000;
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock();
    const stopped = waiterProcess(name, queueTimeout, 0);
    const live = waiterProcess(name, queueTimeout, 0);
    await Promise.all([stopped, live].map((p) => p.line((line) => line.startsWith('ready'))));
    for (const id of ['s1', 's2', 's3']) stopped.send(`wait ${id}`);
    await until('3 waiters of the process to stop are queued', async () => (await queueLength(name)) === 3);
    live.send('wait l1');
    await until('the live waiter is queued behind them', async () => (await queueLength(name)) === 4);
    stopped.child.kill('SIGSTOP');
    const released = performance.now();
    await holder.unlock(); // granted to s1, whose process does not answer
    await live.line((line) => line.startsWith('acquired l1'), 15_000);
    const waited = performance.now() - released;
    // The grant to s1 lives one queue timeout; s2 and s3 ran out meanwhile, together. Three
    // timeouts in turn (Redisson #1353) would take ≥ 9 s.
    expect(waited).toBeGreaterThan(queueTimeout * 0.9);
    expect(waited).toBeLessThan(queueTimeout * 2.5);
    stopped.child.kill('SIGCONT');
  }, 30_000);

  test('a grant to a stopped process: the next waiter asks as the grant’s lease runs out, not up to a heartbeat later (dead waiter: queue timeout + 1 s at most)', async () => {
    // Three locks, each with a waiter in a process to stop and one in a live process: each live
    // process beats on its own phase, so the old wait (up to a heartbeat period, a third of the
    // queue timeout, after the grant ran out) shows in at least one of them almost surely.
    const queueTimeout = 9_000;
    const names = [uniqueName(), uniqueName(), uniqueName()];
    const holders = names.map((name) => redis.client({ queueTimeout }).getFairLock(name));
    await Promise.all(holders.map((holder) => holder.lock()));
    const stopped = names.map((name) => waiterProcess(name, queueTimeout, 0));
    const live = names.map((name) => waiterProcess(name, queueTimeout, 0));
    await Promise.all([...stopped, ...live].map((p) => p.line((line) => line.startsWith('ready'))));
    for (const [i, name] of names.entries()) {
      stopped[i]!.send('wait s');
      await until('the waiter of the process to stop is queued', async () => (await queueLength(name)) === 1);
      live[i]!.send('wait l');
      await until('the live waiter is queued behind it', async () => (await queueLength(name)) === 2);
    }
    for (const p of stopped) p.child.kill('SIGSTOP');
    const now = (): number => Number(process.hrtime.bigint()) / 1e6;
    const grantEnds = await Promise.all(
      holders.map(async (holder, i) => {
        await holder.unlock(); // granted to the stopped process, whose subscription Redis still counts
        return now() + (await redis.admin.pttl(names[i]!)); // its lease: the queue timeout
      }),
    );
    const taken = await Promise.all(live.map((p) => acquiredAt(p, 'l', 20_000)));
    for (const [i, at] of taken.entries()) {
      expect(at - grantEnds[i]!).toBeGreaterThan(-100);
      // Before: up to a heartbeat period (3 s here) after the grant ran out.
      expect(at - grantEnds[i]!).toBeLessThan(600);
    }
    for (const p of stopped) p.child.kill('SIGCONT');
  }, 40_000);

  test('a release grants a waiter of its own client in its reply, without a message; first come, first served still', async () => {
    const name = uniqueName();
    const client = redis.client();
    const other = redis.client();
    const listener = redis.server.connect();
    const messages: string[] = [];
    listener.on('pmessage', (_pattern: string, channel: string, message: string) => messages.push(`${channel} ${message}`));
    await listener.psubscribe(`rlock__grant:{${name}}:*`);
    try {
      const holder = client.getFairLock(name);
      await holder.lock();
      const order: string[] = [];
      const own = client.getFairLock(name).withLock(() => void order.push('own'));
      await until('the own waiter is queued', async () => (await queueLength(name)) === 1);
      const others = other.getFairLock(name).withLock(() => void order.push('other'));
      await until('the other client is queued', async () => (await queueLength(name)) === 2);
      const own2 = client.getFairLock(name).withLock(() => void order.push('own 2'));
      await until('the second own waiter is queued', async () => (await queueLength(name)) === 3);
      await holder.unlock();
      await Promise.all([own, others, own2]);
      expect(order).toEqual(['own', 'other', 'own 2']);
      // A message published after the releases would come before this PING's reply.
      await listener.ping();
      // Only the grants that crossed to another client went by message: holder → own (reply),
      // own → other (message), other → own 2 (message).
      expect(messages.map((message) => message.split(' ')[0])).toEqual([`rlock__grant:{${name}}:${other.id}`, `rlock__grant:{${name}}:${client.id}`]);
      expect(await holder.isLocked()).toBe(false);
    } finally {
      await listener.quit();
    }
  });

  test('owners of one client that take turns keep its grant channel subscribed: no SUBSCRIBE per acquisition', async () => {
    const name = uniqueName();
    const client = redis.client();
    const subscribes = async (): Promise<number> => (await commandCounts(redis.admin)).subscribe ?? 0;
    const before = await subscribes();
    let turns = 0;
    const loop = async (): Promise<void> => {
      while (turns < 60) await client.getFairLock(name).withLock(() => void turns++);
    };
    await Promise.all([loop(), loop()]);
    // Each release grants the other owner in its reply; the releasing owner queues again at once.
    expect((await subscribes()) - before).toBeLessThanOrEqual(2);
  });

  test('a release reply replayed for an earlier wait of the same owner grants nothing: the waiter goes on waiting', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const client = redis.client();
    let resolved = false;
    const waiting = client
      .getFairLock(name)
      .tryLock({ waitTime: 10_000 })
      .then((got) => (resolved = got));
    await until('the waiter is queued', async () => (await queueLength(name)) === 1);
    const [queued] = (await holder.inspect()).queue!;
    const field = `${queued!.clientId}:${queued!.ownerId}`;
    const entry = (client as unknown as { context: { pubsub: { peek(channel: string): { grants: { grantFromReply(field: string, sentAt: number): void } } | undefined } } }).context.pubsub.peek(`rlock__grant:{${name}}:${client.id}`);
    // A reply to a release sent before this wait asked to be queued (ioredis resent it after a
    // reconnect; its latch answers what the first run did, a grant of an earlier wait).
    entry!.grants.grantFromReply(field, performance.now() - 60_000);
    await holder.isLocked(); // a round trip: a grant taken would have resolved the waiter by now
    expect(resolved).toBe(false);
    await holder.unlock();
    expect(await waiting).toBe(true);
  });

  test('a lost grant message costs at most a third of the queue timeout: the heartbeat finds the entry gone', async () => {
    const name = uniqueName();
    // Long enough that a third of it plus a loaded machine's 3 s of slack stays below one timeout.
    const queueTimeout = 6_000;
    const a = redis.client({ queueTimeout });
    const b = redis.client({ queueTimeout });
    const holder = a.getFairLock(name);
    await holder.lock({ leaseTime: 20_000 });
    const waiting = b.getFairLock(name).tryLock({ waitTime: 15_000 });
    await until('b is queued', async () => (await queueLength(name)) === 1);
    // Release by hand with a grant channel nobody listens to (receivers not trusted): b gets
    // the lock in Redis, but no message.
    const field = Object.keys(await redis.admin.hgetall(name))[0]!;
    const scripted = a as unknown as { context: { redis: import('../src/services/scripts').ScriptedRedis } };
    const released = performance.now();
    await scripted.context.redis.rlock_fairLock_release(name, `rlock__queue:{${name}}`, `rlock__queue_expiry:{${name}}`, `rlock__unlock_latch:{${name}}:x`, field, 1000, queueTimeout, 'nowhere:', 'publish', 0, a.id);
    expect(await waiting).toBe(true);
    expect(performance.now() - released).toBeLessThan(queueTimeout / 3 + 3_000);
  }, 30_000);
});

describe('a subscriber that reconnects', () => {
  test("a waiter whose subscriber is reconnecting keeps its place: the grant made meanwhile goes to the next in line, the one after it to that waiter", async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    // Its subscriber comes back 400 ms after it is cut (ioredis waits that long to reconnect).
    const connection = new Redis(redis.server.url, { retryStrategy: () => 400 });
    const blipped = redis.client({ redis: connection });
    try {
      const order: string[] = [];
      const take = async (lock: FairLock, id: string): Promise<FairLock> => {
        await lock.lock();
        order.push(id);
        return lock;
      };
      const a = take(blipped.getFairLock(name), 'a');
      await until('a is queued', async () => (await queueLength(name)) === 1);
      const b = take(redis.client().getFairLock(name), 'b');
      await until('b is queued', async () => (await queueLength(name)) === 2);
      const c = take(redis.client().getFairLock(name), 'c');
      await until('c is queued', async () => (await queueLength(name)) === 3);
      const subscribers = String(await redis.admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n').filter((line) => line.includes(blipped.id));
      expect(subscribers).toHaveLength(1);
      await redis.admin.client('KILL', 'ID', /(?:^| )id=(\d+)/.exec(subscribers[0]!)![1]!);
      // Released while a's subscriber is down: the grant's message would reach nobody.
      await holder.unlock();
      const bLock = await b;
      expect(order).toEqual(['b']);
      expect((await blipped.getFairLock(name).inspect()).queue?.map((waiter) => waiter.clientId)[0]).toBe(blipped.id);
      const channel = `rlock__grant:{${name}}:${blipped.id}`;
      await until("a's subscriber is back", async () => Number(((await redis.admin.pubsub('NUMSUB', channel)) as [string, number])[1]) === 1);
      await bLock.unlock();
      await (await a).unlock();
      await (await c).unlock();
      expect(order).toEqual(['b', 'a', 'c']);
    } finally {
      await blipped.close();
      connection.disconnect();
    }
  }, 30_000);
});

describe('giving up leaves nothing behind', () => {
  test.each(['fair', 'plain'])("a %s lock's waiter of a client with a short queueTimeout that gives up does not take the queue with it: the others' entries live on, and the release wakes them", async (kind) => {
    const name = uniqueName();
    const get = (client: ReturnType<typeof redis.client>) => (kind === 'fair' ? client.getFairLock(name) : client.getLock(name));
    const holder = get(redis.client());
    await holder.lock();
    const patient = get(redis.client({ queueTimeout: 60_000 })).tryLock({ waitTime: 30_000 });
    const queueKey = kind === 'fair' ? `rlock__queue:{${name}}` : `rlock__clients:{${name}}`;
    await until('the patient waiter is queued', async () => (await redis.admin.zcard(queueKey)) === 1);
    const stop = new AbortController();
    const hasty = get(redis.client({ queueTimeout: 300 })).tryLock({ waitTime: 30_000, signal: stop.signal }).catch(() => 'stopped');
    await until('the hasty waiter is queued', async () => (await redis.admin.zcard(queueKey)) === 2);
    stop.abort();
    expect(await hasty).toBe('stopped');
    // The keys lived 300 ms from the hasty waiter's join, the patient entry with them.
    expect(await redis.admin.pttl(queueKey)).toBeGreaterThan(30_000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await redis.admin.zcard(queueKey)).toBe(1);
    const releasedAt = performance.now();
    await holder.unlock();
    expect(await patient).toBe(true);
    expect(performance.now() - releasedAt).toBeLessThan(2_000); // by the release's wake-up, not the 20 s heartbeat
  }, 20_000);

  test('a timed-out or aborted waiter leaves the queue at once; others keep their place', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const first = redis.client().getFairLock(name).tryLock({ waitTime: 10_000 });
    await until('first is queued', async () => (await queueLength(name)) === 1);
    expect(await redis.client().getFairLock(name).tryLock({ waitTime: 200 })).toBe(false);
    const controller = new AbortController();
    const aborted = redis.client().getFairLock(name).lock({ signal: controller.signal });
    await until('the second waiter is queued', async () => (await queueLength(name)) === 2);
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ name: 'AbortError' });
    expect(await queueLength(name)).toBe(1);
    await holder.unlock();
    expect(await first).toBe(true);
  });

  test('a grant that reaches a waiter as it gives up is passed on to the next in line', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const client = redis.client();
    const controller = new AbortController();
    const giving = client.getFairLock(name).lock({ signal: controller.signal });
    await until('the first waiter is queued', async () => (await queueLength(name)) === 1);
    const next = redis.client().getFairLock(name).tryLock({ waitTime: 10_000 });
    await until('the next waiter is queued', async () => (await queueLength(name)) === 2);
    // Abort and release in the same tick: the grant may or may not have reached the first waiter.
    const gaveUp = expect(giving).rejects.toMatchObject({ name: 'AbortError' });
    controller.abort();
    await holder.unlock();
    await gaveUp;
    expect(await next).toBe(true);
  });

  test('100 waiters on one caller signal (fair and plain locks) add one listener to it; aborting it ends all 100 waits and empties the queue', async () => {
    // One listener each, added and removed per wait on a signal that outlives the waits, kept the
    // waits' closures alive through V8's scavenges (services/abortListeners.ts).
    const fair = uniqueName();
    const plain = uniqueName();
    await redis.client().getFairLock(fair).lock();
    await redis.client().getLock(plain).lock();
    const client = redis.client();
    const controller = new AbortController();
    const waits = Array.from({ length: 50 }, () => [client.getFairLock(fair).lock({ signal: controller.signal }), client.getLock(plain).lock({ signal: controller.signal })]).flat();
    const settled = Promise.allSettled(waits);
    await until('the fair waiters are queued', async () => (await queueLength(fair)) === 50);
    await until('every waiter parked', () => client.stats.waiters === 100);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    expect((await settled).map((outcome) => outcome.status)).toEqual(Array(100).fill('rejected'));
    expect(await queueLength(fair)).toBe(0);
    // And a signal whose waits ended (timed out here) keeps no listener of the library: an
    // `AbortSignal.any()` with a listener is not collected before it aborts.
    const passing = new AbortController();
    expect(await client.getFairLock(fair).tryLock({ waitTime: 50, signal: passing.signal })).toBe(false);
    expect(getEventListeners(passing.signal, 'abort')).toHaveLength(0);
  });

  test('10 000 aborted waits leave no queue entry and no client state', async () => {
    const name = uniqueName();
    const client = redis.client();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 500 }, () => client.getFairLock(name).tryLock({ waitTime: 5 })),
      );
    }
    expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
    expect(await redis.admin.zcard(`rlock__queue:{${name}}`)).toBe(0);
    expect(await redis.admin.zcard(`rlock__queue_expiry:{${name}}`)).toBe(0);
  }, 60_000);
});

describe('the RLock interface', () => {
  test('a waiter with a leaseTime handed the lock long after it queued holds it for that lease: no early loss, withLock resolves', async () => {
    expect.assertions(4);
    const name = uniqueName();
    const queueTimeout = 3_000; // the heartbeat, which dates the waiter's place, every 1 s
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock();
    const waiting = redis.client({ queueTimeout }).getFairLock(name);
    const outcome = waiting.withLock(async (signal) => {
      expect(signal.aborted).toBe(false);
      expect(await waiting.remainTimeToLive()).toBeGreaterThan(600);
      return 'done';
    }, { leaseTime: 800, waitTime: 10_000 });
    await until('the waiter is queued', async () => (await queueLength(name)) === 1);
    // Held past the waiter's last heartbeat by more than its lease: before, the grant's lease
    // counted from that heartbeat, so the scope's 800 ms had run out when fn began.
    await new Promise((resolve) => setTimeout(resolve, 1_900));
    await holder.unlock();
    expect(await outcome).toBe('done');
    expect(await redis.admin.exists(name)).toBe(0);
  });

  test('a grant made by a client with a shorter queueTimeout: the waiter counts the lease Redis gave it, not its own queue timeout', async () => {
    expect.assertions(4);
    const name = uniqueName();
    const granter = redis.client({ queueTimeout: 1_000 }).getFairLock(name);
    const waiterClient = redis.client({ queueTimeout: 5_000, watchdogTimeout: 30_000 });
    const lost: unknown[] = [];
    waiterClient.on('lockLost', (event) => lost.push(event));
    // With a leaseTime above the 1 s grant: confirmed by one more attempt, which sets the lease.
    await granter.lock();
    const leased = waiterClient.getFairLock(name);
    const withLease = leased.withLock(async () => {
      expect(await leased.remainTimeToLive()).toBeGreaterThan(2_000); // was at most 1 000 while the scope counted 3 000
    }, { leaseTime: 3_000, waitTime: 10_000 });
    await until('the waiter is queued', async () => (await queueLength(name)) === 1);
    await granter.unlock();
    await withLease;
    // Under the watchdog: renewed early, before the grant's 1 s runs out (it counted 5 s before).
    await granter.lock();
    const watched = waiterClient.getFairLock(name);
    const other = redis.client().getFairLock(name);
    const withWatchdog = watched.withLock(async (signal) => {
      await new Promise((resolve) => setTimeout(resolve, 1_600)); // past the grant's first lease
      expect(signal.aborted).toBe(false);
      expect(await other.tryLock()).toBe(false);
    }, { waitTime: 10_000 });
    await until('the waiter is queued', async () => (await queueLength(name)) === 1);
    await granter.unlock();
    await withWatchdog;
    expect(lost).toEqual([]);
  }, 20_000);

  test('a waiter with a leaseTime below the queue timeout gets its whole lease from the grant, not from its last heartbeat', async () => {
    expect.assertions(2);
    const name = uniqueName();
    const queueTimeout = 3_000; // a heartbeat every 1 s
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock();
    const waiting = redis.client({ queueTimeout }).getFairLock(name);
    const outcome = waiting.withLock(async (signal) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // within the 2 s lease from the grant
      expect(signal.aborted).toBe(false);
      return 'done';
    }, { leaseTime: 2_000, waitTime: 10_000 });
    await until('the waiter is queued', async () => (await queueLength(name)) === 1);
    // Granted ~0.85 s after it queued: its scope's lease ran from then, and ended 1.15 s into it.
    await new Promise((resolve) => setTimeout(resolve, 850));
    await holder.unlock();
    expect(await outcome).toBe('done');
  }, 15_000);

  test("a re-entry that finds its hold lost tells the scope at once, and the grant it then waits for is renewed before its short first lease runs out", async () => {
    expect.assertions(4);
    const name = uniqueName();
    const client = redis.client({ queueTimeout: 1_000, watchdogTimeout: 9_000 }); // a tick every 3 s
    const fair = client.getFairLock(name);
    const other = redis.client({ queueTimeout: 1_000 }).getFairLock(name); // its grants live 1 s at first
    const scope = fair.withLock(async (signal) => {
      await redis.client().getFairLock(name).forceUnlock(); // the scope's hold is gone, no tick has seen it
      expect(await other.tryLock({ leaseTime: 60_000 })).toBe(true);
      const inner = client.getFairLock(name);
      const entering = inner.lock();
      await until('the re-entry is queued', async () => (await queueLength(name)) === 1);
      const toldAtReentry = signal.aborted;
      await other.unlock(); // grants the re-entry, for 1 s at first
      await entering;
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      // Renewed early: its hold under the lost hold's watchdog entry ran out at 1 s before.
      expect(await redis.client().getFairLock(name).tryLock()).toBe(false);
      expect(toldAtReentry).toBe(true); // told by the re-entry: its hold is gone
      await inner.unlock();
    });
    await expect(scope).rejects.toThrow(/was lost/);
  }, 15_000);

  test.each([
    ['kept by the watchdog', undefined],
    ['with a leaseTime', 20_000],
  ])('a re-entry that finds its hold (%s) lost and the lock free takes it afresh and tells the scope at once', async (_, leaseTime) => {
    // Before (a helper audit, and a second reader for the leaseTime case): taken afresh without a
    // word. The scope learnt of the loss only at the inner release, which also freed the lock
    // entirely while the outer scope still ran.
    expect.assertions(4);
    const name = uniqueName();
    const client = redis.client({ watchdogTimeout: 9_000 }); // no tick in the test's time
    const fair = client.getFairLock(name);
    const scope = fair.withLock(async (signal) => {
      await redis.client().getFairLock(name).forceUnlock(); // the scope's hold is gone; the lock is free
      await client.getFairLock(name).lock(); // re-entry
      expect(signal.aborted).toBe(true);
      expect(await fair.getHoldCount()).toBe(1); // Redis's count, taken afresh
      await client.getFairLock(name).unlock();
      expect(await fair.isLocked()).toBe(false);
    }, { leaseTime });
    await expect(scope).rejects.toThrow(/was lost/);
  });

  test('reentrant inside withLock, holds counted; forceUnlock hands the lock to the head of the queue', async () => {
    expect.assertions(4);
    const name = uniqueName();
    const client = redis.client();
    const fair = client.getFairLock(name);
    await fair.withLock(async () => {
      await client.getFairLock(name).lock();
      expect(await fair.getHoldCount()).toBe(2);
      await client.getFairLock(name).unlock();
      expect(await fair.isHeldByCurrentOwner()).toBe(true);
    });
    await fair.lock();
    const waiting = redis.client().getFairLock(name).tryLock({ waitTime: 10_000 });
    await until('a waiter is queued', async () => (await queueLength(name)) === 1);
    expect(await redis.client().getFairLock(name).forceUnlock()).toBe(true);
    expect(await waiting).toBe(true);
  });

  test.each([
    ['its message', 3_000],
    ['an attempt that confirms it', 60_000],
  ])('a re-entry that finds its own hold gone waits for a fresh hold, which Redis counts once when the grant is taken by %s', async (_, leaseTime) => {
    expect.assertions(5);
    const name = uniqueName();
    // A lease above the queue timeout makes the waiter confirm its grant by one more attempt.
    const client = redis.client({ queueTimeout: 5_000 });
    const fair = client.getFairLock(name);
    const other = redis.client().getFairLock(name);
    const scope = fair.withLock(async (signal) => {
      // The scope's hold is taken away, and someone else has the lock by the time it re-enters.
      await redis.client().getFairLock(name).forceUnlock();
      expect(await other.tryLock({ leaseTime: 60_000 })).toBe(true);
      const inner = client.getFairLock(name);
      const entering = inner.tryLock({ waitTime: 10_000, leaseTime });
      await until('the re-entry is queued', async () => (await queueLength(name)) === 1);
      await other.unlock();
      expect(await entering).toBe(true);
      // One hold in Redis: the lost one is not counted again (before, the confirming attempt
      // incremented the grant to 2, and the scope's end then kept a hold nobody knew of).
      expect(await inner.getHoldCount()).toBe(1);
      await inner.unlock();
      // That unlock freed the lock while this scope still runs: it is told now, not at its end.
      expect(signal.aborted).toBe(true);
    });
    // The scope's own hold went with the force-unlock: its end says so.
    await expect(scope).rejects.toThrow(/was lost/);
  });

  test('a handed-over grant under the watchdog is extended before its short first lease runs out', async () => {
    const name = uniqueName();
    const queueTimeout = 600;
    const a = redis.client({ queueTimeout, watchdogTimeout: 3_000 });
    const b = redis.client({ queueTimeout, watchdogTimeout: 3_000 });
    const lost: unknown[] = [];
    b.on('lockLost', (event) => lost.push(event));
    const holder = a.getFairLock(name);
    await holder.lock();
    const waiting = b.getFairLock(name).withLock(async (signal) => {
      // Held well past the grant's 600 ms first lease and past a whole watchdog lease.
      await until('3.5 s passed', () => signal.aborted, 3_500).catch(() => undefined);
      return signal.aborted;
    });
    await until('b is queued', async () => (await queueLength(name)) === 1);
    await holder.unlock();
    expect(await waiting).toBe(false);
    expect(lost).toEqual([]);
  }, 20_000);

  test('a process whose clock runs 10 s ahead evicts no live waiter: 3 processes queued 2.5 queue timeouts are served in order (Redisson #3004, #5503)', async () => {
    const name = uniqueName();
    const queueTimeout = 1_500;
    const holder = redis.client({ queueTimeout }).getFairLock(name);
    await holder.lock();
    const processes = [waiterProcess(name, queueTimeout, 20), waiterProcess(name, queueTimeout, 20, 30_000, true), waiterProcess(name, queueTimeout, 20)];
    const ready = await Promise.all(processes.map((p) => p.line((line) => line.startsWith('ready'))));
    expect(ready).toHaveLength(3);
    for (const [i, p] of processes.entries()) {
      p.send(`wait w${i}`);
      await until(`waiter ${i} is queued`, async () => (await queueLength(name)) === i + 1);
    }
    // Every entry outlives its queue timeout 2.5 times over, refreshed by its own client's
    // heartbeat; the fast clock's heartbeats and scripts run beside the others'.
    await new Promise((resolve) => setTimeout(resolve, 2.5 * queueTimeout));
    expect(await queueLength(name)).toBe(3);
    const released = performance.now();
    await holder.unlock();
    const times = await Promise.all(processes.map((p, i) => acquiredAt(p, `w${i}`)));
    expect(times[0]).toBeLessThan(times[1]!);
    expect(times[1]).toBeLessThan(times[2]!);
    await Promise.all(processes.map((p, i) => p.line((line) => line === `released w${i}`)));
    expect(performance.now() - released).toBeLessThan(5_000);
  }, 30_000);

  test('queue deadlines come from Redis time, not the client clock', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const waiting = redis.client({ queueTimeout: 7_000 }).getFairLock(name).tryLock({ waitTime: 10_000 });
    await until('queued', async () => (await queueLength(name)) === 1);
    const [deadline] = (await redis.admin.zrange(`rlock__queue_expiry:{${name}}`, 0, 0, 'WITHSCORES')).slice(1);
    const [seconds, micros] = await redis.admin.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    expect(Number(deadline) - redisNow).toBeGreaterThan(5_000);
    expect(Number(deadline) - redisNow).toBeLessThanOrEqual(7_000);
    await holder.unlock();
    expect(await waiting).toBe(true);
  });

  test('a second acquire of one owner while the first waits is refused before Redis; bad names too', async () => {
    const name = uniqueName();
    const holder = redis.client().getFairLock(name);
    await holder.lock();
    const client = redis.client();
    const handle = client.getFairLock(name);
    const first = handle.tryLock({ waitTime: 10_000 });
    await expect(handle.tryLock({ waitTime: 100 })).rejects.toBeInstanceOf(LockUsageError);
    expect(() => client.getFairLock('')).toThrow(InvalidArgumentError);
    expect(() => client.getFairLock(42 as unknown as string)).toThrow(InvalidArgumentError);
    await holder.unlock();
    expect(await first).toBe(true);
  });
});

describe("one owner's acquires started together (a scope's tasks)", () => {
  // Inside a withLock, every handle of the client acts as the scope's owner: `Promise.all([
  // a.lock(), b.lock()])` there is one owner acquiring twice at once. Before, the second was
  // refused with LockUsageError ("already acquiring it"), where RLock, the write lock and
  // FencedLock count both up. Now they go one after the other: the second counts up the hold the
  // first took, and shares neither its queue entry nor its grant.
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  test('first acquires of a scope that gave its hold back, behind another owner: one queue entry, both resolve with 2 holds, the queue empty after, nobody else inside meanwhile', async () => {
    expect.assertions(9);
    const name = uniqueName();
    const client = redis.client();
    const other = redis.client().getFairLock(name);
    let third: Promise<boolean> | undefined;
    await client.getFairLock(name).withLock(async () => {
      await client.getFairLock(name).unlock(); // the scope's owner holds nothing now
      await other.lock();
      const both = Promise.all([client.getFairLock(name).lock(), client.getFairLock(name).lock()]);
      await until('the scope is queued', async () => (await queueLength(name)) === 1);
      // Queued after the scope's owner: served after it, not between its two acquires.
      third = redis.client().getFairLock(name).tryLock({ waitTime: 10_000 });
      await until('a third owner is queued', async () => (await queueLength(name)) === 2);
      expect((await other.inspect()).queue!.map((waiter) => waiter.clientId)[0]).toBe(client.id);
      await other.unlock();
      await both;
      const info = await other.inspect();
      expect(info.holders).toEqual([expect.objectContaining({ clientId: client.id, holdCount: 2 })]);
      // The scope's one entry went with the grant; the third owner's waits on.
      expect(info.queue!.map((waiter) => waiter.clientId)).not.toContain(client.id);
      expect(info.queue).toHaveLength(1);
      await client.getFairLock(name).unlock();
      expect(await client.getFairLock(name).getHoldCount()).toBe(1);
      expect(await other.isLocked()).toBe(true);
    });
    expect(await third).toBe(true);
    expect((await other.inspect()).queue).toEqual([]);
    expect(client.stats.renewals).toBe(0);
  });

  test.each([
    ['aborted', (stop: AbortSignal) => ({ signal: stop })],
    ['timed out', () => ({ waitTime: 300 })],
    ['a single attempt', () => ({ waitTime: 0 })],
  ] as const)('the second %s while the first waits behind another owner: nothing sent for it, the first still gets the lock, the queue empty after', async (how, optionsOf) => {
    const name = uniqueName();
    const client = redis.client();
    const other = redis.client().getFairLock(name);
    await client.getFairLock(name).withLock(async () => {
      await client.getFairLock(name).unlock();
      await other.lock();
      const first = client.getFairLock(name).lock();
      await until('the first is queued', async () => (await queueLength(name)) === 1);
      const stop = new AbortController();
      const options = optionsOf(stop.signal);
      const before = await scriptCalls();
      const second = 'signal' in options ? client.getFairLock(name).lock(options) : client.getFairLock(name).tryLock(options);
      if (how === 'aborted') {
        // It waits in-process behind the scope's first acquire (not in stats.waiters: no event
        // marks it); what is checked is that nothing is sent for it meanwhile.
        await sleep(100);
        stop.abort(new Error('stopped'));
        await expect(second).rejects.toThrow('stopped');
      } else {
        expect(await second).toBe(false);
      }
      expect((await scriptCalls()) - before).toBe(0);
      expect(await queueLength(name)).toBe(1);
      expect(await other.isHeldByCurrentOwner()).toBe(true);
      await other.unlock();
      await first;
      expect(await client.getFairLock(name).getHoldCount()).toBe(1);
      expect(await queueLength(name)).toBe(0);
    });
    expect(await other.isLocked()).toBe(false);
    expect((await other.inspect()).queue).toEqual([]);
    expect(client.stats.renewals).toBe(0);
  });

  /**
   * Runs `fn` inside a scope of a new client that gave its own hold back while another client
   * (`other`) took the lock: the scope's acquires are first acquires behind another owner.
   */
  async function behindOther(fn: (lockOf: () => FairLock, other: FairLock) => Promise<void>): Promise<{ client: LockClient; other: FairLock; scope: Promise<void> }> {
    const name = uniqueName();
    const client = redis.client();
    const other = redis.client().getFairLock(name);
    const lockOf = (): FairLock => client.getFairLock(name);
    const scope = lockOf().withLock(async () => {
      await lockOf().unlock();
      await other.lock();
      await fn(lockOf, other);
    });
    await scope.catch(() => undefined);
    return { client, other, scope };
  }

  test('one that timed out in line leaves it: once the first got the lock, the scope\'s next acquires go at once and count up', async () => {
    const { client, other, scope } = await behindOther(async (lockOf, other) => {
      const first = lockOf().lock();
      await until('the first is queued', async () => (await queueLength(other.name)) === 1);
      expect(await lockOf().tryLock({ waitTime: 100 })).toBe(false);
      await other.unlock();
      await first;
      // A waiter gone from the line must not be handed a turn (nobody would end it: every later
      // acquire of the scope waited in the line for good).
      expect(await lockOf().tryLock({ waitTime: 2000 })).toBe(true);
      expect(await lockOf().tryLock()).toBe(true);
      expect(await lockOf().getHoldCount()).toBe(3);
    });
    await scope;
    expect(await other.isLocked()).toBe(false);
    expect(client.stats.renewals).toBe(0);
  });

  test('a single attempt started together with a first acquire that then waits behind another owner answers false as the first starts waiting, not when it ends', async () => {
    const { other, scope } = await behindOther(async (lockOf, other) => {
      const first = lockOf().lock();
      const single = lockOf().tryLock(); // in the line before the first waits
      expect(await orAfter(single, 3000, 'still in the line')).toBe(false);
      await other.unlock();
      await first;
      expect(await lockOf().getHoldCount()).toBe(1);
    });
    await scope;
    expect(await other.isLocked()).toBe(false);
  });

  test('single attempts started together inside a scope that holds the lock: each waits its turn and counts up (none answered false)', async () => {
    const name = uniqueName();
    const client = redis.client();
    await client.getFairLock(name).withLock(async () => {
      const handles = [0, 1, 2].map(() => client.getFairLock(name));
      expect(await Promise.all(handles.map((handle) => handle.tryLock()))).toEqual([true, true, true]);
      expect(await handles[0]!.getHoldCount()).toBe(4);
      for (const handle of handles) await handle.unlock();
    });
    expect(await client.getFairLock(name).isLocked()).toBe(false);
  });

  test('after a first acquire that waited behind another owner, a single attempt during the next one\'s turn waits for it and counts up (the line no longer says blocked)', async () => {
    const { other, scope } = await behindOther(async (lockOf, other) => {
      const first = lockOf().lock();
      await until('the first is queued', async () => (await queueLength(other.name)) === 1);
      const second = lockOf().lock();
      await other.unlock();
      await first;
      // The second's turn is under way (its count-up is on its way to Redis).
      expect(await lockOf().tryLock()).toBe(true);
      await second;
      expect(await lockOf().getHoldCount()).toBe(3);
    });
    await scope;
    expect(await other.isLocked()).toBe(false);
  });

  test('a waitTime counts from the call: one that waited its turn in the line waits only what is left of it', async () => {
    expect.assertions(6);
    const { other, scope } = await behindOther(async (lockOf, other) => {
      const first = lockOf().tryLock({ waitTime: 400 });
      const started = performance.now();
      const second = lockOf().tryLock({ waitTime: 700 });
      expect(await first).toBe(false);
      expect(await second).toBe(false);
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThanOrEqual(650);
      // Its own 700 ms after the 400 in the line would be 1 100.
      expect(waited).toBeLessThan(1000);
      await other.unlock();
    });
    // The scope holds nothing at its end (and a failed expectation inside it would show here).
    await expect(scope).rejects.toBeInstanceOf(NotLockOwnerError);
    expect(await other.isLocked()).toBe(false);
  });

  test("mutual exclusion holds: 3 clients' scopes, each entering 3 times at once (every other one after giving its own hold back), never 2 owners inside", async () => {
    const name = uniqueName();
    // Holds each scope's code believes it has, by scope: counted up once a lock() resolved, down before its unlock() is sent.
    const holding = new Map<number, number>();
    let overlaps = 0;
    let entries = 0;
    const hold = (scope: number, by: number): void => {
      holding.set(scope, (holding.get(scope) ?? 0) + by);
      if ([...holding.values()].filter((holds) => holds > 0).length > 1) overlaps++;
    };
    const clients = [redis.client(), redis.client(), redis.client()];
    await Promise.all(
      clients.map(async (client, c) => {
        for (let round = 0; round < 4; round++) {
          const scope = c * 10 + round;
          const givesBack = round % 2 === 1;
          await client.getFairLock(name).withLock(async () => {
            hold(scope, 1);
            if (givesBack) {
              hold(scope, -1);
              await client.getFairLock(name).unlock(); // its entries are first acquires now
            }
            await Promise.all(
              [0, 1, 2].map(async () => {
                const handle = client.getFairLock(name);
                await handle.lock();
                hold(scope, 1);
                entries++;
                await sleep(5);
                hold(scope, -1);
                await handle.unlock();
              }),
            );
            if (!givesBack) hold(scope, -1);
          }).catch((error: unknown) => {
            // A scope that gave its own hold back and whose entries gave theirs finds none at its end.
            if (!givesBack) throw error;
          });
        }
      }),
    );
    expect(entries).toBe(3 * 4 * 3);
    expect(overlaps).toBe(0);
    const info = await redis.client().getFairLock(name).inspect();
    expect(info.locked).toBe(false);
    expect(info.queue).toEqual([]);
  }, 30_000);
});

describe('Redis restarted empty', () => {
  test('queued waiters queue again after the restart and are all served; the holder is told it lost the lock', async () => {
    const name = uniqueName();
    const holderClient = redis.client();
    const lost: string[] = [];
    holderClient.on('lockLost', (event) => lost.push(event.name));
    await holderClient.getFairLock(name).lock();
    const waiters = [redis.client(), redis.client()].map((c) => c.getFairLock(name).withLock(async () => undefined, { waitTime: 20_000 }));
    await until('both waiters are queued', async () => (await queueLength(name)) === 2);
    await redis.server.kill();
    await redis.server.restart();
    await Promise.all(waiters);
    await until('the holder was told', () => lost.length === 1);
    expect(lost).toEqual([name]);
    expect(await redis.admin.exists(name)).toBe(0);
  }, 30_000);
});
