// Fault 10: the failover window. Replication is asynchronous: a lock taken on a master that dies
// before its replica has it can be taken again on the promoted replica. `syncReplicas` (WAIT for
// replicas after each acquire, give the hold back when they do not acknowledge) closes it.
import type { Redis } from 'ioredis';
import { LockClient } from '../../src';
import { RedisSentinelGroup } from '../../scripts/redisTopologies';
import { until } from '../helpers/time';

/**
 * Pauses the replica, lets `acquireWhilePaused` run, resumes it (the replica then catches up
 * with whatever the master kept), runs `afterResume`, kills the master, waits for the promotion.
 */
async function failoverAfter(group: RedisSentinelGroup, acquireWhilePaused: () => Promise<void>, afterResume: () => Promise<void> = async () => undefined): Promise<void> {
  group.replica.pause();
  try {
    await acquireWhilePaused();
  } finally {
    group.replica.resume();
  }
  await afterResume();
  const old = await group.masterPort();
  await group.master.kill();
  await group.waitForNewMaster(old);
}

function clientOn(group: RedisSentinelGroup, extra: object = {}): LockClient {
  return new LockClient({ redis: { sentinels: group.sentinels, name: group.masterName }, ...extra });
}

/**
 * Runs `acquire` on a master whose replica will never have it (the replica frozen and its
 * replication link cut: a frozen process would still read what was already sent to it), then
 * kills the master and waits for the replica's promotion.
 */
async function failoverBeforeReplication(group: RedisSentinelGroup, acquire: () => Promise<void>): Promise<void> {
  group.replica.pause();
  const master = group.master.connect();
  await master.client('KILL', 'TYPE', 'replica');
  master.disconnect();
  await acquire();
  const old = await group.masterPort();
  await group.master.kill();
  group.replica.resume();
  await group.waitForNewMaster(old);
}

/** Runs `fn` with a Sentinel group and two clients on it (`a` with `aOptions`); stops them all after. */
async function withTwoClients(aOptions: object, fn: (on: { group: RedisSentinelGroup; a: LockClient; b: LockClient }) => Promise<void>): Promise<void> {
  const group = await RedisSentinelGroup.start();
  const a = clientOn(group, aOptions);
  const b = clientOn(group);
  try {
    // Both connected before the test kills the master: a client whose very first connection
    // fails (b, still asking the Sentinel on a loaded machine, then sent to the dead master)
    // reports that at once (unreachable.test.ts), which is not what these tests are about.
    await Promise.all([a, b].map((client) => client.getLock('connected').isLocked()));
    await fn({ group, a, b });
  } finally {
    await a.close();
    await b.close();
    await group.stop();
  }
}

/**
 * Runs `fn` with a Sentinel group, a client on it that WAITs for 1 replica (200 ms) after each
 * acquire, and a count of the WAIT calls the master ran; stops them all after.
 */
async function withSyncedClient(fn: (on: { group: RedisSentinelGroup; a: LockClient; master: Redis; waits: () => Promise<number> }) => Promise<void>): Promise<void> {
  const group = await RedisSentinelGroup.start();
  const a = clientOn(group, { syncReplicas: { replicas: 1, timeout: 200 } });
  const master = group.master.connect();
  const waits = async (): Promise<number> => Number(/cmdstat_wait:calls=(\d+)/.exec(await master.info('commandstats'))?.[1] ?? 0);
  try {
    await fn({ group, a, master, waits });
  } finally {
    master.disconnect();
    await a.close();
    await group.stop();
  }
}

test('without syncReplicas the window exists: a second owner takes the lock after the failover', async () => {
  await withTwoClients({}, async ({ group, a, b }) => {
    const lockA = a.getLock('window');
    await failoverBeforeReplication(group, async () => {
      expect(await lockA.tryLock({ leaseTime: 60_000 })).toBe(true);
    });
    // A still believes it holds the lock (its 60 s lease has not run out), and yet:
    expect(await b.getLock('window').tryLock({ waitTime: 10_000, leaseTime: 60_000 })).toBe(true);
  });
}, 60_000);

test("a fenced lock's token minted on a master that died before replicating it is still exceeded by the next one on the promoted replica", async () => {
  await withTwoClients({}, async ({ group, a, b }) => {
    // As above: the replica never receives the token A is answered (nor A's lock).
    let lost: bigint | null = null;
    await failoverBeforeReplication(group, async () => {
      lost = await a.getFencedLock('fenced-window').tryLock({ leaseTime: 60_000 });
      expect(lost).not.toBeNull();
    });
    // The promoted replica has no token key: its clock (Redis TIME in µs) takes over, above A's.
    const next = await b.getFencedLock('fenced-window').tryLock({ waitTime: 10_000, leaseTime: 60_000 });
    expect(next).not.toBeNull();
    expect(next!).toBeGreaterThan(lost!);
  });
}, 60_000);

test('with syncReplicas an unreplicated acquire fails, a replicated one survives the failover', async () => {
  await withTwoClients({ syncReplicas: { replicas: 1, timeout: 300 } }, async ({ group, a, b }) => {
    const lockA = a.getLock('window');
    await failoverAfter(
      group,
      async () => {
        // The replica cannot acknowledge: the hold is given back, A does not believe it holds.
        expect(await lockA.tryLock({ leaseTime: 60_000 })).toBe(false);
        expect(await lockA.isHeldByCurrentOwner()).toBe(false);
      },
      async () => {
        // With the replica back, the acquire is acknowledged and so survives the failover.
        expect(await lockA.tryLock({ waitTime: 5000, leaseTime: 60_000 })).toBe(true);
      },
    );
    expect(await b.getLock('window').tryLock({ waitTime: 1000, leaseTime: 60_000 })).toBe(false);
    expect(await lockA.isHeldByCurrentOwner()).toBe(true);
  });
}, 60_000);

test('with syncReplicas a release does not hand the lock to a waiter of its own client: the waiter acquires, and WAIT vouches for it', async () => {
  await withSyncedClient(async ({ group, a, master, waits }) => {
    const first = a.getLock('handoff');
    // Single attempts, not lock(): a lock() whose first acquire WAIT did not vouch for (a slow
    // replica) takes the lock by waiting, and its client then knows the lock is here; the
    // waiter below would park without asking Redis (it joins the line only at the release),
    // never showing up in the queue this test waits for.
    await until('the first hold is acknowledged by the replica', () => first.tryLock());
    let held = false;
    const waiting = a
      .getLock('handoff')
      .lock()
      .then(() => (held = true));
    await until('the waiter is in line (it parks next)', async () => (await master.zscore('rlock__clients:{handoff}', a.id)) !== null);
    group.replica.pause();
    try {
      const before = await waits();
      await first.unlock();
      // Handed over in the release script, the waiter would hold the lock now with no replica
      // having it. It acquires by itself instead, and its attempts are refused while the
      // paused replica cannot acknowledge them: two of them seen.
      await until('two acquires of the waiter were refused by WAIT', async () => held || (await waits()) - before >= 2);
      expect(held).toBe(false);
    } finally {
      group.replica.resume();
    }
    await waiting;
    expect(held).toBe(true);
  });
}, 60_000);

test('with syncReplicas an expirable permit the replica did not acknowledge is given back; an acknowledged one survives the failover (Redisson #4097)', async () => {
  const name = 'window-permits';
  await withTwoClients({ syncReplicas: { replicas: 1, timeout: 300 } }, async ({ group, a, b }) => {
    const sem = a.getPermitExpirableSemaphore(name);
    expect(await sem.trySetPermits(1)).toBe(true);
    let id: string | null = null;
    await failoverAfter(
      group,
      async () => {
        // The replica cannot acknowledge: the permit goes back, and A is told it got none.
        expect(await sem.tryAcquire({ leaseTime: 60_000 })).toBeNull();
        expect(await sem.availablePermits()).toBe(1);
      },
      async () => {
        // With the replica back, the acquire (and the permits set before it, on the same
        // connection) are acknowledged, and so survive the failover.
        id = await sem.tryAcquire({ waitTime: 5000, leaseTime: 60_000 });
        expect(id).not.toBeNull();
      },
    );
    // The promoted replica has A's permit: nobody else gets one, and A gives back what it holds.
    expect(await b.getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 1000, leaseTime: 60_000 })).toBeNull();
    await sem.release(id!);
    expect(await b.getPermitExpirableSemaphore(name).tryAcquire({ leaseTime: 60_000 })).not.toBeNull();
  });
}, 60_000);

test('with syncReplicas a release does not hand an expirable permit to a waiter of its own client: the waiter acquires, and WAIT vouches for it', async () => {
  await withSyncedClient(async ({ a, waits }) => {
    const sem = a.getPermitExpirableSemaphore('permit-handoff');
    await sem.trySetPermits(1);
    let held: string | null = null;
    await until('a first permit is acknowledged by the replica', async () => (held = await sem.tryAcquire({ leaseTime: 60_000 })));
    const waiting = a.getPermitExpirableSemaphore('permit-handoff').acquire({ leaseTime: 60_000 });
    await until('the waiter is parked', () => a.stats.waiters === 1);
    const before = await waits();
    await sem.release(held!);
    // Handed over in a release script, the permit would skip WAIT (no WAIT call from here on).
    expect(await waiting).toEqual(expect.any(String));
    expect((await waits()) - before).toBeGreaterThanOrEqual(1);
  });
}, 60_000);
