// The permit-expirable semaphore against a private redis-server: permits with ids and leases on
// Redis time, expired permits coming back by themselves (also for a holder killed -9), the
// watchdog keeping permits taken without a lease, and a lost permit aborting withPermit.
import { join } from 'node:path';
import { runFixture, startFixture, type FixtureProcess } from './helpers/child';
import { handoffsSuspended, parkedOnChannel, usePrivateRedis } from './helpers/privateRedis';
import { TcpProxy, useReplyCuts } from './helpers/tcpProxy';
import { scriptCallCount } from './helpers/testRedis';
import { takeTurns } from './helpers/takeTurns';
import { aborted, sleep, until } from './helpers/time';
import type { Redis } from 'ioredis';
import { ClientClosedError, InvalidArgumentError, LockLostError, PermitNotHeldError, RedisUnreachableError } from '../src';
import { defineScripts } from '../src/services/scripts';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `pes:${process.pid}:${++counter}`;
const children: FixtureProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.child.kill('SIGKILL');
});

const scriptCalls = (): Promise<number> => scriptCallCount(redis.admin);

/** A client through `proxy` (watchdog 1.5 s) with a permit kept by its watchdog, and its lockLost listener. */
async function watchdogPermitThrough(proxy: TcpProxy, offlineTimeout: number) {
  const client = redis.client({ redis: proxy.url, offlineTimeout, watchdogTimeout: 1_500 });
  const lost = jest.fn();
  client.on('lockLost', lost);
  const sem = client.getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const id = await sem.acquire(); // kept by the watchdog
  return { client, lost, sem, id, watchdogTimeout: 1_500 };
}

/** A connection of the test's own with the library's scripts, to run the handoff script by itself. */
const handoffConnection = () =>
  defineScripts(redis.admin.duplicate()) as unknown as {
    rlock_permitSemaphore_handoff(key: string, permitsKey: string, latch: string, id: string, newId: string, leaseMs: number, latchTtlMs: number, pipelined: 0 | 1): Promise<0 | 1 | 2 | 3>;
  } & Redis;

test('acquire gives distinct permit ids up to the total; release of an unknown id is a typed error', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  expect(await sem.trySetPermits(2)).toBe(true);
  expect(await sem.trySetPermits(5)).toBe(false);
  const a = await sem.acquire({ leaseTime: 10_000 });
  const b = await sem.tryAcquire({ leaseTime: 10_000 });
  expect(typeof a).toBe('string');
  expect(b).not.toBeNull();
  expect(b).not.toBe(a);
  expect(await sem.tryAcquire({ leaseTime: 10_000 })).toBeNull();
  expect(await sem.availablePermits()).toBe(0);
  await sem.release(a);
  await expect(sem.release(a)).rejects.toBeInstanceOf(PermitNotHeldError);
  await expect(sem.release('no-such-permit')).rejects.toBeInstanceOf(PermitNotHeldError);
  expect(await sem.tryRelease(b!)).toBe(true);
  expect(await sem.availablePermits()).toBe(2);
});

test('an expired permit is free again at once for a read-only availablePermits, and is not released twice', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const id = await sem.acquire({ leaseTime: 300 });
  expect(await sem.availablePermits()).toBe(0);
  const before = await redis.admin.zcard(`rlock__permits:{${sem.key}}`);
  await until('the lease ran out', async () => (await sem.availablePermits()) === 1);
  // availablePermits wrote nothing: the expired entry is still there until a write sweeps it.
  expect(await redis.admin.zcard(`rlock__permits:{${sem.key}}`)).toBe(before);
  expect(await sem.tryRelease(id)).toBe(false);
  expect(await sem.availablePermits()).toBe(1);
  expect(await sem.updateLeaseTime(id, 10_000)).toBe(false);
});

test('release of a list [expired, live]: the live one is released, then PermitNotHeldError names the expired one; the count is exact (Redisson PR #6348)', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(3);
  const expired = await sem.acquire({ leaseTime: 300 });
  const live = await sem.acquire({ leaseTime: 30_000 });
  const kept = await sem.acquire(); // the watchdog's
  await until('the first lease ran out', async () => (await sem.availablePermits()) === 1);
  const error = await sem.release([expired, live]).catch((failure: unknown) => failure);
  expect(error).toBeInstanceOf(PermitNotHeldError);
  expect((error as PermitNotHeldError).permitIds).toEqual([expired]);
  expect((error as PermitNotHeldError).permitId).toBe(expired);
  expect((error as Error).message).toContain(expired);
  expect((error as Error).message).not.toContain(live);
  expect(await sem.availablePermits()).toBe(2); // live's came back once, the expired one was never counted twice
  // tryRelease of a list: how many were held.
  expect(await sem.tryRelease([live, kept, 'no-such-permit'])).toBe(1);
  expect(await sem.availablePermits()).toBe(3);
  expect(await sem.tryRelease([])).toBe(0);
  await sem.release([]);
});

test('release of a list with a bad or repeated id is refused before Redis: nothing is released', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(2);
  const a = await sem.acquire({ leaseTime: 30_000 });
  const calls = await scriptCalls();
  await expect(sem.release([a, a])).rejects.toThrow(/permitIds\[1\]: is permit .* listed already/);
  await expect(sem.tryRelease([a, 5 as unknown as string])).rejects.toThrow(/permitIds\[1\]: must be a permit id/);
  await expect(sem.release(Array.from({ length: 1_001 }, (_, i) => `p${i}`))).rejects.toThrow(/at most 1000/);
  await expect(sem.release([a, ''])).rejects.toBeInstanceOf(InvalidArgumentError);
  expect(await scriptCalls()).toBe(calls);
  expect(await sem.availablePermits()).toBe(1); // a is still held
  await sem.release([a]);
  expect(await sem.availablePermits()).toBe(2);
});

test('updateLeaseTime extends a held permit (on Redis time)', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const id = await sem.acquire({ leaseTime: 300 });
  expect(await sem.updateLeaseTime(id, 10_000)).toBe(true);
  const [seconds, micros] = await redis.admin.time();
  const expiry = Number(await redis.admin.zscore(`rlock__permits:{${sem.key}}`, id));
  const left = expiry - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
  expect(left).toBeGreaterThan(9_000);
  expect(left).toBeLessThanOrEqual(10_000);
  await sem.release(id);
});

test('a waiter takes a permit whose lease runs out without any release (its sleep is bounded by that lease)', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  await sem.acquire({ leaseTime: 400 });
  const other = redis.client().getPermitExpirableSemaphore(sem.name);
  const id = await other.tryAcquire({ waitTime: 5_000, leaseTime: 10_000 });
  expect(id).not.toBeNull();
});

test('a waiter is woken by the release message: one attempt, no polling', async () => {
  const name = uniqueName();
  const sem = redis.client().getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  const id = await sem.acquire({ leaseTime: 60_000 });
  const waitingClient = redis.client();
  const waiting = waitingClient.getPermitExpirableSemaphore(name).acquire({ leaseTime: 60_000 });
  await until('the waiter asked and is parked', () => parkedOnChannel(waitingClient, `rlock__permits_channel:{${name}}`) === 1);
  const before = await scriptCalls();
  await sleep(300); // the time is the subject: a parked waiter sends nothing meanwhile
  expect(await scriptCalls()).toBe(before);
  await sem.release(id);
  await waiting;
  expect((await scriptCalls()) - before).toBe(2);
});

test('the watchdog keeps a permit taken without a lease past 3 leases, and stops after release', async () => {
  // 1 s leases, not shorter: see the next test.
  const client = redis.client({ watchdogTimeout: 1_000 });
  const sem = client.getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const id = await sem.acquire();
  expect(client.stats.renewals).toBe(1);
  await sleep(3_300); // past three 1 s leases: only renewals keep it
  expect(await sem.availablePermits()).toBe(0);
  expect(await redis.client().getPermitExpirableSemaphore(sem.name).tryAcquire()).toBeNull();
  await sem.release(id);
  expect(client.stats.renewals).toBe(0);
  const before = await scriptCalls();
  await sleep(1_000); // three watchdog periods
  expect((await scriptCalls()) - before).toBe(0);
  expect(await sem.availablePermits()).toBe(1);
});

test('32 holders of 25 permits under a 1 s watchdog (a renewal every 333 ms), holds of 0-800 ms: no release is ever reported as a loss (redis-semaphore #205, #206)', async () => {
  const name = uniqueName();
  // Not shorter: a loaded CI machine stalls long enough to lose a 30 ms lease for real, and a
  // 300 ms one under heavy load (a renewal blocked for 270 ms).
  const clients = [0, 1, 2, 3].map(() => redis.client({ watchdogTimeout: 1_000 }));
  const lost: unknown[] = [];
  for (const client of clients) client.on('lockLost', (event) => lost.push(event));
  await clients[0]!.getPermitExpirableSemaphore(name).trySetPermits(25);
  let inside = 0;
  let most = 0;
  let holds = 0;
  const stop = performance.now() + 4_000;
  await Promise.all(
    Array.from({ length: 32 }, async (_, task) => {
      const sem = clients[task % 4]!.getPermitExpirableSemaphore(name);
      while (performance.now() < stop) {
        await sem.withPermit(async (signal) => {
          most = Math.max(most, ++inside);
          // Holds across several renewals, and releases racing them.
          await sleep(Math.floor(Math.random() * 800)); // the section's work
          expect(signal.aborted).toBe(false);
          inside--;
          holds++;
        });
      }
    }),
  );
  expect(lost).toEqual([]);
  expect(most).toBe(25);
  expect(holds).toBeGreaterThan(100);
  expect(clients.map((client) => client.stats.renewals)).toEqual([0, 0, 0, 0]);
  expect(await clients[0]!.getPermitExpirableSemaphore(name).availablePermits()).toBe(25);
}, 20_000);

test('4 clients in one process × 4 waiters on 4 permits, holds of 5 ms, 1 800 holds: no client starves, no task passed over for long (the claim)', async () => {
  const name = uniqueName();
  const clients = [0, 1, 2, 3].map(() => redis.client());
  await clients[0]!.getPermitExpirableSemaphore(name).trySetPermits(4);
  const { mean, fewest, longest, longestOvertaken } = await takeTurns(clients, (client, section) => client.getPermitExpirableSemaphore(name).withPermit(section));
  // Without the claim the client woken last got 5 to 7 holds per task against a mean of 110 and
  // was passed over by ~900 holds of others in one wait (1.3 s); with it 0.4 to 0.8 × the mean,
  // passed over by at most ~310 holds.
  expect(fewest).toBeGreaterThan(0.25 * mean);
  expect(longestOvertaken).toBeLessThan(450);
  expect(longest).toBeLessThan(5_000); // liveness; the bound that judges is the one in holds
  expect(await clients[0]!.getPermitExpirableSemaphore(name).availablePermits()).toBe(4);
}, 20_000);

test('a claim keeps the next free permit for the claiming client: others are refused it, any waiter of that client takes it and ends the claim; inspect shows it', async () => {
  const name = uniqueName();
  const [claimant, other] = [redis.client(), redis.client()];
  const sem = other.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(2);
  const held = await sem.acquire({ leaseTime: 10_000 });
  // As a waiter of `claimant` that waited 100 ms and was refused would have left it.
  await redis.admin.set(`rlock__permits_claim:{${name}}`, claimant.id, 'PX', 5_000);
  const info = await sem.inspect();
  expect(info).toMatchObject({ availablePermits: 1, claim: { clientId: claimant.id } });
  expect(info.claim!.expiresInMs).toBeGreaterThan(4_000);
  // One permit is free, and it is kept: the other client is refused it (and told to sleep at
  // most until the claim ends), the claimant takes it.
  expect(await sem.tryAcquire()).toBeNull();
  const kept = await claimant.getPermitExpirableSemaphore(name).tryAcquire();
  expect(kept).not.toBeNull();
  expect((await sem.inspect()).claim).toBeNull();
  await sem.release(held);
  // No claim any more: the freed permit is anyone's.
  expect(await sem.tryAcquire()).not.toBeNull();
});

test('a process whose clock runs 10 s ahead does not take back a permit whose lease (on Redis time) still runs', async () => {
  const name = uniqueName();
  const sem = redis.client().getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  const prober = startFixture('tryPermit.ts', [redis.server.url, name, '1000'], ['--require', join(__dirname, 'fixtures', 'skewedClock.cjs')]);
  children.push(prober);
  // Taken once the prober is up: its start-up under load could outlast the lease.
  await prober.line((line) => line === 'ready', 60_000);
  // A lease swept by the caller's clock (Redisson's) would look 5 s past to the prober.
  const id = await sem.acquire({ leaseTime: 5_000 });
  prober.child.stdin!.end();
  expect(await prober.exited(20_000)).toMatchObject({ code: 0 });
  expect(prober.lines).toEqual(['ready', 'refused']);
  expect(await sem.availablePermits()).toBe(0);
  await sem.release(id); // still held: no PermitNotHeldError
  expect(await sem.availablePermits()).toBe(1);
}, 90_000);

test('a process whose clock runs 10 s ahead that does get a permit gets its lease on Redis time, not 10 s more', async () => {
  const name = uniqueName();
  const sem = redis.client().getPermitExpirableSemaphore(name);
  await sem.trySetPermits(2);
  const other = await sem.acquire({ leaseTime: 10_000 });
  const prober = startFixture('tryPermit.ts', [redis.server.url, name, '1000', '700'], ['--require', join(__dirname, 'fixtures', 'skewedClock.cjs')]);
  children.push(prober);
  await prober.line((line) => line === 'ready', 60_000);
  prober.child.stdin!.end();
  const id = (await prober.line((line) => line.startsWith('granted '), 20_000)).split(' ')[1]!;
  const [seconds, micros] = await redis.admin.time();
  const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const expiresIn = Number(await redis.admin.zscore(`rlock__permits:{${sem.key}}`, id)) - redisNow;
  // Its 1 s lease, counted on Redis's clock (a lease on the caller's would end ~11 s from now).
  expect(expiresIn).toBeGreaterThan(0);
  expect(expiresIn).toBeLessThanOrEqual(1_000);
  expect(await prober.exited(20_000)).toMatchObject({ code: 0 });
  await sem.release(other); // the other holder's 10 s permit was left alone
}, 90_000);

test('a caller that joins its client\'s parked waiter without asking is served when a lease runs out: no message needed', async () => {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(2);
  // Another process's permits, never released: they come back when their leases run out.
  const other = redis.client().getPermitExpirableSemaphore(name);
  await other.acquire({ leaseTime: 500 });
  await other.acquire({ leaseTime: 1_500 });
  const started = performance.now();
  const settledAt: number[] = [];
  const take = (): Promise<string | null> => client.getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 10_000 }).then((id) => (settledAt.push(performance.now() - started), id));
  const x = take();
  await until('X is parked', () => client.stats.waiters === 1);
  const y = take(); // joins X without an attempt
  await until('Y is parked', () => client.stats.waiters === 2);
  const ids = await Promise.all([x, y]);
  expect(ids.every((id) => id !== null)).toBe(true);
  // At the leases' ends (0.5 and 1.5 s); before, Y slept on with a permit free until its 10 s waitTime.
  expect(Math.max(...settledAt)).toBeLessThan(4_000);
});

test('an updateLeaseTime that failed after a watchdog tick found nothing to renew: the permit, back with the watchdog, is reported lost at its lease end while Redis stays away (before: never)', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const { client, lost, sem, id, watchdogTimeout } = await watchdogPermitThrough(proxy, 800); // a tick every 500 ms
    const acquiredAt = performance.now();
    // The connection drops and cannot come back.
    proxy.stopAccepting();
    proxy.cutAll();
    await until('the client saw the connection drop', () => (client as unknown as { redis: { status: string } }).redis.status !== 'ready');
    // Waits offlineTimeout (800 ms) for the connection, longer than a tick, which meanwhile finds no permit to renew.
    await expect(sem.updateLeaseTime(id, 60_000)).rejects.toBeInstanceOf(RedisUnreachableError);
    expect(client.stats.renewals).toBe(1); // back with the watchdog
    await until('the permit is reported lost', () => lost.mock.calls.length === 1, 5_000);
    expect(performance.now() - acquiredAt).toBeLessThan(watchdogTimeout + 1_000);
  } finally {
    await proxy.close();
  }
});

test('an updateLeaseTime still waiting for the connection when the old lease may end reports the permit lost once, and not again when it fails', async () => {
  // A second reader's find: the loss reported at the old lease's end, the failed call then put the
  // permit back on the watchdog, whose deadline had passed: lockLost a second time.
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const { client, lost, sem, id } = await watchdogPermitThrough(proxy, 3_000); // waits longer than the lease
    proxy.stopAccepting();
    proxy.cutAll();
    await until('the client saw the connection drop', () => (client as unknown as { redis: { status: string } }).redis.status !== 'ready');
    await expect(sem.updateLeaseTime(id, 60_000)).rejects.toBeInstanceOf(RedisUnreachableError);
    expect(lost).toHaveBeenCalledTimes(1); // at the old lease's end, while the call waited
    await sleep(200); // a deadline put back in the past fires at once: none may come
    expect(lost).toHaveBeenCalledTimes(1);
    expect(client.stats.renewals).toBe(0);
  } finally {
    await proxy.close();
  }
});

test('an updateLeaseTime that never reached Redis leaves the permit with the watchdog, renewed, not run out unreported', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const { client, lost, sem, id, watchdogTimeout } = await watchdogPermitThrough(proxy, 300);
    // The connection drops and cannot come back for now.
    proxy.stopAccepting();
    proxy.cutOnNextReply();
    void sem.availablePermits().catch(() => undefined); // its reply is the one cut
    await until('the client saw the connection drop', () => (client as unknown as { redis: { status: string } }).redis.status !== 'ready');
    await expect(sem.updateLeaseTime(id, 60_000)).rejects.toBeInstanceOf(RedisUnreachableError);
    expect(client.stats.renewals).toBe(1);
    await proxy.resumeAccepting();
    // Past two of its leases: renewed all along, not reported lost.
    await sleep(2 * watchdogTimeout);
    const [seconds, micros] = await redis.admin.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    expect(Number(await redis.admin.zscore(`rlock__permits:{${sem.key}}`, id))).toBeGreaterThan(redisNow);
    expect(lost).not.toHaveBeenCalled();
    await sem.release(id);
  } finally {
    await proxy.close();
  }
}, 20_000);

test('withPermit: a permit lost under the watchdog aborts the signal, emits lockLost, and withPermit rejects', async () => {
  const client = redis.client({ watchdogTimeout: 300 });
  const sem = client.getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const lostEvents: string[] = [];
  client.on('lockLost', (event) => lostEvents.push(event.ownerId));
  let permitId = '';
  const run = sem.withPermit(async (signal) => {
    permitId = (await redis.admin.zrange(`rlock__permits:{${sem.key}}`, 0, 0))[0]!;
    await redis.admin.zrem(`rlock__permits:{${sem.key}}`, permitId); // someone wiped it
    return aborted(signal);
  });
  await expect(run).rejects.toBeInstanceOf(LockLostError);
  // Named as a permit of its semaphore, not as a lock (a newcomer's audit).
  await expect(run).rejects.toThrow(`permit ${permitId} of semaphore "${sem.name}" was lost: `);
  expect(lostEvents).toEqual([permitId]);
  expect(client.stats.renewals).toBe(0);
  expect(await sem.availablePermits()).toBe(1);
});

describe('updateLeaseTime inside withPermit: the scope follows what becomes of the permit', () => {
  // Before (a helper audit): the scope listened to the watchdog alone. A permit given a lease of
  // its own ran out with the scope's signal never aborting; a longer lease still ended the scope
  // at the first one; an update that found the permit gone, or that Redis left unanswered past
  // the old lease, told nobody.
  const permitOf = async (key: string): Promise<string> => (await redis.admin.zrange(`rlock__permits:{${key}}`, 0, 0))[0]!;

  test('a watchdog-kept permit given a lease of its own: the signal aborts when that lease runs out', async () => {
    expect.assertions(3); // two of them in the callback: it must run
    const sem = redis.client({ watchdogTimeout: 1_000 }).getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    const run = sem.withPermit(async (signal) => {
      expect(await sem.updateLeaseTime(await permitOf(sem.key), 300)).toBe(true);
      await until('the new lease ends the scope', () => signal.aborted, 3_000);
      expect(signal.reason).toBeInstanceOf(LockLostError);
      signal.throwIfAborted();
    });
    await expect(run).rejects.toThrow(/^permit \S+ of semaphore "[^"]+" was lost: its lease of 300 ms ran out$/);
  });

  test('a leaseTime permit given a longer lease: the signal does not abort at the first one', async () => {
    expect.assertions(3);
    const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    const run = sem.withPermit(
      async (signal) => {
        expect(await sem.updateLeaseTime(await permitOf(sem.key), 5_000)).toBe(true);
        await sleep(700); // past the first lease (300 ms): only an abort that should not come is looked for
        expect(signal.aborted).toBe(false);
        return 'done';
      },
      { leaseTime: 300 },
    );
    await expect(run).resolves.toBe('done');
  });

  test('an update that finds the permit gone reports it lost at once', async () => {
    expect.assertions(5);
    const client = redis.client({ watchdogTimeout: 3_000 });
    const lost: string[] = [];
    client.on('lockLost', (event) => lost.push(event.ownerId));
    const sem = client.getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    let id = '';
    const run = sem.withPermit(async (signal) => {
      id = await permitOf(sem.key);
      await redis.admin.zrem(`rlock__permits:{${sem.key}}`, id); // someone wiped it
      expect(await sem.updateLeaseTime(id, 5_000)).toBe(false);
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBeInstanceOf(LockLostError);
    });
    await expect(run).rejects.toBeInstanceOf(LockLostError);
    expect(lost).toEqual([id]);
  });

  test('an update Redis leaves unanswered: the permit counts as lost once its old lease may have run out', async () => {
    expect.assertions(3);
    const client = redis.client({ watchdogTimeout: 1_000 });
    const lost = jest.fn();
    client.on('lockLost', lost);
    const sem = client.getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    const run = sem.withPermit(async (signal) => {
      const id = await permitOf(sem.key);
      redis.server.pause(); // Redis freezes with the update on its way
      const update = sem.updateLeaseTime(id, 60_000);
      try {
        await until('the scope is told', () => signal.aborted, 5_000);
        expect(signal.reason).toBeInstanceOf(LockLostError);
      } finally {
        redis.server.resume();
        await update;
      }
    });
    await expect(run).rejects.toBeInstanceOf(LockLostError);
    expect(lost).toHaveBeenCalledTimes(1);
  });
});

test('the handoff script: a resend answers "handed over" and hands over once; a permit not held is not handed over and leaves no latch', async () => {
  const conn = handoffConnection();
  try {
    const name = uniqueName();
    const sem = redis.client().getPermitExpirableSemaphore(name);
    await sem.trySetPermits(1);
    const old = await sem.acquire({ leaseTime: 60_000 });
    const permitsKey = `rlock__permits:{${name}}`;
    const latch = `rlock__unlock_latch:{${name}}:req1`;
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch, old, 'new-id', 60_000, 1000, 0)).toBe(1);
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch, old, 'new-id', 60_000, 1000, 0)).toBe(1);
    expect(await conn.zrange(permitsKey, 0, -1)).toEqual(['new-id']);
    // Not held (released, expired, unknown): 0, and no latch, so a resend answers 0 again.
    const latch2 = `rlock__unlock_latch:{${name}}:req2`;
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch2, 'no-such-permit', 'other-id', 60_000, 1000, 0)).toBe(0);
    expect(await conn.exists(latch2)).toBe(0);
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch2, 'no-such-permit', 'other-id', 60_000, 1000, 0)).toBe(0);
    expect(await conn.zrange(permitsKey, 0, -1)).toEqual(['new-id']);
  } finally {
    await (conn as Redis).quit();
  }
});

describe('a release whose reply is lost to a reconnect (ioredis resends it)', () => {
  const proxy = useReplyCuts(redis);
  const { resent } = proxy;

  test('a resent release answers "released" from its latch', async () => {
    const sem = redis.client({ redis: proxy.url }).getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(2);
    const id = await sem.acquire({ leaseTime: 10_000 });
    expect(await resent(() => sem.tryRelease(id))).toBe(true);
    expect(await sem.availablePermits()).toBe(2);
  });

  test('a permit taken away before such a release is reported lost, not released', async () => {
    const client = redis.client({ redis: proxy.url });
    const lostEvents: string[] = [];
    client.on('lockLost', (event) => lostEvents.push(event.ownerId));
    const sem = client.getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    const id = await sem.acquire(); // under the watchdog
    await redis.admin.zrem(`rlock__permits:{${sem.key}}`, id); // Redis lost it
    await expect(resent(() => sem.release(id))).rejects.toBeInstanceOf(PermitNotHeldError);
    expect(lostEvents).toEqual([id]);
    expect(client.stats.renewals).toBe(0);
  });

  test('an acquire whose reply is lost takes its permit once: the resend finds it taken, nothing is left that nobody holds', async () => {
    const sem = redis.client({ redis: proxy.url }).getPermitExpirableSemaphore(uniqueName());
    await sem.trySetPermits(1);
    await sem.availablePermits(); // the scripts are loaded: no NOSCRIPT reply to cut below
    const id = await resent(() => sem.tryAcquire({ leaseTime: 60_000 }));
    expect(id).not.toBeNull(); // before: refused by its own permit, which stayed for its lease
    expect(await redis.admin.zrange(`rlock__permits:{${sem.key}}`, 0, -1)).toEqual([id]);
    await sem.release(id!);
    expect(await sem.availablePermits()).toBe(1);
  });

  test('a resent addPermits changes the total once; a resent trySetPermits answers true', async () => {
    const sem = redis.client({ redis: proxy.url }).getPermitExpirableSemaphore(uniqueName());
    await redis.client({ redis: proxy.url }).getPermitExpirableSemaphore(uniqueName()).trySetPermits(1); // the script is loaded
    // Connected, its start-up calls answered: the cut below must fall on the call, not on them
    // (the CI run of 81af270 cut a start-up reply: one script call counted, not the two of a resend).
    await sem.availablePermits();
    expect(await resent(() => sem.trySetPermits(2))).toBe(true);
    await resent(() => sem.addPermits(1));
    expect(await sem.availablePermits()).toBe(3);
    await resent(() => sem.addPermits(-2));
    expect(await sem.availablePermits()).toBe(1);
  });
});

test('withPermit: a permit taken away that no renewal noticed before the release: withPermit rejects LockLostError', async () => {
  const sem = redis.client().getPermitExpirableSemaphore(uniqueName());
  await sem.trySetPermits(1);
  const run = sem.withPermit(async () => {
    const [id] = await redis.admin.zrange(`rlock__permits:{${sem.key}}`, 0, 0);
    await redis.admin.zrem(`rlock__permits:{${sem.key}}`, id!); // the next renewal is a while off
  });
  await expect(run).rejects.toBeInstanceOf(LockLostError);
  await expect(run).rejects.toThrow(/^permit \S+ of semaphore "[^"]+" was lost: its release found it no longer held$/);
});

test('the handoff script after a cut below the permits held: the permit is released, not handed over (2), and a resend answers the same', async () => {
  const conn = handoffConnection();
  try {
    const name = uniqueName();
    const sem = redis.client().getPermitExpirableSemaphore(name);
    await sem.trySetPermits(2);
    const [a, b] = [await sem.acquire({ leaseTime: 60_000 }), await sem.acquire({ leaseTime: 60_000 })];
    await sem.addPermits(-1); // a total of 1, with 2 held
    const permitsKey = `rlock__permits:{${name}}`;
    const latch = `rlock__unlock_latch:{${name}}:req1`;
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch, a, 'new-id', 60_000, 1000, 0)).toBe(2); // before: 1
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, latch, a, 'new-id', 60_000, 1000, 0)).toBe(2);
    expect(await conn.zrange(permitsKey, 0, -1)).toEqual([b]);
    // Paid off: the next one is handed over.
    expect(await conn.rlock_permitSemaphore_handoff(name, permitsKey, `${latch}b`, b, 'new-id', 60_000, 1000, 0)).toBe(1);
    expect(await conn.zrange(permitsKey, 0, -1)).toEqual(['new-id']);
  } finally {
    await (conn as Redis).quit();
  }
});

/** A new semaphore of `permits` on a new client, with the permits the client is told it lost. */
async function watchedSemaphore(permits: number) {
  const name = uniqueName();
  const client = redis.client();
  const lostEvents: string[] = [];
  client.on('lockLost', (event) => lostEvents.push(event.ownerId));
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(permits);
  return { name, channel: `rlock__permits_channel:{${name}}`, client, lostEvents, sem };
}

test('a negative addPermits by another client: a release hands no permit on while the total is below those held, and does not pipeline (before: 2 permits held on a total of 1)', async () => {
  const { name, channel, client, lostEvents, sem } = await watchedSemaphore(2);
  const [a, b] = [await sem.acquire(), await sem.acquire()]; // watchdog-kept: a handoff between them would be pipelined
  let got: string | undefined;
  const waiting = client.getPermitExpirableSemaphore(name).acquire().then((id) => (got = id));
  await until('the waiter is parked', () => parkedOnChannel(client, channel) === 1);
  await redis.client().getPermitExpirableSemaphore(name).addPermits(-1); // a total of 1, with 2 held
  await until('the client heard the cut', () => handoffsSuspended(client, channel));
  expect(await sem.tryRelease(a)).toBe(true);
  expect(await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).toEqual([b]);
  expect(got).toBeUndefined();
  expect(await sem.tryRelease(b)).toBe(true); // paid off: handed to the waiter
  await waiting;
  expect(await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).toEqual([got]);
  expect(handoffsSuspended(client, channel)).toBe(false);
  expect(lostEvents).toEqual([]);
  await sem.release(got!);
});

test('a client that missed the cut (not listening then) and pipelines a handoff: the waiter gets a real permit, the client stops pipelining, the next release pays off the cut (before: a permit Redis never had, reported lost)', async () => {
  const { name, channel, client, lostEvents, sem } = await watchedSemaphore(3);
  const held = [await sem.acquire(), await sem.acquire(), await sem.acquire()]; // watchdog-kept; no waiter: not subscribed
  await redis.client().getPermitExpirableSemaphore(name).addPermits(-2); // a total of 1, with 3 held
  const waiters = [0, 1].map(() => client.getPermitExpirableSemaphore(name).acquire());
  await until('the waiters are parked', () => parkedOnChannel(client, channel) === 2);
  expect(handoffsSuspended(client, channel)).toBe(false); // it never heard the cut
  expect(await sem.tryRelease(held[0]!)).toBe(true); // pipelined: handed over beyond the cut (3), then no more pipelining
  const first = await waiters[0]!;
  expect(handoffsSuspended(client, channel)).toBe(true);
  expect(await sem.tryRelease(held[1]!)).toBe(true); // not handed over: it pays off the cut
  await until('the other waiter, refused, is parked again', () => parkedOnChannel(client, channel) === 1);
  expect((await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).sort()).toEqual([first, held[2]].sort());
  expect(await sem.tryRelease(held[2]!)).toBe(true); // not handed over either: 1 held of 1
  await until('the waiter is parked again', () => parkedOnChannel(client, channel) === 1);
  expect(await sem.tryRelease(first)).toBe(true); // handed to the last waiter
  const second = await waiters[1]!;
  expect(await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).toEqual([second]);
  expect(lostEvents).toEqual([]);
  await sem.release(second);
});

test('a handoff between permits the watchdog keeps is pipelined: the waiter holds before the reply, and is told at once if the script finds the released permit gone', async () => {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  const lostEvents: string[] = [];
  client.on('lockLost', (event) => lostEvents.push(event.ownerId));
  // A normal pipelined handoff: the waiter holds, renewed by the watchdog, one script call.
  const first = await sem.acquire();
  const second = client.getPermitExpirableSemaphore(name).acquire();
  await until('the waiter is parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 1);
  await sem.release(first);
  const secondId = await second;
  expect(await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).toEqual([secondId]);
  // Redis lost the holder's permit; the waiter, handed it before the reply, learns it from the reply.
  let waiterId = '';
  const waiter = client.getPermitExpirableSemaphore(name).withPermit(async (signal) => {
    waiterId = (await redis.admin.zrange(`rlock__permits:{${name}}`, 0, 0))[0] ?? '';
    return aborted(signal);
  });
  await until('the next waiter is parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 1);
  await redis.admin.zrem(`rlock__permits:{${name}}`, secondId);
  expect(await sem.tryRelease(secondId)).toBe(false);
  await expect(waiter).rejects.toBeInstanceOf(LockLostError);
  // The waiter's permit, and the holder's, whose release found it gone (tryRelease false).
  expect(lostEvents).toHaveLength(2);
  expect(lostEvents).toContain(secondId);
  expect(waiterId).toBe(''); // it ran on the permit it was handed, which Redis never had
  expect(client.stats.renewals).toBe(0);
  expect(await sem.availablePermits()).toBe(1);
});

test('a pipelined handoff whose script never reaches Redis (the link went silent): the waiter stops before the released permit can run out in Redis (before: it held on to a full lease from the handoff, beside the next holder)', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const watchdogTimeout = 3_000;
    const client = redis.client({ redis: proxy.url, watchdogTimeout, offlineTimeout: 500 });
    const name = uniqueName();
    const sem = client.getPermitExpirableSemaphore(name);
    await sem.trySetPermits(1);
    const first = await sem.acquire(); // kept by the watchdog: a handoff from it is pipelined
    const acquiredAt = performance.now();
    const lost: string[] = [];
    client.on('lockLost', (event) => lost.push(event.ownerId));
    let stoppedAt = Infinity;
    const waiter = sem.withPermit((signal) => aborted(signal).then(() => (stoppedAt = performance.now())));
    await until('the waiter is parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 1);
    // Late in the first permit's lease (not yet renewed), so that a full lease counted from the
    // handoff ends well after it.
    await sleep(watchdogTimeout / 4 - (performance.now() - acquiredAt));
    proxy.silenced = true;
    void sem.release(first).catch(() => undefined); // pipelined: the waiter holds from its send
    const other = await redis.client().getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 2 * watchdogTimeout });
    const otherAt = performance.now();
    expect(other).not.toBeNull(); // the first permit ran out in Redis: the slot is free
    expect(stoppedAt).toBeLessThan(otherAt);
    expect(lost.filter((id) => id !== first)).toHaveLength(1); // the waiter's permit, reported lost
    // Its release in withPermit's finally waits on the silent link: close() ends it.
    const rejected = expect(waiter).rejects.toBeInstanceOf(ClientClosedError);
    await client.close();
    await rejected;
  } finally {
    await proxy.close();
  }
}, 20_000);

test('a holder process killed -9: its permit comes back after the lease', async () => {
  const name = uniqueName();
  const sem = redis.client().getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  // Not shorter: a loaded machine can stall the holder's renewal past most of a 600 ms lease.
  const holder = startFixture('holdPermit.ts', [redis.server.url, name, '1500']);
  children.push(holder);
  await holder.line((line) => line.startsWith('acquired '));
  await sleep(2_200); // the holder's watchdog keeps it past its first lease
  expect(await sem.availablePermits()).toBe(0);
  holder.child.kill('SIGKILL');
  const killedAt = performance.now();
  const id = await sem.tryAcquire({ waitTime: 15_000, leaseTime: 10_000 });
  expect(id).not.toBeNull();
  expect(performance.now() - killedAt).toBeLessThan(1_500 + 3_000);
});

test('an aborted waiter leaves nothing: no permit, no subscription', async () => {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  await sem.acquire({ leaseTime: 60_000 });
  const controller = new AbortController();
  const waiting = sem.acquire({ signal: controller.signal });
  await until('the waiter is parked', () => client.stats.waiters === 1);
  controller.abort(new Error('stop'));
  await expect(waiting).rejects.toThrow('stop');
  expect(await redis.admin.zcard(`rlock__permits:{${name}}`)).toBe(1);
  expect(client.stats).toMatchObject({ waiters: 0, waitingChannels: 0, renewals: 0 });
});

test('2 processes × 6 tasks under the watchdog never hold more than the 3 permits', async () => {
  const name = uniqueName();
  await redis.client().getPermitExpirableSemaphore(name).trySetPermits(3);
  const results = await Promise.all([0, 1].map(() => runFixture('permitWorker.ts', [redis.server.url, name, '6', '30', '3', 'expirable'], 30_000)));
  for (const result of results) expect(result).toMatchObject({ code: 0 });
  expect(await redis.client().getPermitExpirableSemaphore(name).availablePermits()).toBe(3);
  expect(await redis.admin.get(`${name}:holders`)).toBe('0');
}, 40_000);

test('a new caller behind parked waiters of its client parks without an attempt; a release hands it the permit in one script call', async () => {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  const held = await sem.acquire({ leaseTime: 60_000 });
  const ids: string[] = [];
  const first = client.getPermitExpirableSemaphore(name).acquire({ leaseTime: 60_000 }).then((id) => ids.push(id));
  await until('the first waiter is parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 1);
  const before = await scriptCalls();
  const second = client.getPermitExpirableSemaphore(name).acquire({ leaseTime: 60_000 }).then((id) => ids.push(id));
  await until('the second waiter is parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 2);
  expect((await scriptCalls()) - before).toBe(0);
  await sem.release(held);
  await first;
  await sem.release(ids[0]!);
  await second;
  expect((await scriptCalls()) - before).toBe(2); // the two handoffs, nothing else
  await sem.release(ids[1]!);
  expect(await sem.availablePermits()).toBe(1);
});

test('a release hands the permit to a parked waiter of its own client in one script call (no message, no attempt); an expired one is not handed over', async () => {
  const name = uniqueName();
  const client = redis.client();
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  const first = await sem.acquire({ leaseTime: 60_000 });
  const ids: string[] = [];
  let onHold: (() => void) | undefined;
  const nextHold = () => new Promise<void>((resolve) => (onHold = resolve));
  const waits = [0, 1, 2].map(() =>
    client
      .getPermitExpirableSemaphore(name)
      .acquire({ leaseTime: 60_000 })
      .then((id) => {
        ids.push(id);
        onHold?.();
      }),
  );
  // Parked as handoff candidates: past their retries after subscribing, whose calls are counted.
  await until('3 waiters are parked', () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 3);
  const before = await scriptCalls();
  // The two releases follow each other at once: a run of local handoffs ends after
  // MAX_LOCAL_RUN_MS (20 ms), and a check of Redis between them could outlast it on a busy machine.
  let held = nextHold();
  await sem.release(first);
  await held;
  expect(ids).toHaveLength(1);
  held = nextHold();
  await sem.release(ids[0]!);
  await held;
  expect(ids).toHaveLength(2);
  // Two handoffs of one script call each: no release message, no attempt.
  expect((await scriptCalls()) - before).toBe(2);
  expect(await redis.admin.zrange(`rlock__permits:{${name}}`, 0, -1)).toEqual([ids[1]]);
  // A permit whose lease ran out was free already: not handed over, the waiter takes a permit as usual.
  expect(await sem.updateLeaseTime(ids[1]!, 1)).toBe(true);
  await sleep(20); // past that 1 ms lease
  expect(await sem.tryRelease(ids[1]!)).toBe(false);
  await Promise.all(waits);
  expect(ids).toHaveLength(3);
  await sem.release(ids[2]!);
  expect(await sem.availablePermits()).toBe(1);
});
