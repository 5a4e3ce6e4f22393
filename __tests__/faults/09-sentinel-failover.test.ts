// Fault 9: the Sentinel master is killed and a replica promoted. The command and subscriber
// connections follow the new master, waiters are woken, and the watchdog keeps renewing.
import { Redis } from 'ioredis';
import { LockClient } from '../../src';
import { RedisSentinelGroup } from '../../scripts/redisTopologies';
import { sleep, until } from '../helpers/time';

let group: RedisSentinelGroup;
beforeAll(async () => {
  group = await RedisSentinelGroup.start();
}, 60_000);
afterAll(async () => {
  await group.stop();
});

test('after a failover the lock lives on, is renewed on the new master, and its release wakes the waiter', async () => {
  const options = { redis: { sentinels: group.sentinels, name: group.masterName }, watchdogTimeout: 6000 };
  const holder = new LockClient(options);
  const waiting = new LockClient(options);
  const admin = new Redis({ sentinels: group.sentinels, name: group.masterName });
  admin.on('error', () => undefined);
  const lost = jest.fn();
  holder.on('lockLost', lost);
  try {
    const name = 'failover';
    const lock = holder.getLock(name);
    await lock.lock();
    expect(await admin.wait(1, 2000)).toBe(1); // the replica has it
    let heldAt = 0;
    const waiter = waiting.getLock(name).withLock(() => {
      heldAt = performance.now();
    });
    await until('the waiter parked', () => waiting.stats.waiters === 1);

    const oldMaster = await group.masterPort();
    await group.master.kill();
    const newMaster = await group.waitForNewMaster(oldMaster);
    expect(newMaster).toBe(group.replica.port);
    // Renewals reach the new master: the lease is pushed back past the failover.
    await sleep(2500);
    const direct = new Redis(newMaster, '127.0.0.1');
    expect(await direct.pttl(name)).toBeGreaterThan(3000);
    direct.disconnect();
    expect(lost).not.toHaveBeenCalled();

    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    expect(heldAt - releasedAt).toBeLessThan(2000);
  } finally {
    admin.disconnect();
    await holder.close();
    await waiting.close();
  }
}, 60_000);
