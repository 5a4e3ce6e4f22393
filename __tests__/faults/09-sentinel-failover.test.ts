// Fault 9: the Sentinel master is moved (SENTINEL FAILOVER) or killed, and a replica promoted. The command and subscriber
// connections follow the new master, waiters are woken, and the watchdog keeps renewing.
import { Redis } from 'ioredis';
import { LockClient } from '../../src';
import { RedisSentinelGroup } from '../../scripts/redisTopologies';
import { holdAllWithWaiters, releaseEachToItsWaiter } from '../helpers/contenders';
import { untilReplicaHasAll } from '../helpers/testRedis';
import { sleep, until } from '../helpers/time';


/**
 * A lock is held and a waiter parked; `failover` moves the master. Afterwards the lock lives on
 * and is renewed on the new master, and its release wakes the waiter at once.
 */
async function survivesFailover(name: string, failover: (group: RedisSentinelGroup, oldMaster: number) => Promise<void>): Promise<void> {
  // A group of its own: a demoted old master takes the Sentinel ~18 s to count as a replica again.
  const group = await RedisSentinelGroup.start();
  // A lease long enough to outlive a failover on a loaded machine (the Sentinel's 1 s down-after,
  // its election, the promotion): with 6 s it ran out in one full-suite run before the new master
  // was up, and the lock was gone for a reason this test is not about.
  const options = { redis: { sentinels: group.sentinels, name: group.masterName }, watchdogTimeout: 12_000 };
  const holder = new LockClient(options);
  const waiting = new LockClient(options);
  const admin = new Redis({ sentinels: group.sentinels, name: group.masterName, disconnectTimeout: 0 });
  admin.on('error', () => undefined);
  const lost = jest.fn();
  holder.on('lockLost', lost);
  try {
    const lock = holder.getLock(name);
    await lock.lock();
    expect(await admin.wait(1, 2000)).toBe(1); // the replica has it
    let heldAt = 0;
    const waiter = waiting.getLock(name).withLock(() => {
      heldAt = performance.now();
    });
    await until('the waiter parked', () => waiting.stats.waiters === 1);

    const oldMaster = await group.masterPort();
    await failover(group, oldMaster);
    const newMaster = await group.waitForNewMaster(oldMaster);
    // Renewals reach the new master: the lease there, which only runs down without them, goes
    // back up (a renewal comes at the reconnect and then every watchdogTimeout / 3).
    const direct = new Redis(newMaster, '127.0.0.1', { disconnectTimeout: 0 });
    try {
      let previous = await direct.pttl(name);
      expect(previous).toBeGreaterThan(0);
      await until('a renewal reached the new master', async () => {
        const now = await direct.pttl(name);
        const renewed = now > previous + 100;
        previous = now;
        return renewed;
      }, 8000);
    } finally {
      direct.disconnect();
    }
    expect(lost).not.toHaveBeenCalled();

    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    expect(heldAt - releasedAt).toBeLessThan(2000);
  } finally {
    admin.disconnect();
    await holder.close();
    await waiting.close();
    await group.stop();
  }
}

// The Sentinel demotes the live old master and kills its clients: both connections must move.
test('SENTINEL FAILOVER: the lock lives on, is renewed on the new master, and its release wakes the waiter', async () => {
  await survivesFailover('manual-failover', (group) => group.failover());
}, 60_000);

test('killing the master: the lock lives on, is renewed on the promoted replica, and its release wakes the waiter', async () => {
  await survivesFailover('killed-master', (group, oldMaster) => group.serverOn(oldMaster).kill());
}, 60_000);

// Every primitive at once, through one failover: each is held (under the watchdog) with a waiter
// parked on another client; after the move each hold lives on past a full lease, and each
// release reaches its waiter.
test('SENTINEL FAILOVER under every primitive at once: each hold lives on, renewed on the new master, and each release reaches its waiter', async () => {
  const group = await RedisSentinelGroup.start();
  const options = { redis: { sentinels: group.sentinels, name: group.masterName }, watchdogTimeout: 6000, queueTimeout: 1500 };
  const holder = new LockClient(options);
  const waiting = new LockClient(options);
  const lost = jest.fn();
  holder.on('lockLost', lost);
  try {
    const held = await holdAllWithWaiters(holder, waiting, 'family-failover');
    // The replica has everything the master wrote (the holds, the queue entries) before the move.
    const oldMaster = await group.masterPort();
    const [master, replica] = [group.master.connect(), group.replica.connect()];
    try {
      await untilReplicaHasAll(master, replica);
    } finally {
      master.disconnect();
      replica.disconnect();
    }
    await group.failover();
    await group.waitForNewMaster(oldMaster);
    // Past a full lease: a hold lives only if its renewals reach the new master.
    await sleep(7_000);
    expect(lost).not.toHaveBeenCalled();
    // Within a third of a lease (and a latch's await has no bound at all).
    await releaseEachToItsWaiter(held, 2_000, 'sentinel failover');
  } finally {
    await holder.close();
    await waiting.close();
    await group.stop();
  }
}, 90_000);

test('a borrowed Sentinel connection without failoverDetector gets a warning', async () => {
  const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  const sentinel = { sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'mymaster', lazyConnect: true }; // never connected
  const borrowed = new Redis(sentinel);
  const detected = new Redis({ ...sentinel, failoverDetector: true });
  try {
    await new LockClient({ redis: detected }).close();
    expect(emitWarning).not.toHaveBeenCalled();
    await new LockClient({ redis: borrowed }).close();
    expect(emitWarning).toHaveBeenCalledTimes(1);
    expect(emitWarning.mock.calls[0]![1]).toMatchObject({ code: 'RLOCK_NO_FAILOVER_DETECTOR' });
  } finally {
    emitWarning.mockRestore();
    borrowed.disconnect();
    detected.disconnect();
  }
});
