// The fenced lock against a private redis-server: every first acquire answers a token above all
// tokens minted before for the name (across holders, processes, and a restart that lost the data);
// a reentrant hold keeps its token.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { runFixture } from './helpers/child';
import { usePrivateRedis } from './helpers/privateRedis';
import { withReplica } from './helpers/testRedis';
import { sleep, until } from './helpers/time';
import { LockLostError, LockUsageError, RedisCommandError } from '../src';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `fenced:${process.pid}:${++counter}`;

/** Redis's clock in µs, as the acquire script reads it. */
async function redisMicros(): Promise<bigint> {
  const [seconds, micros] = await redis.admin.time();
  return BigInt(seconds!) * 1_000_000n + BigInt(micros!);
}

describe('tokens', () => {
  test('strictly increase across holders and releases; tryLock answers null while another holds it; getToken is the holder\'s', async () => {
    const name = uniqueName();
    const a = redis.client().getFencedLock(name);
    const b = redis.client().getFencedLock(name);
    expect(await a.getToken()).toBeNull();
    const tokens: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const first = await a.lock();
      expect(typeof first).toBe('bigint');
      expect(await a.getToken()).toBe(first);
      expect(await b.tryLock()).toBeNull();
      await a.unlock();
      const second = await b.tryLock({ waitTime: 1_000 });
      expect(await b.getToken()).toBe(second);
      await b.unlock();
      tokens.push(first, second!);
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
    expect(await a.getToken()).toBeNull();
  });

  test('a plain handle of the same name releasing in the same client does not hand the lock to a fenced waiter: the waiter acquires and gets a token', async () => {
    const name = uniqueName();
    const client = redis.client({ watchdogTimeout: 1_000 });
    const plain = client.getLock(name);
    await plain.lock();
    const fenced = client.getFencedLock(name);
    const waiting = fenced.lock();
    // In line once its attempt after subscribing was refused: it parks next.
    await until('the fenced waiter is in line', async () => (await redis.admin.zscore(`rlock__clients:{${name}}`, client.id)) !== null);
    const before = await redisMicros();
    await plain.unlock();
    // Handed over in the release script, it got the hash but no token (lock() then rejected
    // while the watchdog kept the hold alive).
    const token = await waiting;
    expect(token).toBeGreaterThanOrEqual(before);
    expect(await fenced.getToken()).toBe(token);
    await fenced.unlock();
    expect(await redis.admin.exists(name)).toBe(0);
    expect(client.stats.renewals).toBe(0);
  });

  test('are never below Redis TIME in µs, and count on from the last token when that is ahead of the clock', async () => {
    const name = uniqueName();
    const lock = redis.client().getFencedLock(name);
    const before = await redisMicros();
    const token = await lock.lock();
    expect(token).toBeGreaterThanOrEqual(before);
    expect(token).toBeLessThanOrEqual(await redisMicros());
    await lock.unlock();
    // A counter far ahead of the clock (tokens minted faster than 1 per µs, or on a server whose
    // clock ran ahead): the next token is the counter plus one, not the clock.
    const ahead = (await redisMicros()) + 10n ** 12n;
    await redis.admin.set(`rlock__fence:{${name}}`, String(ahead));
    expect(await lock.lock()).toBe(ahead + 1n);
    await lock.unlock();
  });

  test('keep increasing after FLUSHALL and after Redis restarts without its data', async () => {
    const name = uniqueName();
    const client = redis.client();
    const lock = client.getFencedLock(name);
    const first = await lock.lock({ leaseTime: 60_000 });
    await redis.admin.flushall();
    // A handle is not reentrant: a second one asks (its owner's hold was lost with the data).
    const second = await client.getFencedLock(name).tryLock({ leaseTime: 60_000 });
    expect(second).not.toBeNull();
    expect(second!).toBeGreaterThan(first);
    await redis.server.kill();
    await redis.server.restart();
    expect(await redis.admin.exists(`rlock__fence:{${name}}`, name)).toBe(0); // the data is gone
    const other = redis.client().getFencedLock(name);
    const third = await other.tryLock({ waitTime: 5_000, leaseTime: 60_000 });
    expect(third).not.toBeNull();
    expect(third!).toBeGreaterThan(second!);
    await other.unlock();
  });

  test('keep increasing after forceUnlock and after a lease ran out', async () => {
    const name = uniqueName();
    const lock = redis.client().getFencedLock(name);
    const first = await lock.lock({ leaseTime: 60_000 });
    expect(await lock.forceUnlock()).toBe(true);
    const other = redis.client().getFencedLock(name);
    const second = await other.lock({ leaseTime: 50 });
    expect(second).toBeGreaterThan(first);
    const next = redis.client().getFencedLock(name);
    const third = await next.tryLock({ waitTime: 5_000 }); // free once the 50 ms lease ran out
    expect(third).not.toBeNull();
    expect(third!).toBeGreaterThan(second);
    await next.unlock();
  });

  test('the token key lives as long as the lock: the watchdog extends it with the lock, it expires after, and the next token is still larger (Redisson #6510)', async () => {
    const name = uniqueName();
    const tokenKey = `rlock__fence:{${name}}`;
    // 1 s leases: a loaded CI machine can stall a renewal past most of a 300 ms one.
    const lock = redis.client({ watchdogTimeout: 1_000 }).getFencedLock(name);
    const first = await lock.lock();
    // Held past three of its leases: the key was renewed with the lock, not left to run out.
    await sleep(3_300);
    expect(await redis.admin.pttl(tokenKey)).toBeGreaterThan(0);
    expect(await redis.admin.pttl(tokenKey)).toBeLessThanOrEqual(1_000);
    expect(await lock.getToken()).toBe(first);
    await lock.unlock();
    // Gone within a lease of the release: keys no longer pile up, one per lock name ever used
    // (before, the key never expired and this wait timed out).
    await until('the token key expired', async () => (await redis.admin.exists(tokenKey)) === 0, 4_000);
    const other = redis.client().getFencedLock(name);
    const second = await other.tryLock({ leaseTime: 60_000 });
    expect(second).not.toBeNull();
    expect(second!).toBeGreaterThan(first);
    expect(await redis.admin.pttl(tokenKey)).toBeGreaterThan(59_000);
    await other.unlock();
  });

  test('a fenced storage sees no stale token: 3 processes × 2 tasks, each token checked against the last one written', async () => {
    const name = uniqueName();
    const results = await Promise.all([0, 1, 2].map(() => runFixture('fencedWorker.ts', [redis.server.url, name, '10'])));
    for (const result of results) expect(result).toMatchObject({ code: 0 });
    expect(BigInt((await redis.admin.get(`${name}:last-token`))!)).toBeGreaterThan(0n);
  }, 90_000); // runFixture waits up to 60 s: the test must outlast it
});

test('with syncReplicas: the token comes through the WAIT pipeline; an acquire the replica cannot acknowledge is refused and given back', async () => {
  await withReplica(redis, async (replica) => {
    const replicaConnection = replica.connect();
    try {
      const client = redis.client({ syncReplicas: { replicas: 1, timeout: 300 } });
      const name = uniqueName();
      const first = client.getFencedLock(name);
      const token = await first.lock();
      expect(await replicaConnection.get(`rlock__fence:{${name}}`)).toMatch(new RegExp(`^${token}:`)); // <token>:<owner field>
      await first.unlock();
      replica.pause();
      expect(await client.getFencedLock(name).tryLock()).toBeNull();
      expect(await redis.admin.exists(name)).toBe(0);
      replica.resume();
      const next = await client.getFencedLock(name).tryLock({ waitTime: 5_000 });
      expect(next).not.toBeNull();
      expect(next!).toBeGreaterThan(token);
    } finally {
      replicaConnection.disconnect();
    }
  });
}, 20_000);

test.each(['plain', 'fenced'] as const)('with syncReplicas: a re-entry the replica cannot acknowledge (%s) is refused and given back, and the scope’s own hold is not reported lost', async (kind) => {
  const lost: unknown[] = [];
  const onLost = (message: unknown): void => void lost.push(message);
  subscribe('rlock:lost', onLost);
  try {
    await withReplica(redis, async (replica) => {
      const client = redis.client({ syncReplicas: { replicas: 1, timeout: 200 } });
      const name = uniqueName();
      const handle = (): { tryLock(options?: { waitTime?: number }): Promise<unknown>; getHoldCount(): Promise<number> } => (kind === 'plain' ? client.getLock(name) : client.getFencedLock(name));
      const scope = async (signal: AbortSignal): Promise<{ reentry: unknown; aborted: boolean; holds: number }> => {
        replica.pause();
        const reentry = await handle().tryLock({ waitTime: 100 });
        replica.resume();
        return { reentry, aborted: signal.aborted, holds: await handle().getHoldCount() };
      };
      const seen = kind === 'plain' ? await client.getLock(name).withLock(scope) : await client.getFencedLock(name).withLock((signal) => scope(signal));
      // Refused (false, or null for a fenced lock), the scope's one hold intact and unreported.
      expect(seen).toEqual({ reentry: kind === 'plain' ? false : null, aborted: false, holds: 1 });
      expect(lost).toEqual([]);
      expect(await redis.admin.exists(name)).toBe(0);
    });
  } finally {
    unsubscribe('rlock:lost', onLost);
  }
}, 20_000);

test('with syncReplicas and WAIT refused (an ACL without +wait): lock() rejects with RedisCommandError NOPERM, what it took is given back (it spun for good)', async () => {
  const user = `nowait${counter}`;
  await redis.admin.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-wait');
  try {
    const client = redis.client({ redis: { port: redis.server.port, username: user, password: 'pw' }, syncReplicas: { replicas: 1, timeout: 300 } });
    const name = uniqueName();
    await client.getPermitExpirableSemaphore(`${name}:pes`).trySetPermits(1);
    for (const take of [() => client.getLock(name).lock(), () => client.getFencedLock(name).lock(), () => client.getPermitExpirableSemaphore(`${name}:pes`).acquire()]) {
      const error = await take().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisCommandError);
      expect((error as RedisCommandError).code).toBe('NOPERM');
      expect(await redis.admin.exists(name)).toBe(0);
    }
    expect(await redis.admin.zcard(`rlock__permits:{${name}:pes}`)).toBe(0);
  } finally {
    await redis.admin.call('ACL', 'DELUSER', user);
  }
}, 20_000);

test('with syncReplicas after SCRIPT FLUSH (as on a freshly promoted master): an acquire the replica cannot acknowledge is still refused, for every synced primitive', async () => {
  await withReplica(redis, async (replica) => {
    const client = redis.client({ syncReplicas: { replicas: 1, timeout: 300 } });
    const name = uniqueName();
    const kinds = [
      { take: (waitTime = 0) => client.getLock(`${name}:plain`).tryLock({ waitTime }), keys: [`${name}:plain`] },
      { take: async (waitTime = 0) => (await client.getFencedLock(`${name}:fenced`).tryLock({ waitTime })) !== null, keys: [`${name}:fenced`] },
      { take: async (waitTime = 0) => (await client.getPermitExpirableSemaphore(`${name}:pes`).tryAcquire({ waitTime })) !== null, keys: [`rlock__permits:{${name}:pes}`] },
    ];
    await client.getPermitExpirableSemaphore(`${name}:pes`).trySetPermits(1);
    for (const { take } of kinds) expect(await take(5_000)).toBe(true); // the scripts are loaded and cached now
    await redis.admin.flushall();
    await client.getPermitExpirableSemaphore(`${name}:pes`).trySetPermits(1);
    // The master knows the replica has every write so far: a WAIT for them answers 1 at once.
    await until('the replica acknowledged everything', async () => {
      const info = await redis.admin.info('replication');
      return /slave0:.*offset=(\d+)/.exec(info)?.[1] === /master_repl_offset:(\d+)/.exec(info)?.[1];
    });
    replica.pause();
    await redis.admin.script('FLUSH');
    // Before, ioredis ran the script again as EVAL after the pipeline's WAIT had vouched for nothing.
    for (const { take, keys } of kinds) {
      expect(await take()).toBe(false);
      if (keys[0]!.startsWith('rlock__permits')) expect(await redis.admin.zcard(keys[0]!)).toBe(0);
      else expect(await redis.admin.exists(...keys)).toBe(0);
    }
  });
}, 20_000);

test('a fenced re-entry inside a plain handle\'s scope mints a token of its own (never that of the hold a force-unlock took away), renewed with the lock', async () => {
  const name = uniqueName();
  const data = `${name}:data`;
  const x = redis.client().getFencedLock(name);
  const stale = await x.lock({ leaseTime: 60_000 });
  const other = redis.client({ watchdogTimeout: 1_000 });
  await other.getLock(name).forceUnlock(); // an admin removes X's hold; X does not know yet
  await other.getLock(name).withLock(async () => {
    // Nobody holds a token now: the plain holder's lock has none.
    expect(await other.getFencedLock(name).getToken()).toBeNull();
    await other.getFencedLock(name).withLock(async (_signal, token) => {
      expect(token).toBeGreaterThan(stale);
      expect(await other.getFencedLock(name).getToken()).toBe(token);
      expect(await other.getFencedLock(name).fencedSet(data, 'Y', token)).toBe(true);
      // The plain hold's watchdog renews the token key with the lock from the fenced re-entry on.
      await sleep(2_500);
      expect(await other.getFencedLock(name).getToken()).toBe(token);
    });
  });
  // X's write with the token it was given before the force is refused.
  expect(await x.fencedSet(data, 'X', stale)).toBe(false);
  expect(await redis.admin.get(data)).toBe('Y');
});

describe('a plain re-entry into a fenced scope’s hold keeps the token key as long as the lock', () => {
  // The fenced scope has a leaseTime (no watchdog entry of its own); the plain handle re-enters
  // as the scope's owner. Before, the plain hold renewed (or lengthened) the lock hash alone: the
  // token key ran out at the scope's first lease while the lock lived on, getToken() answered
  // null, and a later fenced re-entry minted a new token, so the scope's own writes were refused.
  test.each([
    ['by the watchdog (a plain lock() without leaseTime)', undefined],
    ['by a longer leaseTime of the plain lock()', 10_000],
  ])('%s', async (_kind, plainLease) => {
    const client = redis.client({ watchdogTimeout: 1_000 });
    const name = uniqueName();
    const data = `${name}:data`;
    const fenced = client.getFencedLock(name);
    await fenced.withLock(
      async (signal, token) => {
        const plain = client.getLock(name);
        await plain.lock(plainLease === undefined ? undefined : { leaseTime: plainLease });
        // Past the scope's own lease (1 s), and the watchdog's, twice over.
        await sleep(2_500);
        expect(await client.getLock(name).isHeldByCurrentOwner()).toBe(true);
        expect(await fenced.getToken()).toBe(token);
        // A fenced re-entry keeps the scope's token instead of minting a new one.
        expect(await client.getFencedLock(name).lock()).toBe(token);
        await client.getFencedLock(name).unlock();
        expect(await fenced.fencedSet(data, 'mine', token)).toBe(true);
        await plain.unlock();
        // Kept by the watchdog from the plain lock() on, the scope is not told its lease ran out.
        // (With the plain lock()'s own leaseTime, the scope still ends its hold at its own.)
        if (plainLease === undefined) expect(signal.aborted).toBe(false);
      },
      { leaseTime: 1_000 },
    ).catch((error: unknown) => {
      if (plainLease === undefined || !(error instanceof LockLostError)) throw error;
    });
    expect(await redis.admin.get(data)).toBe('mine');
    expect(await fenced.isLocked()).toBe(false);
  }, 15_000);
});

describe('holds', () => {
  test('a reentrant hold keeps its token: nested withLock, and lock() of another handle inside withLock', async () => {
    const client = redis.client();
    const name = uniqueName();
    const lock = client.getFencedLock(name);
    let flag = false;
    await lock.withLock(async (_signal, token) => {
      await lock.withLock(async (_inner, again) => {
        expect(again).toBe(token);
        expect(await lock.getHoldCount()).toBe(2);
      });
      const twin = client.getFencedLock(name);
      expect(await twin.lock()).toBe(token);
      expect(await twin.getHoldCount()).toBe(2);
      await twin.unlock();
      expect(await lock.getToken()).toBe(token);
      flag = true;
    });
    expect(flag).toBe(true);
    expect(await lock.isLocked()).toBe(false);
  });

  test('leaseTime bounds the lock (PTTL within it, freed by expiry); without it the watchdog keeps it', async () => {
    const client = redis.client({ watchdogTimeout: 1_000 });
    const lock = client.getFencedLock(uniqueName());
    await lock.lock({ leaseTime: 2_000 });
    const ttl = await lock.remainTimeToLive();
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
    await lock.unlock();
    const token = await lock.lock();
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // > 2 watchdog leases
    expect(await lock.getToken()).toBe(token);
    expect(client.stats.renewals).toBe(1);
    await lock.unlock();
    expect(client.stats.renewals).toBe(0);
  });
});

describe('fencedSet', () => {
  test("refuses a data key that holds a hash (another lock's): a SET replaced it, and that lock was gone for good", async () => {
    const other = redis.client().getLock(`fenced-victim:${process.pid}`);
    await other.lock();
    const fenced = redis.client().getFencedLock(`fenced-writer:${process.pid}`);
    const token = await fenced.lock();
    await expect(fenced.fencedSet(other.key, 'x', token)).rejects.toThrow(LockUsageError);
    expect(await other.isHeldByCurrentOwner()).toBe(true);
    await other.unlock();
    await fenced.unlock();
  });

  test('refuses a data key that is a semaphore’s, a permit-expirable semaphore’s or a latch’s count (their kind marker): nothing written (a helper audit: a semaphore got the value as its free permits)', async () => {
    const client = redis.client();
    const name = `fenced-counters:${process.pid}`;
    const sem = client.getSemaphore(`${name}:sem`);
    await sem.trySetPermits(1);
    await sem.acquire(); // none free
    const pes = client.getPermitExpirableSemaphore(`${name}:pes`);
    await pes.trySetPermits(2);
    const latch = client.getCountDownLatch(`${name}:latch`);
    await latch.trySetCount(3);
    const fenced = client.getFencedLock(`${name}:writer`);
    const token = await fenced.lock();
    for (const counter of [sem, pes, latch]) await expect(fenced.fencedSet(counter.key, '1000', token)).rejects.toThrow(/is the count of a semaphore or a latch/);
    expect(await sem.availablePermits()).toBe(0);
    expect(await pes.availablePermits()).toBe(2);
    expect(await latch.getCount()).toBe(3);
    await latch.countDown();
    await latch.countDown();
    await latch.countDown(); // open: its marker stays, and so does the refusal
    await expect(fenced.fencedSet(latch.key, 'x', token)).rejects.toThrow(LockUsageError);
    expect(await latch.getState()).toBe('open');
    expect(await fenced.fencedSet(`${name}:data`, 'ok', token)).toBe(true); // data keys as before
    await fenced.unlock();
  });

  test('a holder that paused past its lease cannot overwrite its successor: its older token is refused', async () => {
    const name = uniqueName();
    const dataKey = `${name}:data`;
    const a = redis.client().getFencedLock(name);
    const b = redis.client().getFencedLock(name);
    const tokenA = await a.lock({ leaseTime: 100 });
    expect(await a.fencedSet(dataKey, 'A1', tokenA)).toBe(true);
    // A "pauses" (GC, page fault, a stopped VM) past its lease; B takes the lock and writes.
    const tokenB = (await b.tryLock({ waitTime: 5_000 }))!;
    expect(tokenB).toBeGreaterThan(tokenA);
    expect(await b.fencedSet(dataKey, 'B1', tokenB)).toBe(true);
    expect(await b.fencedSet(dataKey, 'B2', tokenB)).toBe(true); // the same holder writes again
    // A resumes, still believing it holds the lock, and writes: refused.
    expect(await a.fencedSet(dataKey, 'A2', tokenA)).toBe(false);
    expect(await redis.admin.get(dataKey)).toBe('B2');
    await b.unlock();
  });

  test('tokens of different lengths compare as numbers', async () => {
    const lock = redis.client().getFencedLock(uniqueName());
    const dataKey = `${uniqueName()}:data`;
    expect(await lock.fencedSet(dataKey, 'new', 10n ** 16n)).toBe(true);
    expect(await lock.fencedSet(dataKey, 'old', 9n * 10n ** 15n)).toBe(false);
    expect(await lock.fencedSet(dataKey, 'newer', 10n ** 16n + 1n)).toBe(true);
    expect(await redis.admin.get(dataKey)).toBe('newer');
  });
});
