// The counting semaphore against a private redis-server: permits never exceeded across
// processes, multi-permit requests not starved, waiters woken by counted messages (as many as
// the released permits can serve), and nothing left behind by an abort.
import { Redis } from 'ioredis';
import { runFixture } from './helpers/child';
import { handoffsSuspended, parkedOnChannel, usePrivateRedis } from './helpers/privateRedis';
import { useReplyCuts } from './helpers/tcpProxy';
import { scriptCallCount } from './helpers/testRedis';
import { takeTurns } from './helpers/takeTurns';
import { sleep, until } from './helpers/time';
import { ClientClosedError, LockTimeoutError } from '../src';
import { kindKeyOf, latchPrefixOf, reservationKeyOf, semaphoreChannelOf } from '../src/names';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `sem:${process.pid}:${++counter}`;

const scriptCalls = (): Promise<number> => scriptCallCount(redis.admin);

/** A new semaphore of `permits` on a new client, with its channel. */
async function newSemaphore(permits: number) {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getSemaphore(name);
  await sem.trySetPermits(permits);
  return { name, channel: `rlock__semaphore:{${name}}`, client, sem };
}

/** A new semaphore of one permit, taken by a new client (whose further waiters may be handed it in-process). */
async function takenSemaphore() {
  const semaphore = await newSemaphore(1);
  await semaphore.sem.acquire();
  return semaphore;
}

describe('resent after a reconnect (the soak found both: more holders than permits, permits lost)', () => {
  const proxy = useReplyCuts(redis);
  const { resent } = proxy;

  test('a resent release gives its permits back once, a resent acquire takes them once', async () => {
    const sem = redis.client({ redis: proxy.url }).getSemaphore(uniqueName());
    await sem.trySetPermits(3);
    await resent(() => sem.acquire({ permits: 2 }));
    expect(await sem.availablePermits()).toBe(1);
    await resent(() => sem.release({ permits: 2 }));
    expect(await sem.availablePermits()).toBe(3);
  });

  test('a resent addPermits adds once, a resent drainPermits answers what it took (nothing lost), a resent trySetPermits answers true', async () => {
    const sem = redis.client({ redis: proxy.url }).getSemaphore(uniqueName());
    await redis.client({ redis: proxy.url }).getSemaphore(uniqueName()).trySetPermits(1); // the script is loaded: no NOSCRIPT reply to cut
    await sem.availablePermits(); // connected, its start-up replies in: the cut falls on the call
    expect(await resent(() => sem.trySetPermits(1))).toBe(true);
    await resent(() => sem.addPermits(1));
    expect(await sem.availablePermits()).toBe(2);
    expect(await resent(() => sem.drainPermits())).toBe(2);
    expect(await sem.availablePermits()).toBe(0);
  });
});

describe('operationId: a release or addPermits whose outcome is unknown may be made again', () => {
  test('a release with an operationId gives its permits back once per id, retried by this client or another; calls without one each count', async () => {
    const { name, sem } = await newSemaphore(3);
    await sem.acquire({ permits: 3 });
    await sem.release({ operationId: 'job-1' });
    await redis.client().getSemaphore(name).release({ operationId: 'job-1' }); // retried by another process
    await sem.release({ operationId: 'job-1', permits: 2 }); // an id counts once, whatever it asks
    expect(await sem.availablePermits()).toBe(1);
    await sem.release({ operationId: 'job-2' });
    expect(await sem.availablePermits()).toBe(2);
    await sem.release();
    await sem.release();
    expect(await sem.availablePermits()).toBe(4);
  });

  test('addPermits with an operationId changes the count once per id (a cut as well), on both semaphores', async () => {
    const { name, sem } = await newSemaphore(1);
    await sem.addPermits(2, { operationId: 'grow-1' });
    await redis.client().getSemaphore(name).addPermits(2, { operationId: 'grow-1' });
    expect(await sem.availablePermits()).toBe(3);
    await sem.addPermits(-1, { operationId: 'cut-1' });
    await sem.addPermits(-1, { operationId: 'cut-1' });
    expect(await sem.availablePermits()).toBe(2);
    const pes = redis.client().getPermitExpirableSemaphore(uniqueName());
    await pes.trySetPermits(1);
    await pes.addPermits(2, { operationId: 'grow-1' });
    await redis.client().getPermitExpirableSemaphore(pes.name).addPermits(2, { operationId: 'grow-1' });
    expect(await pes.availablePermits()).toBe(3);
  });

  test('a retried release answered from its first run (before a cut) does not resume the in-process handoffs the cut suspended: the next release goes to Redis, which owes the permit (else two holders of a total of 1)', async () => {
    const { name, channel, client, sem } = await newSemaphore(2);
    await sem.acquire({ permits: 2 });
    await sem.release({ operationId: 'job-4' }); // free 1
    const other = redis.client().getSemaphore(name);
    await other.acquire(); // free 0
    await sem.addPermits(-1); // free -1
    const controller = new AbortController();
    const waiting = client.getSemaphore(name).acquire({ signal: controller.signal }).then(() => 'held', () => 'stopped');
    await until('a waiter is parked', () => parkedOnChannel(client, channel) === 1);
    expect(handoffsSuspended(client, channel)).toBe(true); // its refused attempt read the permits owed
    await sem.release({ operationId: 'job-4' }); // its answer (free 1) is replayed, from before the cut
    expect(handoffsSuspended(client, channel)).toBe(true);
    await sem.release(); // owed to Redis: not handed to the waiter
    expect(await sem.availablePermits()).toBe(0);
    controller.abort();
    expect(await waiting).toBe('stopped');
  });

  test('a release with an operationId goes to Redis even when a waiter of its client could take the permit in-process: a retry from another process counts nothing (handed over in-process, nothing recorded it)', async () => {
    const { name, channel, client, sem } = await takenSemaphore();
    const waiting = client.getSemaphore(name).acquire();
    await until('a waiter is parked', () => parkedOnChannel(client, channel) === 1);
    await sem.release({ operationId: 'job-3' });
    await waiting; // the waiter got the permit
    await redis.client().getSemaphore(name).release({ operationId: 'job-3' });
    expect(await sem.availablePermits()).toBe(0);
  });
});

describe('permits', () => {
  test('trySetPermits sets only once, also after every permit was taken; addPermits may go below 0', async () => {
    const sem = redis.client().getSemaphore(uniqueName());
    expect(await sem.availablePermits()).toBe(0);
    expect(await sem.trySetPermits(10)).toBe(true);
    await sem.acquire({ permits: 10 });
    expect(await sem.availablePermits()).toBe(0);
    expect(await sem.trySetPermits(10)).toBe(false);
    await sem.release({ permits: 2 });
    await sem.addPermits(-5);
    expect(await sem.availablePermits()).toBe(-3);
    expect(await sem.tryAcquire()).toBe(false);
    await sem.release({ permits: 4 });
    expect(await sem.tryAcquire()).toBe(true);
    expect(await sem.tryAcquire()).toBe(false);
  });

  test('a multi-permit acquire takes all of its permits at once or none', async () => {
    const sem = redis.client().getSemaphore(uniqueName());
    await sem.trySetPermits(3);
    expect(await sem.tryAcquire({ permits: 4 })).toBe(false);
    expect(await sem.availablePermits()).toBe(3);
    expect(await sem.tryAcquire({ permits: 2 })).toBe(true);
    expect(await sem.tryAcquire({ permits: 2 })).toBe(false);
    expect(await sem.availablePermits()).toBe(1);
    expect(await sem.drainPermits()).toBe(1);
    expect(await sem.drainPermits()).toBe(0);
    expect(await sem.availablePermits()).toBe(0);
  });

  test('a semaphore never set gives no permit: tryAcquire waits out its waitTime and answers false', async () => {
    const sem = redis.client().getSemaphore(uniqueName());
    const started = performance.now();
    expect(await sem.tryAcquire({ waitTime: 1_000 })).toBe(false);
    // Not a moment longer than asked (the anchor's ≤ 1.1 s, with room for a loaded machine).
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  test('a waiter on a semaphore never set gets a permit as soon as trySetPermits sets it, woken by its message', async () => {
    const name = uniqueName();
    const client = redis.client();
    const sem = client.getSemaphore(name);
    const waiting = sem.tryAcquire({ waitTime: 20_000 });
    await until('the waiter is parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 1);
    const set = performance.now();
    expect(await redis.client().getSemaphore(name).trySetPermits(1)).toBe(true);
    expect(await waiting).toBe(true);
    expect(performance.now() - set).toBeLessThan(1_000);
    expect(await sem.availablePermits()).toBe(0);
  });

  test('withPermits holds the permits while fn runs and gives them back, also when fn throws', async () => {
    const sem = redis.client().getSemaphore(uniqueName());
    await sem.trySetPermits(3);
    const seen = await sem.withPermits(() => sem.availablePermits(), { permits: 2 });
    expect(seen).toBe(1);
    await expect(sem.withPermits(() => Promise.reject(new Error('boom')), { permits: 3 })).rejects.toThrow('boom');
    expect(await sem.availablePermits()).toBe(3);
    await sem.acquire({ permits: 3 });
    await expect(sem.withPermits(() => 1, { waitTime: 50 })).rejects.toBeInstanceOf(LockTimeoutError);
    // The message names the semaphore and the permits asked for (it said "lock", a newcomer's audit).
    await expect(sem.withPermits(() => 1, { waitTime: 20 })).rejects.toThrow(`a permit of semaphore "${sem.name}" was not acquired within 20 ms`);
    await expect(sem.withPermits(() => 1, { permits: 2, waitTime: 20 })).rejects.toThrow(`semaphore "${sem.name}" (2 permits at once) was not acquired within 20 ms`);
  });
});

describe('waking waiters', () => {
  test('a release of k permits wakes k waiters, each trying once: no more, no fewer', async () => {
    const name = uniqueName();
    const client = redis.client();
    const sem = redis.client().getSemaphore(name); // another client: no in-process handoff
    await sem.trySetPermits(0);
    const got: number[] = [];
    const waits = [0, 1, 2].map((i) => client.getSemaphore(name).acquire().then(() => got.push(i)));
    // Parked as handoff candidates: past their retries after subscribing, whose calls are counted.
    await until('3 waiters are parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 3);
    const before = await scriptCalls();
    await sem.release({ permits: 2 });
    await until('2 waiters hold', () => got.length === 2);
    // A negative (the third sends nothing, holds nothing): time for a stray attempt to show.
    await sleep(100);
    // The release, and one attempt by each of the two woken waiters; the third slept on.
    expect((await scriptCalls()) - before).toBe(3);
    expect(got).toHaveLength(2);
    expect(client.stats.waiters).toBe(1);
    await sem.release();
    await Promise.all(waits);
    expect(got.sort()).toEqual([0, 1, 2]);
  });

  test('waiters in another client are woken by the release message, not by polling', async () => {
    const name = uniqueName();
    const waiting = redis.client();
    const sem = redis.client().getSemaphore(name);
    await sem.trySetPermits(1);
    await sem.acquire();
    const acquired = waiting.getSemaphore(name).acquire();
    await until('the waiter asked and is parked', () => parkedOnChannel(waiting, `rlock__semaphore:{${name}}`) === 1);
    const before = await scriptCalls();
    await sleep(300); // the time is the subject: nothing is sent meanwhile
    expect(await scriptCalls()).toBe(before); // a parked waiter sends nothing
    await sem.release();
    await acquired;
    expect((await scriptCalls()) - before).toBe(2);
  });

  test('a waiter woken by a release that stops before its attempt reaches Redis (an abort while its connection is down) passes the wake-up on to a waiter of its client', async () => {
    const name = uniqueName();
    const holder = redis.client().getSemaphore(name);
    await holder.trySetPermits(1);
    await holder.acquire();
    const connection = new Redis(redis.server.url, { retryStrategy: () => 1500 });
    connection.on('error', () => undefined);
    const b = redis.client({ redis: connection });
    try {
      const controller = new AbortController();
      const first = b.getSemaphore(name).acquire({ signal: controller.signal });
      first.catch(() => undefined);
      await until('the first waiter is parked', () => b.stats.waiters === 1);
      const secondTakes = b.getSemaphore(name).tryAcquire({ waitTime: 25_000 });
      await until('the second waiter is parked', () => b.stats.waiters === 2);
      await until('both asked and parked', () => parkedOnChannel(b, `rlock__semaphore:{${name}}`) === 2);
      await redis.admin.client('KILL', 'ID', String(await connection.client('ID')));
      const runner = (b as unknown as { commands: { waitingForReady: Set<unknown> } }).commands;
      await holder.release(); // its message wakes one waiter of client B, which waits for the connection
      await until('the woken waiter waits for the connection', () => runner.waitingForReady.size === 1);
      controller.abort();
      const freedAt = Date.now();
      await expect(first).rejects.toMatchObject({ name: 'AbortError' });
      expect(await secondTakes).toBe(true);
      expect(Date.now() - freedAt).toBeLessThan(6_000);
    } finally {
      await b.close();
      connection.disconnect();
    }
  }, 30_000);

  test('a yielding client whose waiters a message without releaser woke (a reservation left) wakes them all when its yield ends: none sleeps on beside a free permit', async () => {
    const name = uniqueName();
    const a = redis.client();
    const b = redis.client();
    const sem = b.getSemaphore(name);
    await sem.trySetPermits(2);
    await sem.acquire({ permits: 2 });
    const got: string[] = [];
    const waits = ['W1', 'W2'].map((label) => a.getSemaphore(name).tryAcquire({ waitTime: 20_000 }).then((ok) => ok && got.push(label)));
    await until('both waiters are parked', () => parkedOnChannel(a, `rlock__semaphore:{${name}}`) === 2);
    const controller = new AbortController();
    const big = b.getSemaphore(name).acquire({ permits: 3, signal: controller.signal });
    big.catch(() => undefined);
    await until('the 3-permit waiter reserved', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 1);
    await sem.release({ permits: 2 }); // kept for the reservation: no message
    // Client A yields its turn now (as after a run of local handoffs)...
    (a as unknown as { pubsub: { peek(channel: string): { local: { yieldTurn(): void } } } }).pubsub.peek(`rlock__semaphore:{${name}}`).local.yieldTurn();
    controller.abort(); // ...as the reservation leaves: "wake:2:" names no releasing client
    await expect(big).rejects.toMatchObject({ name: 'AbortError' });
    const freedAt = performance.now();
    await Promise.all(waits);
    expect(got.sort()).toEqual(['W1', 'W2']);
    expect(performance.now() - freedAt).toBeLessThan(5_000); // not their 20 s waitTime
  });

  test.each([
    ['refused before a reservation existed', false],
    ['that joined its client’s parked waiter without asking, once that one left,', true],
  ])('a waiter %s is not stranded when a reservation’s holder dies: it asks again within a queue timeout', async (_, joins) => {
    // Before (a helper audit, then a second reader for the joiner): refused with no bound (no
    // reservation yet), it slept until a message; the reservation made later publishes nothing,
    // the release that fed it named only its holder, and the holder's death left the permits
    // free with nobody told: the waiter slept to its waitTime (acquire(): for good). The joiner
    // kept the "no bound" of the waiter it joined, which asked again, but had left by then.
    const name = uniqueName();
    const holder = redis.client().getSemaphore(name);
    await holder.trySetPermits(2);
    await holder.acquire({ permits: 2 });
    const waiterClient = redis.client({ queueTimeout: 500 });
    const asker = joins ? waiterClient.getSemaphore(name).tryAcquire({ waitTime: 700 }) : undefined;
    if (asker) await until('the waiter that asked is parked', () => parkedOnChannel(waiterClient, `rlock__semaphore:{${name}}`) === 1);
    const asked = await scriptCalls();
    const waiting = waiterClient.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    await until('the waiter is parked', () => waiterClient.stats.waiters === (joins ? 2 : 1));
    if (asker) {
      expect(await scriptCalls()).toBe(asked); // it joined without asking
      expect(await asker).toBe(false);
    }
    // A 2-permit waiter of a process killed -9 right after it reserved: its reservation lives on.
    await redis.admin.hset(`rlock__semaphore_reservation:{${name}}`, 'field', 'a-dead-client:1', 'permits', 2);
    await redis.admin.pexpire(`rlock__semaphore_reservation:{${name}}`, 500);
    await holder.release({ permits: 2 }); // kept for the reservation: it names the dead holder only
    const freedAt = performance.now();
    expect(await waiting).toBe(true);
    expect(performance.now() - freedAt).toBeLessThan(10_000); // not its 20 s waitTime
  });

  /** `count` waiters of one client (with `queueTimeout`) parked on a semaphore whose one permit another client holds; `got` runs as each takes a permit. */
  const parkedBehindItsOnePermit = async (count: number, queueTimeout: number, got: () => void) => {
    const name = uniqueName();
    const holder = redis.client().getSemaphore(name);
    await holder.trySetPermits(1);
    await holder.acquire();
    const client = redis.client({ queueTimeout });
    const waiters = Array.from({ length: count }, () => client.getSemaphore(name).tryAcquire({ waitTime: 30_000 }).then((taken) => (taken && got(), taken)));
    // Parked as handoff candidates: past their attempts after subscribing, whose calls are counted.
    await until(`${count} waiters are parked`, () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === count);
    return { name, client, waiters };
  };

  test('parked waiters of one client whose bound runs out ask once for all of them, not each', async () => {
    const { name, waiters } = await parkedBehindItsOnePermit(40, 300, () => undefined);
    const before = await scriptCalls();
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // five queue timeouts, no message
    const asks = (await scriptCalls()) - before;
    // A waiter that starved holds the reservation and renews it every third of a queue timeout
    // (~15 calls), and one other asks per bound: ~25. Each of the 40 asking at each bound, as
    // when every parked waiter kept its own bound, is ~300.
    expect(asks).toBeGreaterThanOrEqual(5);
    expect(asks).toBeLessThanOrEqual(60);
    await redis.admin.set(name, 40); // no message: the next ask finds them, and wakes the others
    expect(await Promise.all(waiters)).toEqual(Array.from({ length: 40 }, () => true));
  });

  test('an ask that takes a permit while another waiter’s reservation lives tells its siblings that reservation’s end: they ask then, not a queue timeout later', async () => {
    // A second reader's find: the success left its "asked" mark (a queue timeout) as the bound,
    // and a sibling whose own bound (the reservation's end) ran out slept on under it while the
    // dead reservation's permits sat free (5.4 s instead of 1.6 s).
    const name = uniqueName();
    const holder = redis.client().getSemaphore(name);
    await holder.trySetPermits(2);
    await holder.acquire({ permits: 2 });
    const client = redis.client({ queueTimeout: 5_000 });
    // A 2-permit waiter of a process killed -9 right after it reserved, for 1.5 s more.
    await redis.admin.hset(`rlock__semaphore_reservation:{${name}}`, 'field', 'a-dead-client:1', 'permits', 2);
    await redis.admin.pexpire(`rlock__semaphore_reservation:{${name}}`, 1_500);
    const waiters = [0, 1].map(() => client.getSemaphore(name).tryAcquire({ waitTime: 20_000 }));
    await until('2 waiters are parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 2);
    await redis.admin.set(name, 3); // one permit beyond the reservation's two, no message
    await redis.admin.publish(`rlock__semaphore:{${name}}`, 'wake:1:'); // wakes one: it takes that permit
    await until('one waiter took a permit', () => client.stats.waiters === 1);
    const expiresIn = await redis.admin.pttl(`rlock__semaphore_reservation:{${name}}`);
    const tookAt = performance.now();
    await Promise.all(waiters);
    expect(performance.now() - tookAt).toBeLessThan(expiresIn + 2_000); // not the 5 s queue timeout
  });

  test('an ask that fails tells the siblings it covered: one of them asks after a transient pause, not a queue timeout later', async () => {
    const name = uniqueName();
    const holder = redis.client().getSemaphore(name);
    await holder.trySetPermits(1);
    await holder.acquire();
    const client = redis.client({ queueTimeout: 3_000 });
    const outcomes = [0, 1].map(() => client.getSemaphore(name).tryAcquire({ waitTime: 30_000 }).then((got) => got, (error: unknown) => error));
    await until('2 waiters are parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 2);
    // The next ask (when their shared bound runs out) finds the name taken by a hash: refused.
    await redis.admin.multi().del(name).hset(name, 'not', 'a counter').exec();
    const failed = await Promise.race(outcomes);
    expect(failed).toBeInstanceOf(Error);
    await redis.admin.multi().del(name).set(name, 1).exec(); // a permit again, no message
    const restoredAt = performance.now();
    const results = await Promise.all(outcomes);
    expect(results.filter((result) => result === true)).toHaveLength(1);
    // Before: the other slept on under the failed ask's mark, to the 3 s queue timeout.
    expect(performance.now() - restoredAt).toBeLessThan(1_500);
  });

  test('an ask that takes a permit and leaves others free wakes as many parked waiters of its client: they do not sleep out their bound', async () => {
    const gotAt: number[] = [];
    const { name, client, waiters } = await parkedBehindItsOnePermit(10, 3_000, () => gotAt.push(performance.now()));
    await redis.admin.set(name, 3); // three permits, no message: found by the next ask (within 3 s)
    await until('three waiters got a permit', () => gotAt.length === 3);
    // Without that wake: one permit per ask, the next ask a bound later (6 s for the three).
    expect(gotAt[2]! - gotAt[0]!).toBeLessThan(1_000);
    expect(client.stats.waiters).toBe(7);
    await redis.admin.set(name, 7);
    await Promise.all(waiters);
    expect(gotAt).toHaveLength(10);
  }, 20_000);

  test('a request for more permits than the semaphore has holds the reservation 6 queue timeouts at most: a smaller request is served then (it was kept out for as long as the big one waited)', async () => {
    const name = uniqueName();
    const big = redis.client({ queueTimeout: 300 }); // the reservation's time: 1.8 s
    await big.getSemaphore(name).trySetPermits(1);
    const controller = new AbortController();
    const waiting = big.getSemaphore(name).acquire({ permits: 2, signal: controller.signal }).catch((error: unknown) => error);
    await until('the reservation is held', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 1);
    const small = redis.client().getSemaphore(name);
    expect(await small.tryAcquire({ waitTime: 200 })).toBe(false); // kept out while it is reserved
    const started = performance.now();
    expect(await small.tryAcquire({ waitTime: 20_000 })).toBe(true);
    expect(performance.now() - started).toBeLessThan(10_000); // by the reservation's end, not the waitTime
    controller.abort(new Error('stop'));
    expect(await waiting).toEqual(new Error('stop'));
    await small.release();
    expect(await small.availablePermits()).toBe(1);
  });

  test('a 1-permit waiter that reserved because it starved keeps the reservation past 6 queue timeouts: a later waiter does not overtake it', async () => {
    const name = uniqueName();
    const sem = redis.client({ queueTimeout: 300 }).getSemaphore(name); // the limit would be 1.8 s
    await sem.trySetPermits(1);
    await sem.acquire();
    const order: string[] = [];
    const first = redis.client({ queueTimeout: 300 });
    const a = first.getSemaphore(name).acquire().then(() => order.push('A'));
    // A message that frees nothing wakes A to try again: refused after it starved, it reserves.
    await until('A holds the reservation', async () => {
      await redis.admin.publish(`rlock__semaphore:{${name}}`, 'wake:1:');
      return (await redis.admin.hget(`rlock__semaphore_reservation:{${name}}`, 'field'))?.startsWith(first.id) === true;
    });
    await sleep(2_000); // longer than a multi-permit request may hold it
    const later = redis.client({ queueTimeout: 300 });
    const b = later.getSemaphore(name).acquire().then(() => order.push('B'));
    await until('B is parked', () => later.stats.waiters === 1);
    await sem.release();
    await until('one of them holds', () => order.length === 1);
    expect(order).toEqual(['A']); // with the limit applied to it, A had left and B reserved: B
    await sem.release();
    await Promise.all([a, b]);
    expect(order).toEqual(['A', 'B']);
    await sem.release();
  });

  test('a 2-permit request is not starved by 1-permit takers that keep both permits busy', async () => {
    const name = uniqueName();
    await redis.client().getSemaphore(name).trySetPermits(2);
    let stop = false;
    let rounds = 0;
    const takers = [redis.client(), redis.client()].map(async (client) => {
      const sem = client.getSemaphore(name);
      while (!stop) {
        await sem.acquire();
        rounds++;
        await sleep(20); // a 20 ms hold
        await sem.release();
      }
    });
    await until('the takers are going', () => rounds > 4);
    const big = redis.client().getSemaphore(name);
    const got = await big.tryAcquire({ permits: 2, waitTime: 5_000 });
    stop = true;
    expect(got).toBe(true);
    // The reservation was consumed by the grant.
    expect(await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)).toBe(0);
    await big.release({ permits: 2 });
    await Promise.all(takers);
    expect(await big.availablePermits()).toBe(2);
  });
});

describe('leaving nothing behind', () => {
  test('an aborted multi-permit waiter drops its reservation, its subscription, and wakes those it held back', async () => {
    const name = uniqueName();
    const client = redis.client();
    const sem = client.getSemaphore(name);
    await sem.trySetPermits(1);
    const controller = new AbortController();
    const big = client.getSemaphore(name).acquire({ permits: 2, signal: controller.signal });
    await until('the reservation is made', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 1);
    // A 1-permit request may not overtake the reservation.
    const other = redis.client();
    const small = other.getSemaphore(name).tryAcquire({ waitTime: 10_000 });
    await until('the small waiter is parked', () => other.stats.waiters === 1);
    controller.abort(new Error('stop'));
    await expect(big).rejects.toThrow('stop');
    expect(await small).toBe(true);
    expect(await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)).toBe(0);
    expect(client.stats).toMatchObject({ waiters: 0, waitingChannels: 0 });
    await until('no subscriber is left', async () => (await redis.admin.pubsub('NUMSUB', `rlock__semaphore:{${name}}`))[1] === 0);
    expect(await sem.availablePermits()).toBe(0);
  });

  test('close() settles a parked waiter with ClientClosedError', async () => {
    const client = redis.client();
    const waiting = client.getSemaphore(uniqueName()).acquire().then(() => 'acquired', (error: unknown) => error);
    await until('the waiter is parked', () => client.stats.waiters === 1);
    await client.close();
    expect(await waiting).toBeInstanceOf(ClientClosedError);
  });
});

describe('across processes', () => {
  test('2 processes × 6 tasks (some taking 2 permits) never hold more than the 4 permits', async () => {
    const name = uniqueName();
    await redis.client().getSemaphore(name).trySetPermits(4);
    const results = await Promise.all([0, 1].map(() => runFixture('permitWorker.ts', [redis.server.url, name, '6', '30', '4', 'plain'], 30_000)));
    for (const result of results) expect(result).toMatchObject({ code: 0 });
    expect(await redis.client().getSemaphore(name).availablePermits()).toBe(4);
    expect(await redis.admin.get(`${name}:holders`)).toBe('0');
  }, 40_000);
});

test('one handle acquiring twice takes two permits (never a silent refresh of the first)', async () => {
  const sem = redis.client().getSemaphore(uniqueName());
  await sem.trySetPermits(2);
  await sem.acquire();
  await sem.acquire();
  expect(await sem.availablePermits()).toBe(0);
  expect(await sem.tryAcquire()).toBe(false);
});

describe('in-process handoff', () => {
  test('4 clients in one process × 4 waiters on 4 permits, holds of 5 ms, 1 800 holds: no client starves, no task passed over for long (Redisson #5762, #3573)', async () => {
    const name = uniqueName();
    const clients = [0, 1, 2, 3].map(() => redis.client());
    await clients[0]!.getSemaphore(name).trySetPermits(4);
    const { mean, fewest, longest, longestOvertaken } = await takeTurns(clients, (client, section) => client.getSemaphore(name).withPermits(section));
    // A release wakes a waiter in every client and the quickest takes the permit; clients in one
    // process are always woken in the same order, so the last one lost nearly every race (a
    // client's tasks got 0.05-0.13 × the mean and were passed over by 660-1 000 holds of others
    // in one wait, up to 1.4 s) until a waiter that waited 100 ms may reserve the next permits
    // (0.4-0.6 × the mean, passed over by 110-310 holds, waits under 0.45 s).
    expect(fewest).toBeGreaterThan(0.25 * mean);
    expect(longestOvertaken).toBeLessThan(450);
    expect(longest).toBeLessThan(5_000); // liveness; the bound that judges is the one in holds
    expect(await clients[0]!.getSemaphore(name).availablePermits()).toBe(4);
  }, 20_000);

  test('a release hands permits to the parked waiters of its own client without any Redis call, at most 32 in a row', async () => {
    const { name, client, sem } = await takenSemaphore();
    const got: number[] = [];
    const waits = Array.from({ length: 34 }, (_, i) => client.getSemaphore(name).acquire().then(() => got.push(i)));
    await until('34 waiters are parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 34);
    const before = await scriptCalls();
    // Back to back, well within the run's 20 ms: each release hands the permit on in-process.
    for (let i = 0; i < 32; i++) await sem.release();
    await until('32 waiters hold in turn', () => got.length === 32);
    // Served in the order they parked, and Redis saw nothing.
    expect(got).toEqual(Array.from({ length: 32 }, (_, i) => i));
    expect((await scriptCalls()) - before).toBe(0);
    // The 33rd release goes back to Redis (so the other processes' waiters get their turn): the
    // release, one attempt by the waiter it woke, and at most one more (its message and the
    // reply saying no other client waits may each wake one).
    await sem.release();
    await until('a 33rd waiter holds', () => got.length === 33);
    await sleep(100); // a bound on what is sent (at most 3): time for a stray attempt to be counted
    expect((await scriptCalls()) - before).toBeGreaterThanOrEqual(2);
    expect((await scriptCalls()) - before).toBeLessThanOrEqual(3);
    await sem.release();
    await Promise.all(waits);
    await sem.release();
    expect(await sem.availablePermits()).toBe(1);
  });

  test('a reservation granted by the release that ends a run is taken at once, though its client yields its turn (it hung for good)', async () => {
    const { name, channel, client, sem } = await newSemaphore(2);
    await sem.acquire({ permits: 2 });
    // A 2-permit waiter of the same client reserves the next 2 permits and waits for its grant.
    let bigHolds = false;
    const big = client.getSemaphore(name).acquire({ permits: 2 }).then(() => (bigHolds = true));
    await until('the reservation is made', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 1);
    // A 1-permit waiter of the same client is handed a permit in-process: a run starts.
    let smallHolds = false;
    const small = client.getSemaphore(name).acquire().then(() => (smallHolds = true));
    await until('the 1-permit waiter is parked', () => parkedOnChannel(client, channel) === 1);
    // A waiter in another client, so that the grant's message reaches two clients and the
    // releasing client goes on yielding its turn (with nobody else listening it stops at once).
    const other = redis.client();
    const otherWait = other.getSemaphore(name).acquire();
    await until('the other client waits', () => other.stats.waiters === 1);
    await sem.release();
    await until('the 1-permit waiter holds', () => smallHolds);
    await sleep(30); // past the run's 20 ms: the next release ends the run and yields
    // Both permits back to Redis at once: the grant names the reservation's waiter.
    await sem.release({ permits: 2 });
    // Granted by message, no lease involved: it is served within a round trip or two. Before the
    // fix its attempt was skipped as the client yielded, and it slept on with no bound.
    await until('the 2-permit waiter holds', () => bigHolds, 1_000);
    await big;
    await small;
    expect(await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)).toBe(0);
    expect(await sem.availablePermits()).toBe(0);
    await sem.release({ permits: 2 });
    await otherWait;
    expect(await sem.availablePermits()).toBe(1);
  });

  test('a run of in-process handoffs ends 20 ms after its first: a holder that kept the permit longer gives it back to Redis', async () => {
    const { name, client, sem } = await takenSemaphore();
    let got = 0;
    const waits = Array.from({ length: 3 }, () => client.getSemaphore(name).acquire().then(() => got++));
    await until('3 waiters are parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 3);
    const before = await scriptCalls();
    await sem.release(); // the run's first handoff
    await until('the first waiter holds', () => got === 1);
    expect((await scriptCalls()) - before).toBe(0);
    await sleep(30); // held past the run's 20 ms
    await sem.release();
    await until('the second waiter holds', () => got === 2);
    // Through Redis this time: the release and the woken waiter's attempt.
    expect((await scriptCalls()) - before).toBeGreaterThanOrEqual(2);
    await sem.release();
    await Promise.all(waits);
    await sem.release();
    expect(await sem.availablePermits()).toBe(1);
  });

  test('a new caller behind parked waiters of its client parks without an attempt and is served after them; a 2-permit one still tries', async () => {
    const { name, client, sem } = await takenSemaphore();
    const got: string[] = [];
    const first = client.getSemaphore(name).acquire().then(() => got.push('first'));
    await until('the first waiter is parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 1);
    const before = await scriptCalls();
    const second = client.getSemaphore(name).acquire().then(() => got.push('second'));
    await until('the second waiter is parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 2);
    expect((await scriptCalls()) - before).toBe(0); // joined the queue without asking Redis
    // A caller that may not wait still tries (and is refused), and so does a 2-permit one.
    expect(await client.getSemaphore(name).tryAcquire()).toBe(false);
    expect((await scriptCalls()) - before).toBe(1);
    const big = client.getSemaphore(name).tryAcquire({ permits: 2, waitTime: 20_000 });
    await until('the 2-permit waiter tried', async () => (await scriptCalls()) - before >= 2);
    await sem.release();
    await first;
    await sem.release();
    await second;
    expect(got).toEqual(['first', 'second']);
    await sem.release();
    await sem.release();
    expect(await big).toBe(true);
  });

  test('a caller that joins its client\'s parked waiter without asking sleeps no longer than the bound their attempt was given: a dead process\'s reservation running out serves both', async () => {
    const name = uniqueName();
    const client = redis.client();
    const sem = client.getSemaphore(name);
    await sem.trySetPermits(2);
    // What a 3-permit waiter of a process that died leaves: its reservation, holding back the permits until it runs out.
    const reservation = `rlock__semaphore_reservation:{${name}}`;
    await redis.admin.hset(reservation, 'field', 'AAAAAAAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBB', 'permits', '3');
    await redis.admin.pexpire(reservation, 1_500);
    const started = performance.now();
    const settledAt: number[] = [];
    const take = (): Promise<boolean> => client.getSemaphore(name).tryAcquire({ waitTime: 10_000 }).then((ok) => (settledAt.push(performance.now() - started), ok));
    const x = take();
    await until('X is parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 1);
    const y = take(); // joins X without an attempt
    await until('Y is parked', () => parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 2);
    expect(await Promise.all([x, y])).toEqual([true, true]);
    // Both at the reservation's end (1.5 s), no message needed; Y slept on for its whole 10 s before.
    expect(Math.max(...settledAt)).toBeLessThan(4_000);
  });

  test('a 1-permit caller beside its client\'s parked request for more permits than are free takes a free permit at once: it neither stands back behind that request nor sleeps under its refusal (it waited 0.5-4.7 s, a permit free)', async () => {
    const name = uniqueName();
    const client = redis.client({ queueTimeout: 300 }); // the big request's reservation ends after 1.8 s; then it asks every 300 ms
    const sem = client.getSemaphore(name);
    await sem.trySetPermits(2);
    const controller = new AbortController();
    const big = sem.acquire({ permits: 3, signal: controller.signal }).catch((error: unknown) => error);
    await until('the reservation is held', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 1);
    await until('the reservation is over and the 3-permit request parked without it', async () => (await redis.admin.exists(`rlock__semaphore_reservation:{${name}}`)) === 0 && parkedOnChannel(client, `rlock__semaphore:{${name}}`) === 1, 5_000);
    const took: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      expect(await client.getSemaphore(name).tryAcquire({ waitTime: 5_000 })).toBe(true);
      took.push(performance.now() - started);
      await sem.release();
    }
    // One attempt each (a round trip); before, each waited out what was left of the big request's
    // 300 ms bound and then slept on under its refusals (0.5-4.7 s in the audit; 600 ms here).
    expect(Math.max(...took)).toBeLessThan(150);
    controller.abort(new Error('stop'));
    expect(await big).toEqual(new Error('stop'));
    expect(await sem.availablePermits()).toBe(2);
  });

  test('when a yield ends, the client\'s parked waiters try again for every permit its release gave back, not for one', async () => {
    const name = uniqueName();
    const a = redis.client();
    const sem = a.getSemaphore(name);
    await sem.trySetPermits(4);
    await sem.acquire({ permits: 3 });
    await sem.acquire();
    const settledAt: Record<string, number> = {};
    let released = 0;
    const take = (label: string, client = a): Promise<boolean> => client.getSemaphore(name).tryAcquire({ waitTime: 10_000 }).then((ok) => ((settledAt[label] = performance.now() - released), ok));
    const channel = `rlock__semaphore:{${name}}`;
    const w1 = take('w1');
    await until('w1 is parked', () => parkedOnChannel(a, channel) === 1);
    const w2 = take('w2');
    const w3 = take('w3');
    await until('w2 and w3 are parked', () => parkedOnChannel(a, channel) === 3);
    const b = redis.client();
    const wb = take('wb', b);
    await until('the other client\'s waiter is parked', () => parkedOnChannel(b, channel) === 1);
    await sem.release(); // handed to w1 in-process: a run starts
    await w1;
    await sleep(30); // past the run's 20 ms
    released = performance.now();
    await sem.release({ permits: 3 }); // back to Redis; this client yields its turn
    expect(await Promise.all([w2, w3, wb])).toEqual([true, true, true]);
    // After the yield's 50 ms both of this client's waiters try; before, one did and w3 slept on
    // with a permit free until its 10 s waitTime.
    expect(Math.max(settledAt.w2!, settledAt.w3!, settledAt.wb!)).toBeLessThan(2_000);
  });

  test('a negative addPermits by another client stops the in-process handoffs: releases go back to Redis until the permits are back (before: handed on, 2 holders of a total of 1)', async () => {
    const { name, channel, client, sem } = await newSemaphore(2);
    await sem.acquire();
    await sem.acquire(); // both held here, none free
    const got: number[] = [];
    const waits = [0, 1].map((i) => client.getSemaphore(name).acquire().then(() => got.push(i)));
    await until('2 waiters are parked', () => parkedOnChannel(client, channel) === 2);
    await redis.client().getSemaphore(name).addPermits(-1); // a total of 1 now, with 2 held
    await until('the client heard the cut', () => handoffsSuspended(client, channel));
    await sem.release(); // to Redis, not to a waiter: 1 held, none free
    expect(await redis.admin.get(name)).toBe('0');
    expect(got).toEqual([]);
    await sem.release(); // to Redis: 1 free, which a waiter takes
    await until('a waiter holds', () => got.length === 1);
    expect(await redis.admin.get(name)).toBe('0');
    expect(handoffsSuspended(client, channel)).toBe(false); // the release's reply: the permits are back
    await sem.release(); // handed on in-process again
    await Promise.all(waits);
    expect(await redis.admin.get(name)).toBe('0');
    await sem.release();
    expect(await sem.availablePermits()).toBe(1);
  });

  test('a client that was not listening when the permits were cut learns it from its refused attempt: its release goes back to Redis (before: handed to its waiter)', async () => {
    const { name, channel, client, sem } = await newSemaphore(1);
    await sem.acquire(); // no waiter: the client is not subscribed
    await redis.client().getSemaphore(name).addPermits(-1); // a total of 0 now, with 1 held
    let got = false;
    const waiting = client.getSemaphore(name).acquire().then(() => (got = true));
    await until('the waiter is parked', () => parkedOnChannel(client, channel) === 1);
    await sem.release(); // to Redis: none free, the waiter waits on
    expect(await redis.admin.get(name)).toBe('0');
    expect(got).toBe(false);
    await redis.client().getSemaphore(name).addPermits(1); // its message wakes the waiter
    await waiting;
    expect(await redis.admin.get(name)).toBe('0');
    await sem.release();
  });

  test('a client that missed the cut learns it from the reply of a release that went to Redis: its next release goes back to Redis too (before: handed to its waiter while the yield ran)', async () => {
    const { name, channel, client, sem } = await newSemaphore(2);
    await sem.acquire();
    await sem.acquire(); // both held here, none free
    const got: string[] = [];
    const first = client.getSemaphore(name).acquire().then(() => got.push('first'));
    const second = client.getSemaphore(name).acquire().then(() => got.push('second'));
    await until('2 waiters are parked', () => parkedOnChannel(client, channel) === 2);
    await sem.release(); // handed to the first in-process: a run starts
    await first;
    await sleep(30); // past the run's 20 ms: the next release goes to Redis
    // A cut to a total of 0 whose message this client never hears (as during a reconnect of its
    // subscriber): only the counter says so.
    await redis.admin.decrby(name, 2);
    await sem.release(); // to Redis, which answers -1 (one permit still owed); the client yields
    expect(await redis.admin.get(name)).toBe('-1');
    expect(handoffsSuspended(client, channel)).toBe(true);
    await sem.release(); // the first waiter's permit: pays off the cut, no waiter gets it
    expect(await redis.admin.get(name)).toBe('0');
    // A negative (the release handed nothing to the second waiter), with no event to wait for:
    // the second waiter does not ask when the 50 ms yield ends (only at its heartbeat, 5 s on),
    // so 100 ms is time for a wrong in-process handoff to show.
    await sleep(100);
    expect(got).toEqual(['first']);
    await redis.client().getSemaphore(name).addPermits(1); // its message wakes the second waiter
    await second;
    expect(await redis.admin.get(name)).toBe('0');
    await sem.release();
  });

  test('a handoff gives a waiter no more than the released permits: a 2-permit waiter is passed over for a 1-permit release', async () => {
    const { name, client, sem } = await takenSemaphore();
    const order: string[] = [];
    // Another client's 3-permit waiter holds the reservation, so this client's 2-permit waiter
    // cannot reserve and parks as a handoff candidate.
    const other = redis.client();
    void other.getSemaphore(name).tryAcquire({ permits: 3, waitTime: 20_000 }).catch(() => undefined);
    await until('the other client reserved', async () => (await redis.admin.hget(`rlock__semaphore_reservation:{${name}}`, 'permits')) === '3');
    const big = client.getSemaphore(name).tryAcquire({ permits: 2, waitTime: 20_000 }).then((ok) => order.push(`big ${ok}`));
    await until('the big waiter parked', () => client.stats.waiters === 1);
    const small = client.getSemaphore(name).acquire().then(() => order.push('small'));
    await until('the small waiter parked', () => client.stats.waiters === 2);
    await sem.release();
    await small;
    expect(order).toEqual(['small']);
    await sem.release({ permits: 2 }); // the 1-permit holder's and one more: the big waiter fits now
    await big;
    expect(order).toEqual(['small', 'big true']);
  });
});

describe('the undo of an attempt whose outcome is unknown, in either order with the attempt (scripts against Redis)', () => {
  // ioredis gave up on the attempt: Redis may run it before the undo (same connection) or, the
  // attempt held up on its way while the undo went on a new connection, after it.
  type Scripted = {
    rlock_semaphore_acquire(...args: unknown[]): Promise<[number, number, number?]>;
    rlock_semaphore_undoAcquire(...args: unknown[]): Promise<0 | 1>;
  };
  async function scripted(name: string) {
    const client = redis.client();
    const sem = client.getSemaphore(name);
    expect(await sem.trySetPermits(2)).toBe(true); // connected, scripts loaded
    const connection = (client as unknown as { context: { redis: Scripted } }).context.redis;
    const keys = [name, reservationKeyOf('', name)];
    const latch = `${latchPrefixOf('', name)}c:w.1`;
    const kind = kindKeyOf('', name);
    return {
      sem,
      acquire: () => connection.rlock_semaphore_acquire(...keys, latch, kind, 1, 'c:w', 0, 5_000, 60_000, 0),
      undo: () => connection.rlock_semaphore_undoAcquire(...keys, semaphoreChannelOf('', name), kind, latch, 1, 'publish', 'c', 60_000),
    };
  }

  test('the attempt ran first: its permit goes back, once (the undo sent again gives nothing more)', async () => {
    const { sem, acquire, undo } = await scripted(`undo-after:${process.pid}`);
    expect((await acquire())[0]).toBe(1);
    expect(await sem.availablePermits()).toBe(1);
    expect(await undo()).toBe(1);
    expect(await undo()).toBe(0);
    expect(await sem.availablePermits()).toBe(2);
  });

  test('the undo ran first: the attempt arriving later takes nothing', async () => {
    const { sem, acquire, undo } = await scripted(`undo-before:${process.pid}`);
    expect(await undo()).toBe(0);
    expect(await sem.availablePermits()).toBe(2);
    await acquire(); // answers "taken" to nobody, as a resend does
    expect(await sem.availablePermits()).toBe(2);
  });

  test('the undo’s tombstone lives as long as the attempt’s latch would (60 s): the attempt’s deadline relies on it', async () => {
    const name = `undo-tombstone:${process.pid}`;
    const { sem, acquire, undo } = await scripted(name);
    expect(await undo()).toBe(0);
    // 60 s asked; what the attempt's deadline (latch TTL less the margin) relies on.
    expect(await redis.admin.pttl(`${latchPrefixOf('', name)}c:w.1`)).toBeGreaterThan(50_000);
    await acquire();
    expect(await sem.availablePermits()).toBe(2);
  });

  test('permits the undo gives back wake a waiter parked on them at once, as a release does (not after its queue timeout)', async () => {
    const name = `undo-wakes:${process.pid}`;
    const { acquire, undo } = await scripted(name);
    expect((await acquire())[0]).toBe(1);
    const other = redis.client().getSemaphore(name);
    expect(await other.tryAcquire()).toBe(true); // none free now
    const waiter = redis.client({ queueTimeout: 20_000 }).getSemaphore(name);
    const waiting = waiter.tryAcquire({ waitTime: 5_000 });
    await until('the waiter parked', async () => (await redis.admin.call('pubsub', 'numsub', semaphoreChannelOf('', name)) as [string, number])[1] === 1);
    const undoneAt = performance.now();
    expect(await undo()).toBe(1);
    expect(await waiting).toBe(true);
    expect(performance.now() - undoneAt).toBeLessThan(2_000);
    await waiter.release();
    await other.release();
  });
});
