// Fault 6: the process holding a lock is killed -9. Its watchdog dies with it, so the lock frees
// itself when its lease runs out.
import { startFixture } from '../helpers/child';
import { usePrivateRedis } from '../helpers/privateRedis';
import { sleep } from '../helpers/time';

const redis = usePrivateRedis();

test('a killed holder’s lock expires after its lease and a waiter takes it', async () => {
  // Not shorter: a loaded machine can stall the holder's renewal past most of a 900 ms lease.
  const lease = 2_000;
  const name = 'holder-killed';
  const holder = startFixture('holdLock.ts', [redis.server.url, name, String(lease)]);
  let killedAt = 0;
  try {
    const locked = await holder.line((line) => line.startsWith('locked '));
    const holderId = locked.split(' ')[1]!;
    // Alive, its watchdog keeps the lock past its lease.
    await sleep(lease * 1.5);
    const fields = await redis.admin.hkeys(name);
    expect(fields).toHaveLength(1);
    expect(fields[0]!.startsWith(`${holderId}:`)).toBe(true);
    expect(await redis.admin.pttl(name)).toBeGreaterThan(lease / 3);
  } finally {
    holder.child.kill('SIGKILL');
    killedAt = performance.now();
  }
  await holder.exited();
  const client = redis.client();
  await expect(client.getLock(name).tryLock({ waitTime: 10_000, leaseTime: 5000 })).resolves.toBe(true);
  // Within the lease's pttl (and a loaded machine's lag), not the 10 s waitTime.
  const waited = performance.now() - killedAt;
  expect(waited).toBeLessThan(lease + 3_000);
  const [field] = await redis.admin.hkeys(name);
  expect(field!.startsWith(`${client.id}:`)).toBe(true);
});
