// Fault 4: the unlock message never comes; the waiter must still get the lock within the pttl.
import { usePrivateRedis, subscribers } from '../helpers/privateRedis';
import { until } from '../helpers/time';

const redis = usePrivateRedis();

test('a lock deleted without a message is taken once the pttl the waiter was given runs out', async () => {
  const holder = redis.client();
  // Its heartbeat (a third of queueTimeout) must not wake it within the bounds below.
  const waiting = redis.client({ queueTimeout: 60_000 });
  const name = 'lost-message:deleted';
  const lease = 1200;
  const start = performance.now();
  await holder.getLock(name).lock({ leaseTime: lease });
  const taking = waiting.getLock(name).tryLock({ waitTime: 10_000, leaseTime: 5000 });
  await until('the waiter subscribed', async () => (await subscribers(redis.admin, name)) === 1);
  // A release that publishes nothing, as a script that skips the publish would.
  const askedAt = performance.now();
  const left = await redis.admin.pttl(name);
  expect(left).toBeGreaterThan(0);
  await redis.admin.del(name);
  await expect(taking).resolves.toBe(true);
  const tookAt = performance.now();
  // Not woken by a message: it slept until the pttl it was given (no less than what was left)...
  expect(tookAt - askedAt).toBeGreaterThan(left - 20);
  // ...and not much longer (room for a loaded machine; the bug would be the 10 s waitTime).
  expect(tookAt - start).toBeLessThan(lease + 3_000);
});

test('a lease that runs out publishes nothing; the waiter takes the lock at its end', async () => {
  const holder = redis.client();
  const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat within the bounds
  const name = 'lost-message:expired';
  const lease = 800;
  const start = performance.now();
  await holder.getLock(name).lock({ leaseTime: lease });
  await expect(waiting.getLock(name).tryLock({ waitTime: 10_000, leaseTime: 5000 })).resolves.toBe(true);
  const elapsed = performance.now() - start;
  expect(elapsed).toBeGreaterThan(lease - 50);
  expect(elapsed).toBeLessThan(lease + 3_000); // the bug would be the 10 s waitTime
});
