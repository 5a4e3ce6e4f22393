// A counting call (a semaphore's release, addPermits or drainPermits, a latch's countDown or
// delete) that ioredis resends after an outage longer than its latch lasts must not count a
// second time: it carries a deadline in Redis's clock, and a script refuses it past that
// (src/services/RedisClock.ts, src/lua/includes/fresh.lua). Against a private redis-server.
import { Redis } from 'ioredis';
import { type LockClient, RedisCommandError } from '../src';
import { STALE_MARGIN_MS } from '../src/services/RedisClock';
import { usePrivateRedis } from './helpers/privateRedis';
import { TcpProxy } from './helpers/tcpProxy';
import { until } from './helpers/time';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `stale:${process.pid}:${++counter}`;
const RELEASE_LATCH_TTL_MS = 60_000;
const OPERATION_ID_TTL_MS = 600_000;

/** The client's estimate of Redis's clock (client internals), once measured. */
async function clockOf(client: LockClient): Promise<{ offset: number }> {
  const clock = (client as unknown as { clock: { offset: number | undefined } }).clock;
  await until('the client measured Redis’s clock', () => clock.offset !== undefined);
  return clock as { offset: number };
}

/** What `call` rejected with (undefined: it resolved). */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (error: unknown) => error,
  );
}

function expectStale(error: unknown): void {
  expect(error).toBeInstanceOf(RedisCommandError);
  expect((error as RedisCommandError).code).toBe('STALE');
}

test('the deadline a call carries is Redis’s clock plus its latch’s time less the margin, whatever the client’s own clock says', async () => {
  const client = redis.client();
  await clockOf(client);
  const [seconds, micros] = await redis.admin.time();
  const redisNow = Number(seconds) * 1000 + Number(micros) / 1000;
  const context = (client as unknown as { context: { redisTimeAfter(ms: number): number } }).context;
  expect(Math.abs(context.redisTimeAfter(RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS) - (redisNow + RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS))).toBeLessThan(500);
});

test('past its deadline a counting call is refused (STALE) and writes nothing; one whose latch or id is still there answers what its first run did', async () => {
  const client = redis.client();
  const clock = await clockOf(client);
  const name = uniqueName();
  const sem = client.getSemaphore(name);
  const pes = client.getPermitExpirableSemaphore(uniqueName());
  const latch = client.getCountDownLatch(uniqueName());
  await sem.trySetPermits(2);
  await sem.release({ operationId: 'job-1' }); // 3
  await pes.trySetPermits(1);
  await latch.trySetCount(3);
  await latch.countDown({ operationId: 'job-1' }); // 2
  // Every deadline now falls in Redis's past: as if each call reached Redis after its latch ran out.
  clock.offset -= 2 * OPERATION_ID_TTL_MS;
  for (const call of [sem.release(), sem.release({ operationId: 'job-2' }), sem.addPermits(1), sem.addPermits(-1, { operationId: 'cut-1' }), sem.drainPermits(), pes.addPermits(1), latch.countDown(), latch.countDown({ operationId: 'job-2' }), latch.delete()]) {
    expectStale(await rejection(call));
  }
  expect(await sem.availablePermits()).toBe(3);
  expect(await pes.availablePermits()).toBe(1);
  expect(await latch.getCount()).toBe(2);
  expect(await latch.getState()).toBe('closed');
  // The calls that ran before: their ids' records answer, nothing counts again.
  await sem.release({ operationId: 'job-1' });
  await latch.countDown({ operationId: 'job-1' });
  expect(await sem.availablePermits()).toBe(3);
  expect(await latch.getCount()).toBe(2);
  clock.offset += 2 * OPERATION_ID_TTL_MS;
  await sem.release();
  expect(await sem.availablePermits()).toBe(4);
});

test('a release whose reply was cut, resent by ioredis after its latch expired and its deadline passed, is refused: its permit comes back once (before: twice, more holders than permits)', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  const own = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null }); // BullMQ's setting: ioredis keeps a call for the whole outage
  own.on('error', () => undefined);
  try {
    const client = redis.client({ redis: own });
    const name = uniqueName();
    const sem = client.getSemaphore(name);
    await sem.trySetPermits(1);
    await sem.acquire();
    // The release's deadline falls 1.5 s after its send instead of 50 s: the outage below outlasts it.
    const clock = await clockOf(client);
    clock.offset -= RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS - 1_500;
    proxy.cutOnNextReply();
    proxy.stopAccepting();
    const sentAt = performance.now();
    const release = rejection(sem.release());
    await until('Redis ran the release', async () => (await redis.admin.get(name)) === '1');
    // Its latch runs out (60 s in life; deleted here), and the outage outlasts the deadline.
    const latches = await redis.admin.keys(`rlock__unlock_latch:{${name}}:*`);
    expect(latches.length).toBeGreaterThan(0);
    await redis.admin.del(...latches);
    await until('the deadline has passed', () => performance.now() - sentAt > 2_000, 5_000);
    await proxy.resumeAccepting();
    expectStale(await release);
    expect(await sem.availablePermits()).toBe(1);
  } finally {
    await proxy.close();
    own.disconnect();
  }
}, 20_000);

test('a client whose Redis refuses TIME (an ACL without +time) sends no deadline, and its calls run as before', async () => {
  await redis.admin.call('ACL', 'SETUSER', 'notime', 'on', '>pw', '~*', '&*', '+@all', '-time');
  try {
    const client = redis.client({ redis: `redis://notime:pw@127.0.0.1:${redis.server.port}` });
    const sem = client.getSemaphore(uniqueName());
    expect(await sem.trySetPermits(1)).toBe(true);
    await sem.acquire();
    await sem.release();
    expect(await sem.availablePermits()).toBe(1);
    const clock = (client as unknown as { clock: { offset: number | undefined; measuredAt: number } }).clock;
    await until('the refused measure was answered', () => clock.measuredAt > 0);
    expect(clock.offset).toBeUndefined();
  } finally {
    await redis.admin.call('ACL', 'DELUSER', 'notime');
  }
});
