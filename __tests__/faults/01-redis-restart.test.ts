// Fault 1: Redis is killed -9 and started again, empty, while a holder holds and waiters wait.
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { type LockClient, LockLostError, RedisCommandError } from '../../src';
import { TcpProxy } from '../helpers/tcpProxy';
import { type ContenderName, holdAllWithWaiters } from '../helpers/contenders';
import { usePrivateRedis, subscribers } from '../helpers/privateRedis';
import { aborted, sleep, until } from '../helpers/time';

const redis = usePrivateRedis();

test('no call hangs, the holder is told it lost the lock, and the waiters acquire once Redis is back', async () => {
  const holder = redis.client({ watchdogTimeout: 900 });
  const waiting = redis.client({ watchdogTimeout: 900 });
  const name = 'restart';
  const lostEvent = once(holder, 'lockLost');
  let holderSignal: AbortSignal | undefined;
  const held = holder.getLock(name).withLock(async (signal) => {
    holderSignal = signal;
    await aborted(signal);
  });
  // It may reject while Redis is still starting: catch it now, judge it below.
  const heldOutcome = held.then(() => 'resolved', (error: unknown) => error);
  await until('the holder holds', () => holderSignal);

  const acquiredAt: number[] = [];
  const waiters = Promise.all(
    [1, 2, 3].map(() =>
      // Leased for 30 s: a waiter behind another waiter could only be woken by its release
      // message (or a 30 s pttl), so the bound below tells the wake-ups from lease expiries.
      waiting.getLock(name).withLock(
        async () => {
          acquiredAt.push(performance.now());
          await sleep(5);
        },
        { leaseTime: 30_000 },
      ),
    ),
  );
  waiters.catch(() => undefined); // judged below
  await until('the waiters subscribed', async () => (await subscribers(redis.admin, name)) === 1);

  await redis.server.kill();
  await sleep(300); // down for a while: the time is the subject
  await redis.server.restart();
  const backAt = performance.now();

  expect(await heldOutcome).toBeInstanceOf(LockLostError);
  expect(holderSignal!.reason).toBeInstanceOf(LockLostError);
  const [event] = await lostEvent;
  expect(event).toMatchObject({ name, clientId: holder.id });
  await waiters;
  expect(acquiredAt).toHaveLength(3);
  // Woken by the reconnect and then by each other's releases, not by a lease running out.
  expect(Math.max(...acquiredAt) - backAt).toBeLessThan(3000);
  expect(await redis.admin.exists(name)).toBe(0);
});

test('a lock() under way while Redis is down completes once it is back', async () => {
  // Connected first: a client whose very first connection attempt fails reports it at once
  // (RedisUnreachableError, see unreachable.test.ts); one that was connected waits the outage out.
  const client = redis.client({ offlineTimeout: 10_000 });
  await client.getLock('restart:down').isLocked();
  await redis.server.kill();
  const taking = client.getLock('restart:down').tryLock({ waitTime: 10_000, leaseTime: 5_000 });
  await sleep(200); // Redis stays down while the call is under way: the time is the subject
  await redis.server.restart();
  await expect(taking).resolves.toBe(true);
  expect(await redis.admin.hlen('restart:down')).toBe(1);
});

describe('every primitive, held with a waiter parked, through a restart that loses the data', () => {
  // What a restart without persistence leaves of each: a lock is free again, so its holder is
  // told and its waiter takes it; a semaphore's permits are gone with it (unset), so its waiter
  // waits until someone sets permits again, and the holder of an expirable permit is told (a plain
  // semaphore's permits have no owner); a latch's count is gone, so its await returns, as for a
  // latch never set.
  const reinit: Partial<Record<ContenderName, (client: LockClient, name: string) => Promise<unknown>>> = {
    semaphore: (client, name) => client.getSemaphore(name).trySetPermits(1),
    permitSemaphore: (client, name) => client.getPermitExpirableSemaphore(name).trySetPermits(1),
  };

  test('each owner is told, and each waiter gets it within 3 s of Redis being back (a semaphore once its permits are set again)', async () => {
    const holder = redis.client({ watchdogTimeout: 900 });
    const waiting = redis.client({ watchdogTimeout: 900 });
    const told: string[] = [];
    holder.on('lockLost', (event) => told.push(event.name));
    const held = await holdAllWithWaiters(holder, waiting, 'restart-family');

    await redis.server.kill();
    await sleep(300); // down for a while: the time is the subject
    await redis.server.restart();
    const backAt = performance.now();

    const locks = held.filter(({ kind }) => !reinit[kind]);
    await Promise.all(locks.map(({ waiter }) => waiter));
    for (const { kind, gotAt } of locks) {
      // Woken by the reconnect, not by a lease running out (30 s for a lock's waiter; none for a latch's).
      expect(gotAt() - backAt).toBeLessThan(3_000);
      console.log(`restart, ${kind}: the waiter had it ${Math.round(gotAt() - backAt)} ms after Redis was back`);
    }
    // A plain semaphore's permits have no owner (Redisson's RSemaphore): nobody to tell.
    const holders = held.filter(({ kind }) => kind !== 'latch' && kind !== 'semaphore').map(({ name }) => name);
    await until('every holder was told', () => holders.every((name) => told.includes(name)), 5_000);

    // A semaphore's waiters wait on: there are no permits (this long, at least, after the locks'
    // waiters were all served), until someone sets them again.
    await sleep(500);
    const semaphores = held.filter(({ kind }) => reinit[kind]);
    expect(semaphores.map(({ gotAt }) => gotAt())).toEqual(semaphores.map(() => 0));
    const setAt = performance.now();
    await Promise.all(semaphores.map(({ kind, name }) => reinit[kind]!(redis.client(), name)));
    await Promise.all(semaphores.map(({ waiter }) => waiter));
    for (const { gotAt } of semaphores) expect(gotAt() - setAt).toBeLessThan(3_000);
  });
});

describe('Redis restarted with its data, loading it for a while', () => {
  // Each key takes 0.1 ms to load: a few seconds of LOADING replies (rlock turns ioredis's ready check off).
  const loading = usePrivateRedis(['--key-load-delay', '100', '--loading-process-events-interval-bytes', '1024', '--enable-debug-command', 'yes']);

  test('a semaphore attempt whose outcome is unknown is undone once Redis has loaded (a second reader’s repro: the undo met LOADING once and stopped, the permit lost for good)', async () => {
    const name = `loading-undo:${process.pid}`;
    await loading.admin.call('DEBUG', 'POPULATE', '30000', 'filler', '300');
    const proxy = await TcpProxy.start(loading.server.port);
    try {
      // No retries: the attempt whose reply the proxy cuts is rejected, its outcome unknown.
      const client = loading.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0 } });
      const sem = client.getSemaphore(name);
      expect(await sem.trySetPermits(1)).toBe(true);
      proxy.cutOnNextReply();
      proxy.stopAccepting();
      const outcome = sem.acquire().then(
        () => 'held',
        (error: unknown) => error,
      );
      await until('Redis ran the attempt', async () => (await loading.admin.get(name)) === '0');
      expect(await outcome).toBeInstanceOf(RedisCommandError);
      await loading.server.shutdownSaving();
      const restarted = loading.server.restart(); // answers once loaded
      // Asked without ioredis's ready check, which would wait for the loading to end.
      const probe = new Redis(loading.server.port, '127.0.0.1', { enableReadyCheck: false, maxRetriesPerRequest: null, retryStrategy: () => 20 });
      probe.on('error', () => undefined);
      await until('Redis is loading', async () => /LOADING/.test(await probe.get(name).then(String, String)), 5_000).finally(() => probe.disconnect());
      await proxy.resumeAccepting(); // the client reconnects, and its undo meets LOADING
      await restarted;
      await until('the permit is back', async () => (await loading.admin.get(name)) === '1', 10_000);
    } finally {
      await proxy.close();
      loading.server.forgetSavedData();
    }
  }, 40_000);
});
