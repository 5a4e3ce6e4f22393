// Fault 8: client.close() while calls are in flight and waiters wait.
import { ClientClosedError } from '../../src';
import { startFixture } from '../helpers/child';
import { usePrivateRedis } from '../helpers/privateRedis';
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
