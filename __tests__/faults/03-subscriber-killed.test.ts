// Fault 3: the subscriber connection is killed (CLIENT KILL TYPE pubsub) while waiters wait.
import { commandCounts } from '../helpers/testRedis';
import { usePrivateRedis, parkedWaiters, subscribers } from '../helpers/privateRedis';
import { until } from '../helpers/time';

const redis = usePrivateRedis();

test('it resubscribes, and the next unlock wakes the waiter long before its pttl', async () => {
  const holder = redis.client(); // default lease 30 s: a waiter relying on its pttl would wait that long
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat (a script call, a wake-up) within the test
  const name = 'subscriber-killed';
  const lock = holder.getLock(name);
  await lock.lock();
  let acquiredAt = 0;
  const waiter = waiting.getLock(name).withLock(async () => {
    acquiredAt = performance.now();
  });
  await until('the waiter subscribed', async () => (await subscribers(redis.admin, name)) === 1);

  const killed = await redis.admin.client('KILL', 'TYPE', 'pubsub');
  expect(killed).toBeGreaterThanOrEqual(1);
  await until('the subscriber came back', async () => (await subscribers(redis.admin, name)) === 1);
  const before = await commandCounts(redis.admin);

  const unlockedAt = performance.now();
  await lock.unlock();
  await waiter;
  expect(acquiredAt - unlockedAt).toBeLessThan(3_000); // room for a loaded machine; far below 30 s
  const after = await commandCounts(redis.admin);
  // One release, one acquire (maybe two if the reconnect wake-up raced the release), one release.
  expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBeLessThanOrEqual(4);
});

test('every waiter retries once on the reconnect, then sleeps again', async () => {
  const holder = redis.client();
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat among the script calls counted below
  const name = 'subscriber-killed:retry-once';
  const lock = holder.getLock(name);
  // Leased, so no watchdog renewal joins the script calls counted below; 30 s: no waiter wakes
  // on its pttl during the test.
  await lock.lock({ leaseTime: 30_000 });
  const waiters = [1, 2, 3].map(() => waiting.getLock(name).withLock(() => undefined));
  // Parked as handoff candidates: past their first attempts (and the retry after subscribing),
  // so that none of those is counted below.
  await until(
    'the waiters parked',
    async () => parkedWaiters(waiting, name) === 3 && (await subscribers(redis.admin, name)) === 1,
  );
  const attempts = async (): Promise<number> => (await commandCounts(redis.admin)).evalsha ?? 0;
  const before = await attempts();

  await redis.admin.client('KILL', 'TYPE', 'pubsub');
  await until('each waiter retried', async () => (await attempts()) - before >= 3);
  await new Promise((resolve) => setTimeout(resolve, 300)); // room for a second retry, if any came
  expect((await attempts()) - before).toBe(3);
  expect(waiting.stats.waiters).toBe(3);

  await lock.unlock();
  await Promise.all(waiters);
});
