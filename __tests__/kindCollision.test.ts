// One name used by mistake as two kinds of primitive: the second kind's calls fail with a typed
// error (WRONGTYPE) and leave the first kind's state as it was. Before, the semaphores and the
// latch each counted on the other's integer (permits over-admitted, a latch opened early, a
// semaphore re-armed), and a latch's delete() freed a held lock.
import { LatchDeletedError, type LockClient, RedisCommandError } from '../src';
import { usePrivateRedis } from './helpers/privateRedis';
import { until } from './helpers/time';

const redis = usePrivateRedis();

/** What `call` rejected with: a WRONGTYPE RedisCommandError, checked here. */
async function expectWrongType(what: string, call: () => Promise<unknown>): Promise<void> {
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect({ what, error }).toEqual({ what, error: expect.any(RedisCommandError) });
  expect({ what, code: (error as RedisCommandError).code }).toEqual({ what, code: 'WRONGTYPE' });
}

type CountKind = 'semaphore' | 'permits' | 'latch';

/** Every call of a kind that writes, decides on or reports the name's count. */
function countingCalls(client: LockClient, name: string): Record<CountKind, Record<string, () => Promise<unknown>>> {
  const semaphore = client.getSemaphore(name);
  const permits = client.getPermitExpirableSemaphore(name);
  const latch = client.getCountDownLatch(name);
  return {
    semaphore: {
      availablePermits: () => semaphore.availablePermits(),
      inspect: () => semaphore.inspect(),
      trySetPermits: () => semaphore.trySetPermits(5),
      tryAcquire: () => semaphore.tryAcquire(),
      acquire: () => semaphore.acquire({ permits: 1 }),
      drainPermits: () => semaphore.drainPermits(),
      release: () => semaphore.release(),
      addPermits: () => semaphore.addPermits(1),
    },
    permits: {
      availablePermits: () => permits.availablePermits(),
      inspect: () => permits.inspect(),
      trySetPermits: () => permits.trySetPermits(5),
      tryAcquire: () => permits.tryAcquire({ leaseTime: 60_000 }),
      addPermits: () => permits.addPermits(1),
    },
    latch: {
      trySetCount: () => latch.trySetCount(5),
      countDown: () => latch.countDown(),
      getCount: () => latch.getCount(),
      await: () => latch.await(),
      delete: () => latch.delete(),
    },
  };
}

/** Sets the name up as `kind` with some of its count taken; returns a reading of that state. */
async function setUp(client: LockClient, name: string, kind: CountKind): Promise<() => Promise<unknown>> {
  if (kind === 'semaphore') {
    const semaphore = client.getSemaphore(name);
    await semaphore.trySetPermits(2);
    await semaphore.acquire();
    return () => semaphore.availablePermits();
  }
  if (kind === 'permits') {
    const permits = client.getPermitExpirableSemaphore(name);
    await permits.trySetPermits(2);
    await permits.acquire({ leaseTime: 60_000 });
    return () => permits.availablePermits();
  }
  const latch = client.getCountDownLatch(name);
  await latch.trySetCount(3);
  await latch.countDown();
  return () => latch.getCount();
}

const KINDS: CountKind[] = ['semaphore', 'permits', 'latch'];
const LABELS: Record<CountKind, string> = { semaphore: 'semaphore', permits: 'permit-expirable semaphore', latch: 'count-down latch' };
const PAIRS = KINDS.flatMap((first) => KINDS.filter((second) => second !== first).map((second) => [LABELS[first], LABELS[second], first, second] as const));

test.each(PAIRS)('a name set up as a %s: every counting call and the reads of a %s fail with WRONGTYPE, and its state is unchanged', async (_first, _second, first, second) => {
  const client = redis.client();
  const name = `collide:${first}:${second}`;
  const read = await setUp(client, name, first);
  const before = await read();
  for (const [call, run] of Object.entries(countingCalls(client, name)[second])) await expectWrongType(`${second}.${call}`, run);
  expect(await read()).toEqual(before);
});

test.each([
  ['a plain lock', (client: LockClient, name: string) => client.getLock(name)],
  ['a write lock', (client: LockClient, name: string) => client.getReadWriteLock(name).writeLock()],
  ['a fair lock', (client: LockClient, name: string) => client.getFairLock(name)],
  ['a fenced lock', (client: LockClient, name: string) => client.getFencedLock(name)],
])('a name held as %s: a latch’s delete() fails with WRONGTYPE and the lock stays held (it freed the lock, and another owner took it); the counters’ trySet calls fail with WRONGTYPE (they answered false)', async (_kind, lockOf) => {
  const client = redis.client();
  const name = `collide:lock:${_kind}`;
  const lock = lockOf(client, name);
  await lock.lock();
  await expectWrongType('latch.delete', () => client.getCountDownLatch(name).delete());
  // Set up as a counter on a lock's hash: refused too (it answered false, "already set").
  await expectWrongType('latch.trySetCount', () => client.getCountDownLatch(name).trySetCount(1));
  await expectWrongType('semaphore.trySetPermits', () => client.getSemaphore(name).trySetPermits(1));
  await expectWrongType('permits.trySetPermits', () => client.getPermitExpirableSemaphore(name).trySetPermits(1));
  expect(await lock.isHeldByCurrentOwner()).toBe(true);
  expect([false, null]).toContain(await lockOf(redis.client(), name).tryLock()); // refused (a fenced lock answers null)
  await lock.unlock();
});

test('a name that holds a string none of them wrote (no marker): the counters\' reads and writes fail with WRONGTYPE, nothing written (the semaphore\'s read NaN permits)', async () => {
  const name = `foreign:${process.pid}`;
  await redis.admin.set(name, 'hello');
  const client = redis.client();
  await expectWrongType('Semaphore.availablePermits', () => client.getSemaphore(name).availablePermits());
  await expectWrongType('Semaphore.inspect', () => client.getSemaphore(name).inspect());
  await expectWrongType('PermitExpirableSemaphore.availablePermits', () => client.getPermitExpirableSemaphore(name).availablePermits());
  await expectWrongType('CountDownLatch.getCount', () => client.getCountDownLatch(name).getCount());
  // The writes too, with nothing written (before: Lua errors, and a countDown recorded its id first).
  await expectWrongType('Semaphore.tryAcquire', () => client.getSemaphore(name).tryAcquire());
  await expectWrongType('Semaphore.drainPermits', () => client.getSemaphore(name).drainPermits());
  await expectWrongType('Semaphore.release', () => client.getSemaphore(name).release());
  await expectWrongType('Semaphore.addPermits', () => client.getSemaphore(name).addPermits(1, { operationId: 'grow-1' }));
  await expectWrongType('CountDownLatch.countDown', () => client.getCountDownLatch(name).countDown({ operationId: 'job-1' }));
  await expectWrongType('CountDownLatch.countDown, retried', () => client.getCountDownLatch(name).countDown({ operationId: 'job-1' }));
  expect(await redis.admin.get(name)).toBe('hello');
  expect(await redis.admin.keys(`*{${name}}*`)).toEqual([]);
});

test('a latch deleted a moment ago (its marker says "deleted") may be set up as another kind', async () => {
  const client = redis.client();
  const latch = client.getCountDownLatch('collide:reuse');
  await latch.trySetCount(1);
  expect(await latch.delete()).toBe(true);
  const semaphore = client.getSemaphore('collide:reuse');
  expect(await semaphore.trySetPermits(1)).toBe(true);
  expect(await semaphore.tryAcquire()).toBe(true);
});

test('a latch deleted while awaited, its name set up as a semaphore before the awaiter re-reads: the awaiter rejects with LatchDeletedError (its round was deleted), not WRONGTYPE', async () => {
  const client = redis.client();
  const latch = client.getCountDownLatch('collide:awaited');
  await latch.trySetCount(1);
  const awaiting = latch.await({ waitTime: 20_000 }).then(
    () => 'resolved',
    (error: unknown) => error,
  );
  await until('the awaiter listens', async () => Number(((await redis.admin.pubsub('NUMSUB', 'rlock__latch:{collide:awaited}')) as [string, number])[1]) === 1);
  // Sent back to back on one connection: both run before the woken awaiter's re-read.
  const semaphore = client.getSemaphore('collide:awaited');
  await Promise.all([latch.delete(), semaphore.trySetPermits(1)]);
  expect(await awaiting).toBeInstanceOf(LatchDeletedError);
  expect(await semaphore.availablePermits()).toBe(1);
});
