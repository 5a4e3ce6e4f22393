// Fault 8: client.close() while calls are in flight and waiters wait.
import { ClientClosedError, type LockClient } from '../../src';
import { startFixture } from '../helpers/child';
import { usePrivateRedis } from '../helpers/privateRedis';
import { scriptCallCount } from '../helpers/testRedis';
import { sleep, until } from '../helpers/time';

const redis = usePrivateRedis();

async function closeUnderCalls(client: ReturnType<typeof redis.client>, name: string): Promise<number> {
  const held = client.getLock(`${name}:held`);
  await held.lock();
  await redis.admin.hset(name, 'someone-else:1', 1); // a lock held by another client
  await redis.admin.pexpire(name, 60_000);
  const parked = client.getLock(name).lock();
  await until('the waiter parked', () => client.stats.waiters === 1);
  redis.server.pause(); // and from now on nothing Redis would answer arrives
  const inFlight = [
    parked,
    client.getLock(`${name}:new`).tryLock({ waitTime: 60_000 }),
    held.unlock(),
    client.getLock(name).isLocked(),
    client.getLock(name).withLock(() => undefined, { waitTime: 60_000 }),
  ];
  const settled = Promise.allSettled(inFlight);
  await sleep(100);
  const start = performance.now();
  await client.close();
  const results = await settled;
  const elapsed = performance.now() - start;
  redis.server.resume();
  for (const result of results) {
    expect(result.status).toBe('rejected');
    expect((result as PromiseRejectedResult).reason).toBeInstanceOf(ClientClosedError);
  }
  expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
  return elapsed;
}

test('every call under way settles with ClientClosedError, even with Redis frozen', async () => {
  const elapsed = await closeUnderCalls(redis.client({ watchdogTimeout: 3000 }), 'close:owned');
  // close() gives QUIT one second, then cuts the connection.
  expect(elapsed).toBeLessThan(2000);
});

test('the same with a connection the user owns, which stays open', async () => {
  const connection = redis.server.connect();
  try {
    const elapsed = await closeUnderCalls(redis.client({ redis: connection, watchdogTimeout: 3000 }), 'close:borrowed');
    expect(elapsed).toBeLessThan(500);
    expect(connection.status).toBe('ready');
    expect(await connection.ping()).toBe('PONG');
  } finally {
    connection.disconnect();
  }
});

test('a process that closes its client under parked waiters exits by itself', async () => {
  await redis.admin.hset('close:child', 'the-test:1', 1);
  await redis.admin.pexpire('close:child', 60_000);
  const child = startFixture('closeWhileWaiting.ts', [redis.server.url, 'close:child']);
  await child.line((line) => line.startsWith('closed'), 15_000);
  const closedAt = performance.now();
  const { code, stderr } = await child.exited(15_000);
  // Nothing left to wait for: no timer (ioredis's disconnect timer included) holds it open.
  expect(performance.now() - closedAt).toBeLessThan(1000);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  expect(child.lines).toEqual(['closed 3/3']);
});

describe('close() as an acquire is on its way: what Redis grants for the caller it settled is given back before close() resolves', () => {
  // Before, close() settled the call and dropped its reply: Redis ran the acquire (it was
  // sent), and the hold stayed for its lease with nobody renewing or releasing it, a plain
  // semaphore's permit for good. A shutdown under contention lost permits this way.
  interface Kind {
    /** Set up (permits) through the checker client. */
    prepare?(checker: LockClient, name: string): Promise<void>;
    /** One attempt that takes it when free. */
    take(client: LockClient, name: string): Promise<unknown>;
    /** Nothing is held, read through the checker client. */
    free(checker: LockClient, name: string): Promise<boolean>;
  }
  const lockFree = async (checker: LockClient, name: string) => !(await checker.getLock(name).isLocked());
  const kinds: Record<string, Kind> = {
    lock: { take: (client, name) => client.getLock(name).tryLock(), free: lockFree },
    fair: { take: (client, name) => client.getFairLock(name).tryLock(), free: lockFree },
    fenced: { take: (client, name) => client.getFencedLock(name).tryLock(), free: async (checker, name) => !(await checker.getFencedLock(name).isLocked()) },
    read: { take: (client, name) => client.getReadWriteLock(name).readLock().tryLock(), free: async () => true },
    write: { take: (client, name) => client.getReadWriteLock(name).writeLock().tryLock(), free: async () => true },
    semaphore: {
      prepare: async (checker, name) => void (await checker.getSemaphore(name).trySetPermits(1)),
      take: (client, name) => client.getSemaphore(name).tryAcquire(),
      free: async (checker, name) => (await checker.getSemaphore(name).availablePermits()) === 1,
    },
    permitSemaphore: {
      prepare: async (checker, name) => void (await checker.getPermitExpirableSemaphore(name).trySetPermits(1)),
      take: (client, name) => client.getPermitExpirableSemaphore(name).tryAcquire(),
      free: async (checker, name) => (await checker.getPermitExpirableSemaphore(name).availablePermits()) === 1,
    },
  };
  // The read-write lock's holds live in its hash: nothing of it is left when no one holds it.
  const rwFree = async (name: string) => (await redis.admin.exists(name)) === 0;

  test.each(Object.keys(kinds))('%s', async (kind) => {
    const name = `close-racing-${kind}`;
    const { prepare, take, free } = kinds[kind]!;
    const checker = redis.client();
    await prepare?.(checker, name);
    for (let round = 0; round < 3; round++) {
      const client = redis.client();
      // Connected, and the scripts loaded: the attempt goes out at once, as one EVALSHA.
      await client.getLock(`${name}:warm`).withLock(() => undefined);
      const before = await scriptCallCount(redis.admin);
      const attempt = take(client, name).then(
        () => 'taken',
        (error: unknown) => error,
      );
      await client.close();
      // The attempt reached Redis (else this round would prove nothing) and ran there.
      expect(await scriptCallCount(redis.admin)).toBeGreaterThan(before);
      expect(await attempt).toBeInstanceOf(ClientClosedError);
      // Right away, not after a lease: close() waited for the reply and gave the take back.
      expect(await free(checker, name)).toBe(true);
      if (kind === 'read' || kind === 'write') expect(await rwFree(name)).toBe(true);
    }
  });

  test('on a connection the user owns, which stays open, close() does not wait: the give-back goes out when the reply comes', async () => {
    const connection = redis.server.connect();
    try {
      for (const kind of ['lock', 'semaphore']) {
        const name = `close-racing-borrowed-${kind}`;
        const { prepare, take, free } = kinds[kind]!;
        const checker = redis.client();
        await prepare?.(checker, name);
        const client = redis.client({ redis: connection });
        await client.getLock(`${name}:warm`).withLock(() => undefined);
        redis.server.pause();
        const attempt = take(client, name).catch((error: unknown) => error);
        const started = performance.now();
        await client.close();
        expect(performance.now() - started).toBeLessThan(500);
        expect(await attempt).toBeInstanceOf(ClientClosedError);
        redis.server.resume();
        await until('what the attempt took is back', () => free(checker, name), 2_000);
      }
    } finally {
      connection.disconnect();
    }
  });

  test('a local handoff under way when close() comes: the hold the release handed to the waiter it woke goes back', async () => {
    for (const kind of ['lock', 'fair'] as const) {
      const name = `close-racing-handoff-${kind}`;
      const client = redis.client();
      const handle = (): { lock(): Promise<unknown>; unlock(): Promise<unknown> } => (kind === 'lock' ? client.getLock(name) : client.getFairLock(name));
      const holder = handle();
      await holder.lock();
      const waiter = handle()
        .lock()
        .then(
          () => 'held',
          (error: unknown) => error,
        );
      await until('the waiter parked', () => client.stats.waiters === 1);
      const released = holder.unlock().catch((error: unknown) => error);
      await client.close();
      expect(await waiter).toBeInstanceOf(ClientClosedError);
      await released;
      expect(await redis.admin.exists(name)).toBe(0);
    }
  });
});
