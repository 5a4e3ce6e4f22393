// Fault 4: the unlock message never comes; the waiter must still get the lock within the pttl.
import type { LockClient } from '../../src';
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

describe('every primitive with leases: one that runs out publishes nothing, and the waiter takes it at its end', () => {
  // A lease that ends sends no message (Redis expires the key, or the script finds the entry
  // past its time): the waiter must have slept no longer than the pttl its attempt was given.
  // (A plain semaphore's permits have no lease; a latch has nothing to run out.)
  const leased: Record<string, { hold(client: LockClient, name: string, leaseTime: number): Promise<unknown>; take(client: LockClient, name: string): Promise<boolean> }> = {
    fair: {
      hold: (client, name, leaseTime) => client.getFairLock(name).lock({ leaseTime }),
      take: (client, name) => client.getFairLock(name).tryLock({ waitTime: 10_000, leaseTime: 5000 }),
    },
    fenced: {
      hold: (client, name, leaseTime) => client.getFencedLock(name).lock({ leaseTime }),
      take: async (client, name) => (await client.getFencedLock(name).tryLock({ waitTime: 10_000, leaseTime: 5000 })) !== null,
    },
    'write behind a read': {
      hold: (client, name, leaseTime) => client.getReadWriteLock(name).readLock().lock({ leaseTime }),
      take: (client, name) => client.getReadWriteLock(name).writeLock().tryLock({ waitTime: 10_000, leaseTime: 5000 }),
    },
    'read behind a write': {
      hold: (client, name, leaseTime) => client.getReadWriteLock(name).writeLock().lock({ leaseTime }),
      take: (client, name) => client.getReadWriteLock(name).readLock().tryLock({ waitTime: 10_000, leaseTime: 5000 }),
    },
    permitSemaphore: {
      hold: async (client, name, leaseTime) => {
        const semaphore = client.getPermitExpirableSemaphore(name);
        await semaphore.trySetPermits(1);
        return semaphore.acquire({ leaseTime });
      },
      take: async (client, name) => (await client.getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 10_000, leaseTime: 5000 })) !== null,
    },
  };

  test.each(Object.keys(leased))('%s', async (kind) => {
    const { hold, take } = leased[kind]!;
    const holder = redis.client();
    const waiting = redis.client({ queueTimeout: 60_000 }); // no heartbeat within the bounds
    const name = `lost-message:${kind.replace(/ /g, '-')}`;
    const lease = 800;
    const start = performance.now();
    await hold(holder, name, lease);
    await expect(take(waiting, name)).resolves.toBe(true);
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThan(lease - 50);
    expect(elapsed).toBeLessThan(lease + 3_000); // the bug would be the 10 s waitTime
    console.log(`lease ran out, ${kind}: the waiter had it ${Math.round(elapsed)} ms after a hold of ${lease} ms began`);
  });
});
