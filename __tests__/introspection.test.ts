// For operators and dashboards: inspect(), listLocks(), client names, diagnostics_channel events.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { InvalidArgumentError, LockLostError, RedisCommandError, WrongKindError } from '../src';
import { startFixture } from './helpers/child';
import { usePrivateRedis } from './helpers/privateRedis';
import { commandCounts } from './helpers/testRedis';
import { sleep, until } from './helpers/time';

const redis = usePrivateRedis();

test('inspect() shows holders with their client names, the TTL and the waiting clients', async () => {
  expect.assertions(5); // three of them in the callback: it must run
  // Redis takes printable ASCII but the space in a connection name: the rest becomes "_", or Redis refused the name and inspect() showed none.
  const holder = redis.client({ name: 'billing-worker 7 café' });
  const waiting = redis.client({ name: 'api' });
  const lock = holder.getLock('orders:1');
  const waiterLock = waiting.getLock('orders:1');
  let parked: Promise<boolean> | undefined;
  await lock.withLock(async () => {
    await holder.getLock('orders:1').lock(); // a second hold of the same owner
    parked = waiterLock.tryLock({ waitTime: 10_000, leaseTime: 1000 });
    // Parked comes before subscribed (the subscriber connects first): wait for both.
    await until('the waiter parked and subscribed', async () => waiting.stats.waiters === 1 && (await waiting.inspect('orders:1')).waitingClients === 1);
    const info = await waiting.inspect('orders:1');
    expect(info).toMatchObject({ name: 'orders:1', key: 'orders:1', locked: true, waitingClients: 1 });
    expect(info.ttl).toBeGreaterThan(25_000);
    expect(info.holders).toEqual([{ clientId: holder.id, ownerId: expect.any(String), holdCount: 2, clientName: 'billing-worker_7_caf_' }]);
    await holder.getLock('orders:1').unlock();
  });
  expect(await parked).toBe(true); // woken by the release
  await waiterLock.unlock();
  const free = await holder.getLock('orders:none').inspect();
  expect(free).toEqual({ name: 'orders:none', key: 'orders:none', locked: false, holders: [], ttl: -2, waitingClients: 0 });
});

test('a holder whose process is gone shows no client name', async () => {
  await redis.admin.hset('orphan', 'AAAAAAAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBB', 1);
  const info = await redis.client().inspect('orphan');
  expect(info.holders).toEqual([{ clientId: 'AAAAAAAAAAAAAAAAAAAAA', ownerId: 'BBBBBBBBBBBBBBBBBBBBB', holdCount: 1, clientName: undefined }]);
  await redis.admin.del('orphan');
});

test('client.inspect(name) answers for what listLocks() finds: a read-write lock with its mode, a fair lock with its queue', async () => {
  const holder = redis.client({ name: 'writer' });
  const other = redis.client({ name: 'queued' });
  await holder.getReadWriteLock('ledger').writeLock().lock();
  const rw = await other.inspect('ledger');
  expect(rw).toMatchObject({ name: 'ledger', locked: true, mode: 'write', holders: [{ clientId: holder.id, holdCount: 1, mode: 'write', clientName: 'writer' }] });
  const fairHold = holder.getFairLock('turns');
  await fairHold.lock();
  const waiting = other.getFairLock('turns').tryLock({ waitTime: 20_000 });
  await until('the waiter is queued', async () => (await redis.admin.zcard('rlock__queue:{turns}')) === 1);
  const fair = await holder.inspect('turns');
  expect(fair).toMatchObject({ locked: true, waitingClients: 1, queue: [{ clientId: other.id, clientName: 'queued' }] });
  await fairHold.unlock();
  await expect(waiting).resolves.toBe(true);
  // A fair lock nobody waits for is a plain lock hash, answered as one.
  expect(await holder.inspect('turns')).toMatchObject({ locked: true, waitingClients: 0, holders: [{ clientId: other.id }] });
  expect(await holder.inspect('ledger')).toMatchObject({ locked: true, mode: 'write' });
});

test('client.inspect(name) of a semaphore, permit-expirable semaphore or latch rejects with WrongKindError naming the kind and the call to use', async () => {
  const client = redis.client({ keyPrefix: 'k:' });
  await client.getSemaphore('pool').trySetPermits(3);
  await client.getPermitExpirableSemaphore('slots').trySetPermits(2);
  await client.getCountDownLatch('ready').trySetCount(1);
  const cases = [
    { name: 'pool', kind: 'semaphore', use: 'getSemaphore("pool").inspect()', what: 'a semaphore' },
    { name: 'slots', kind: 'permits', use: 'getPermitExpirableSemaphore("slots").inspect()', what: 'a permit-expirable semaphore' },
    { name: 'ready', kind: 'latch', use: 'getCountDownLatch("ready").inspect()', what: 'a count-down latch' },
  ];
  for (const { name, kind, use, what } of cases) {
    const error = await client.inspect(name).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect({ name, error }).toEqual({ name, error: expect.any(WrongKindError) });
    // Still what the same call rejected with before (README): a RedisCommandError, code WRONGTYPE.
    expect(error).toBeInstanceOf(RedisCommandError);
    expect(error).toMatchObject({ lockName: name, kind, use, code: 'WRONGTYPE', message: `inspect: "${name}" is ${what}, not a lock: call ${use} instead` });
  }
  // The call it names answers.
  await expect(client.getSemaphore('pool').inspect()).resolves.toMatchObject({ availablePermits: 3 });
  // An opened latch keeps only its marker: still a latch (it answered as a free lock).
  await client.getCountDownLatch('ready').countDown();
  await expect(client.inspect('ready')).rejects.toMatchObject({ kind: 'latch' });
  // A lock, and a name with no keys, are answered as before.
  await client.getLock('held').lock();
  await expect(client.inspect('held')).resolves.toMatchObject({ locked: true });
  await expect(client.inspect('nothing')).resolves.toMatchObject({ locked: false, ttl: -2 });
});

test('listLocks() walks SCAN under the prefix and keeps only hashes with the lock layout', async () => {
  const client = redis.client({ keyPrefix: 'svc:' });
  const names = ['a:1', 'a:2', 'b:1'];
  await Promise.all(names.map((name) => client.getLock(name).lock({ leaseTime: 30_000 })));
  await redis.admin.hset('svc:not-a-lock', 'field', 'value'); // a hash of another layout
  await redis.admin.set('svc:string', 'x');
  await redis.admin.hset('other:a:3', 'AAAAAAAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBBBBBBB', 1); // another prefix
  const keysBefore = (await commandCounts(redis.admin)).keys ?? 0;
  const found: string[] = [];
  for await (const name of client.listLocks({ count: 1 })) found.push(name);
  expect(found.sort()).toEqual(names);
  expect((await commandCounts(redis.admin)).scan).toBeGreaterThan(0);
  const matched: string[] = [];
  for await (const name of client.listLocks({ match: 'a:*' })) matched.push(name);
  expect(matched.sort()).toEqual(['a:1', 'a:2']);
  expect((await commandCounts(redis.admin)).keys ?? 0).toBe(keysBefore); // SCAN, never KEYS
  expect(() => client.listLocks({ count: 0 })).toThrow(InvalidArgumentError);
  expect(() => client.listLocks({ match: '' })).toThrow(InvalidArgumentError);
  await redis.admin.del('svc:not-a-lock', 'svc:string', 'other:a:3', ...names.map((n) => `svc:${n}`));
});

test('diagnostics_channel: acquired, released, wait start/end, force-unlocked and lost are published', async () => {
  const seen: [string, Record<string, unknown>][] = [];
  const channels = ['rlock:acquired', 'rlock:released', 'rlock:wait:start', 'rlock:wait:end', 'rlock:lost', 'rlock:force-unlocked'];
  const listeners = channels.map((name) => {
    const listener = (message: unknown): void => void seen.push([name, message as Record<string, unknown>]);
    subscribe(name, listener);
    return [name, listener] as const;
  });
  try {
    const a = redis.client({ watchdogTimeout: 300 });
    const b = redis.client();
    const lock = a.getLock('diag');
    await lock.lock();
    const waiting = b.getLock('diag').tryLock({ waitTime: 5000, leaseTime: 1000 });
    await until('the waiter parked', () => b.stats.waiters === 1);
    await lock.unlock();
    await waiting;
    const lostEvent = once(a, 'lockLost');
    await a.getLock('diag2').lock();
    await b.getLock('diag2').forceUnlock();
    await lostEvent;
    const kinds = seen.map(([name]) => name);
    for (const name of channels) expect(kinds).toContain(name);
    const end = seen.find(([name]) => name === 'rlock:wait:end')![1];
    expect(end).toMatchObject({ name: 'diag', clientId: b.id, acquired: true });
    expect(end.durationMs).toEqual(expect.any(Number));
    expect(seen.find(([name]) => name === 'rlock:lost')![1]).toMatchObject({ name: 'diag2', clientId: a.id });
    // The force names the hold it removed: the owner field of a's acquire.
    const taken = seen.filter(([name, m]) => name === 'rlock:acquired' && m.name === 'diag2')[0]![1];
    expect(seen.find(([name]) => name === 'rlock:force-unlocked')![1]).toMatchObject({
      name: 'diag2',
      removed: true,
      holders: [`${a.id}:${String(taken.ownerId)}`],
    });
  } finally {
    for (const [name, listener] of listeners) unsubscribe(name, listener);
  }
});

test('diagnostics_channel: every acquired is matched by one released or one lost (the holds gauge of observability.md adds up), with the primitive\'s own key', async () => {
  let holds = 0;
  const lost: Record<string, unknown>[] = [];
  const onAcquired = (): void => void holds++;
  const onReleased = (): void => void holds--;
  const onLost = (message: unknown): void => {
    holds -= (message as { holds: number }).holds; // every hold of the owner that went
    lost.push(message as Record<string, unknown>);
  };
  subscribe('rlock:acquired', onAcquired);
  subscribe('rlock:released', onReleased);
  subscribe('rlock:lost', onLost);
  try {
    const client = redis.client({ watchdogTimeout: 3_000 });
    const admin = redis.client();
    // A lock with a leaseTime, forced away: its unlock() finds it gone, no watchdog to tell.
    const leased = client.getLock('gauge:lease');
    await leased.lock({ leaseTime: 60_000 });
    await admin.getLock('gauge:lease').forceUnlock();
    await expect(leased.unlock()).rejects.toThrow('is not held');
    expect(holds).toBe(0);
    // A permit under the watchdog whose lease was taken away: lost once, and its release is not a second release.
    const pes = client.getPermitExpirableSemaphore('gauge:pes');
    await pes.trySetPermits(1);
    const id = await pes.acquire();
    await redis.admin.zrem('rlock__permits:{gauge:pes}', id);
    expect(await pes.tryRelease(id)).toBe(false);
    expect(holds).toBe(0);
    // A reentrant hold (2 holds) found gone by the watchdog: one lost, for both holds (the
    // gauge stayed at +1 for good before).
    await client.getLock('gauge:nested').withLock(async (signal) => {
      await client.getLock('gauge:nested').withLock(async () => {
        await redis.admin.del('gauge:nested');
        await until('the watchdog found it gone', () => signal.aborted, 5_000);
      }).catch(() => undefined);
    }).catch(() => undefined);
    expect(holds).toBe(0);
    // Semaphore.withPermits announces its release as release() does (+1 for good before).
    const semaphore = client.getSemaphore('gauge:sem');
    await semaphore.trySetPermits(2);
    await semaphore.withPermits(async () => undefined);
    expect(holds).toBe(0);
    // A permit with a leaseTime that runs out inside withPermit: lost (nothing before).
    await expect(pes.withPermit(() => sleep(400), { leaseTime: 200 })).rejects.toThrow(LockLostError);
    expect(holds).toBe(0);
    expect(lost.map((m) => [m.name, m.key])).toEqual([
      ['gauge:lease', 'gauge:lease'],
      ['gauge:pes', 'gauge:pes'],
      ['gauge:nested', 'gauge:nested'],
      ['gauge:pes', 'gauge:pes'],
    ]);
  } finally {
    unsubscribe('rlock:acquired', onAcquired);
    unsubscribe('rlock:released', onReleased);
    unsubscribe('rlock:lost', onLost);
  }
});

test('the OpenTelemetry example runs and reports the three instruments', async () => {
  const example = startFixture('../../examples/otel-metrics.ts', []);
  const { code, stderr } = await example.exited(30_000);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  expect(example.lines).toEqual([
    'rlock.wait.duration {"lock":"example:orders","acquired":true} count=3',
    'rlock.lost {"lock":"example:doomed"} 1',
    'rlock.holds {} 0',
  ]);
}, 60_000); // the example may take up to 30 s: the test must outlast it

test("a lockLost listener that throws: the watchdog goes on (both losses told), and the error surfaces apart as an uncaught exception, not as the watchdog's unhandled rejection", async () => {
  const child = startFixture('throwingListener.ts', [redis.server.url]);
  await child.line((line) => line === 'locked');
  await redis.admin.del('listener-a', 'listener-b');
  const { code } = await child.exited(20_000);
  expect(code).toBe(0);
  expect(child.lines).toContain('lost listener-a,listener-b');
  expect(child.lines).toContain('uncaught listener bug');
  expect(child.lines.filter((line) => line.startsWith('unhandled'))).toEqual([]);
});

/**
 * Runs `during` with a gauge of acquired − released − lost.holds, which it can read as it goes
 * (`live.holds`, and `live.field`: the owner field of the last acquired); resolves with the gauge
 * at the end.
 */
async function gaugeOf(during: (live: { readonly holds: number; readonly field: string }) => Promise<unknown>): Promise<number> {
  const live = { holds: 0, field: '' };
  const onAcquired = (message: unknown): void => {
    live.holds++;
    const { clientId, ownerId } = message as { clientId: string; ownerId: string };
    live.field = `${clientId}:${ownerId}`;
  };
  const onReleased = (): void => void live.holds--;
  const onLost = (message: unknown): void => void (live.holds -= (message as { holds: number }).holds);
  subscribe('rlock:acquired', onAcquired);
  subscribe('rlock:released', onReleased);
  subscribe('rlock:lost', onLost);
  try {
    await during(live);
    return live.holds;
  } finally {
    unsubscribe('rlock:acquired', onAcquired);
    unsubscribe('rlock:released', onReleased);
    unsubscribe('rlock:lost', onLost);
  }
}

describe('the holds gauge when holds are taken away under a reentrant scope', () => {

  const kinds = {
    lock: (client: ReturnType<typeof redis.client>, name: string) => client.getLock(name),
    write: (client: ReturnType<typeof redis.client>, name: string) => client.getReadWriteLock(name).writeLock(),
    fair: (client: ReturnType<typeof redis.client>, name: string) => client.getFairLock(name),
    fenced: (client: ReturnType<typeof redis.client>, name: string) => client.getFencedLock(name),
  };

  test.each(Object.keys(kinds).flatMap((kind) => [[kind, 'the watchdog'], [kind, 'a leaseTime']]))('%s under %s: deleted, then entered again afresh: the gauge ends at 0 (-1 or +1 for good before)', async (kind, keeper) => {
    const client = redis.client();
    const name = `gauge-nested-${kind}-${keeper === 'a leaseTime' ? 'lease' : 'dog'}`;
    const handle = (): ReturnType<(typeof kinds)['lock']> => kinds[kind as keyof typeof kinds](client, name) as ReturnType<(typeof kinds)['lock']>;
    const options = keeper === 'a leaseTime' ? { leaseTime: 60_000 } : {};
    const gauge = await gaugeOf(() =>
      handle()
        .withLock(async () => {
          await redis.admin.del(name);
          await handle().withLock(async () => undefined, options);
        }, options)
        .catch(() => undefined),
    );
    expect(gauge).toBe(0);
  });

  test('an inner release out while the watchdog finds the holds gone (Redis paused past the lease): counted once (-2 before)', async () => {
    const client = redis.client({ watchdogTimeout: 900 });
    const name = 'gauge-inflight';
    const gauge = await gaugeOf(() =>
      client
        .getLock(name)
        .withLock(async () => {
          await client.getLock(name).withLock(async () => {
            await redis.admin.pipeline().del(name).call('CLIENT', 'PAUSE', '1500', 'ALL').exec();
          });
        })
        .catch(() => undefined),
    );
    expect(gauge).toBe(0);
  }, 15_000);
});

test('the holds gauge when Redis counted an acquire twice (ioredis resent it after a reconnect): the give-back of the extra hold is no second released (-1 for good before)', async () => {
  expect.assertions(3); // one of them in the withLock callback: it must run
  const client = redis.client();
  const gauge = await gaugeOf(async (live) => {
    // lock() and unlock(): the handle's own owner, whose unlock gives back every hold Redis counts.
    const lock = client.getLock('gauge-twice');
    await lock.lock();
    await redis.admin.hincrby('gauge-twice', live.field, 1); // what a resent acquire adds
    await lock.unlock();
    // withLock: its end gives back every hold of its owner the same way.
    await client.getLock('gauge-twice-scope').withLock(async () => {
      await redis.admin.hincrby('gauge-twice-scope', live.field, 1);
      expect(live.holds).toBe(1);
    });
    expect(await redis.admin.exists('gauge-twice', 'gauge-twice-scope')).toBe(0); // both freed
  });
  expect(gauge).toBe(0);
});

