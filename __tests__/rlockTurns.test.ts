// RLock's queue of waiting clients keeps every waiter live: no caller is left parked beside a
// free lock, whatever happened to its client's turn (found by a second reader; each test failed
// before its fix, the waiter sleeping out the holder's 60 s lease or a 1.7 s heartbeat).
import type { Redis } from 'ioredis';
import { diagnostics, type LockClient } from '../src';
import { clientQueueKeyOf } from '../src/names';
import { parkedWaiters, usePrivateRedis } from './helpers/privateRedis';
import { orAfter, sleep, until } from './helpers/time';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `turns:${process.pid}:${++counter}`;
const LEASE = 60_000;

/** Resolves with the ms from `since` until `held` resolved, or 'still waiting' after `ms`. */
async function heldWithin(held: Promise<unknown>, since: () => number, ms: number): Promise<number | 'still waiting'> {
  let heldAt = 0;
  const outcome = await orAfter(held.then(() => (heldAt = performance.now())), ms, 'still waiting' as const);
  return outcome === 'still waiting' ? outcome : heldAt - since();
}

/**
 * `a` takes the lock through a wait whose attempt right after subscribing succeeds: its client
 * was never refused, so it never started its queue heartbeat. New callers of `a` then join its
 * parked waiters without asking, the lock being with their client.
 */
async function holdWithoutRefusal(a: LockClient, b: LockClient, name: string): Promise<ReturnType<LockClient['getLock']>> {
  const other = b.getLock(name);
  expect(await other.tryLock({ leaseTime: LEASE })).toBe(true);
  const releaseOnWait = (event: unknown): void => {
    if ((event as { clientId: string }).clientId === a.id) void other.unlock();
  };
  diagnostics.waitStart.subscribe(releaseOnWait);
  const lock = a.getLock(name);
  try {
    await lock.lock({ leaseTime: LEASE });
  } finally {
    diagnostics.waitStart.unsubscribe(releaseOnWait);
  }
  return lock;
}

test('a client put back in line by the release that ends its run keeps its place while another client holds past the queue timeout', async () => {
  const name = uniqueName();
  const queueKey = clientQueueKeyOf('', name);
  // Not shorter: an entry runs out after a stall of 2/3 of it, which a loaded machine reaches at 600 ms.
  const [a, b] = [redis.client({ queueTimeout: 1_500 }), redis.client({ queueTimeout: 1_500 })];
  const a1 = await holdWithoutRefusal(a, b, name);
  const a2 = a.getLock(name);
  const second = a2.lock({ leaseTime: LEASE });
  await until('a2 is parked', () => parkedWaiters(a, name) === 1);
  const third = a.getLock(name).lock({ leaseTime: LEASE });
  await until('a3 is parked', () => parkedWaiters(a, name) === 2);
  const bLock = b.getLock(name);
  const bHolds = bLock.lock({ leaseTime: LEASE });
  await until('B is in line', async () => (await redis.admin.zscore(queueKey, b.id)) !== null);
  await a1.unlock(); // handed to a2 in the release script: a run starts
  await second;
  await sleep(40); // past the run's 20 ms
  await a2.unlock(); // the run is over: B's turn; A goes back in line and a3 parks again
  await bHolds;
  expect(await redis.admin.zscore(queueKey, a.id)).not.toBeNull();
  await sleep(3_000); // B holds past A's queue timeout: only A's heartbeat keeps its place
  expect(await redis.admin.zscore(queueKey, a.id)).not.toBeNull();
  const releasedAt = performance.now();
  await bLock.unlock();
  // Woken by B's release message (before: A's entry had run out, B's release woke nobody, and a3
  // slept out B's 60 s lease beside the free lock).
  expect(await heldWithin(third, () => releasedAt, 10_000)).toBeLessThan(3_000);
});

test("another client's forceUnlock of its hold: callers that joined without asking get the free lock within a heartbeat", async () => {
  const name = uniqueName();
  // Not shorter: an entry runs out after a stall of 2/3 of it, which a loaded machine reaches at 600 ms.
  const [a, b] = [redis.client({ queueTimeout: 1_500 }), redis.client({ queueTimeout: 1_500 })];
  await holdWithoutRefusal(a, b, name);
  const waiting = a.getLock(name).lock({ leaseTime: LEASE });
  await until('a2 is parked', () => parkedWaiters(a, name) === 1);
  const forcedAt = performance.now();
  expect(await b.getLock(name).forceUnlock()).toBe(true); // an operator removes A's stuck holder
  // The force wakes the head of the line, and A was not in line: its heartbeat (every 500 ms
  // here) finds the lock free (before: it had no heartbeat, and a2 slept out the 60 s lease).
  expect(await heldWithin(waiting, () => forcedAt, 10_000)).toBeLessThan(3_000);
});

test('a forceUnlock of a hold of its own client: the callers that joined without asking get the free lock at once', async () => {
  const name = uniqueName();
  const [a, b] = [redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 })]; // heartbeats every 20 s: too late for the bound below
  await holdWithoutRefusal(a, b, name);
  const waiting = a.getLock(name).lock({ leaseTime: LEASE });
  await until('a2 is parked', () => parkedWaiters(a, name) === 1);
  const forcedAt = performance.now();
  expect(await a.getLock(name).forceUnlock()).toBe(true); // the holder's own client (an admin task of the service)
  // Before: nobody else was in line, so the force woke no one, and a2 waited for its client's heartbeat.
  expect(await heldWithin(waiting, () => forcedAt, 10_000)).toBeLessThan(3_000);
});

test('a caller that joins while its client releases the lock is not left parked beside the free lock', async () => {
  const name = uniqueName();
  const [a, b] = [redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 })]; // heartbeats every 20 s: too late for the bound below
  const a1 = await holdWithoutRefusal(a, b, name);
  redis.server.pause();
  let freedAt = 0;
  let joined: Promise<unknown>;
  try {
    // Sent while no other waiter of A is on the channel: A does not stay in line.
    const released = a1.unlock().then(() => (freedAt = performance.now()));
    joined = a.getLock(name).lock({ leaseTime: LEASE });
    await until('a2 is parked', () => parkedWaiters(a, name) === 1); // joined without asking: the lock was "here"
    redis.server.resume();
    await released;
  } finally {
    redis.server.resume();
  }
  // Before: no message came for it (its client was not in line), it slept out the 60 s lease.
  expect(await heldWithin(joined, () => freedAt, 10_000)).toBeLessThan(3_000);
});

test('the only waiter of the woken client stops as its wake-up arrives: the turn goes on to the next client at once', async () => {
  const name = uniqueName();
  const queueKey = clientQueueKeyOf('', name);
  // Heartbeats every 20 s: too late for the bound below.
  const [holder, b, c] = [redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 })];
  const held = holder.getLock(name);
  expect(await held.tryLock({ leaseTime: LEASE })).toBe(true);
  const stop = new AbortController();
  const bWaits = b
    .getLock(name)
    .lock({ leaseTime: LEASE, signal: stop.signal })
    .then(
      () => 'held',
      () => 'aborted',
    );
  await until('B is in line', async () => (await redis.admin.zscore(queueKey, b.id)) !== null);
  const cHolds = c.getLock(name).lock({ leaseTime: LEASE });
  await until('C is in line', async () => (await redis.admin.zscore(queueKey, c.id)) !== null);
  // B's caller gives up as B's wake-up comes in: heard by its client, not yet answered by an attempt.
  const subscriber = (b as unknown as { pubsub: { connection: Redis } }).pubsub.connection;
  subscriber.on('message', () => stop.abort(new Error('the caller gave up')));
  const releasedAt = performance.now();
  await held.unlock(); // wakes B, the head of the line
  expect(await bWaits).toBe('aborted');
  // Before: nobody passed the turn on, and C waited for its own heartbeat (20 s here).
  expect(await heldWithin(cHolds, () => releasedAt, 10_000)).toBeLessThan(3_000);
});

test('the woken client closes as its wake-up arrives: its close() passes the turn on to the next client at once', async () => {
  const name = uniqueName();
  const queueKey = clientQueueKeyOf('', name);
  // Heartbeats every 20 s: too late for the bound below.
  const [holder, b, c] = [redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 }), redis.client({ queueTimeout: 60_000 })];
  const held = holder.getLock(name);
  expect(await held.tryLock({ leaseTime: LEASE })).toBe(true);
  const bWaits = b.getLock(name).lock({ leaseTime: LEASE }).catch((error: Error) => error.name);
  await until('B is in line', async () => (await redis.admin.zscore(queueKey, b.id)) !== null);
  const cHolds = c.getLock(name).lock({ leaseTime: LEASE });
  await until('C is in line', async () => (await redis.admin.zscore(queueKey, c.id)) !== null);
  const subscriber = (b as unknown as { pubsub: { connection: Redis } }).pubsub.connection;
  const closing = new Promise<void>((resolve) => subscriber.once('message', () => resolve(b.close())));
  const releasedAt = performance.now();
  await held.unlock(); // wakes B, the head of the line, which closes
  await closing;
  expect(await bWaits).toBe('ClientClosedError');
  // Before: B's close() kept the turn, and C waited for its own heartbeat (20 s here).
  expect(await heldWithin(cHolds, () => releasedAt, 10_000)).toBeLessThan(3_000);
});

describe('a release whose client stops waiting while it is out', () => {
  /** The client's queue heartbeat: its entries and whether its timer runs. */
  const heartbeatOf = (client: LockClient): { entries: Set<unknown>; timer: unknown } => (client as unknown as { heartbeat: { entries: Set<unknown>; timer: unknown } }).heartbeat;

  test.each(['its last waiter aborts', 'the client closes'])('%s: the reply restarts no heartbeat (it leaked, and ran on after close())', async (how) => {
    const name = uniqueName();
    const c = redis.client({ queueTimeout: 3_000 });
    const d = redis.client({ queueTimeout: 3_000 });
    const holder = c.getLock(name);
    await holder.lock();
    const otherLock = d.getLock(name);
    const other = otherLock.lock(); // another client in line: the release wakes it
    await until('the other client waits', () => d.stats.waiters === 1);
    // A waiter of c that is no handoff candidate (a fenced lock's): the release only keeps c in line for it.
    const controller = new AbortController();
    const waiter = c.getFencedLock(name).tryLock({ waitTime: 10_000, signal: controller.signal }).catch(() => 'ended');
    await until('c\'s waiter is parked', () => c.stats.waiters === 1);
    const released = holder.unlock().catch(() => undefined);
    if (how === 'the client closes') await c.close();
    else controller.abort(new Error('stop'));
    await Promise.all([released, waiter, other]);
    await otherLock.unlock();
    expect(heartbeatOf(c).entries.size).toBe(0);
    expect(heartbeatOf(c).timer).toBeUndefined();
  });
});

test("one client's waiters keep their place in its line when a sleep's bound runs out: 20 tasks of 100 ms holds on a 1 s lease all get the lock in turn", async () => {
  const name = uniqueName();
  const client = redis.client();
  const runUntil = performance.now() + 5_000;
  const holdsInRun = Array.from({ length: 20 }, () => 0);
  let longestWait = 0;
  await Promise.all(
    holdsInRun.map(async (_, task) => {
      const lock = client.getLock(name);
      while (performance.now() < runUntil) {
        const askedAt = performance.now();
        await lock.lock({ leaseTime: 1_000 });
        if (performance.now() < runUntil) {
          holdsInRun[task]!++;
          longestWait = Math.max(longestWait, performance.now() - askedAt);
        }
        await sleep(100);
        await lock.unlock();
      }
    }),
  );
  // Parked at the back after each refused attempt, half the tasks got none in the run before.
  expect(holdsInRun.filter((holds) => holds === 0)).toEqual([]);
  expect(longestWait).toBeLessThan(4_500); // a turn of the line takes ~2 s
}, 30_000);
