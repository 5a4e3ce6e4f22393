// The core RLock behaviour on each topology: a single server, a 3-master Cluster (sharded
// pub/sub, per-slot renewal batches), the same Cluster without sharded pub/sub, and a Sentinel
// group, from one parametrised suite.
import { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError, LockClient, type LockClientOptions, MultiLock } from '../src';
import { RedisCluster, RedisSentinelGroup } from '../scripts/redisTopologies';
import { RedisServer } from './helpers/testRedis';
import { sleep, until } from './helpers/time';

interface Topology {
  /** Options for a LockClient on it (a connection is closed by `close`). */
  redisOption(): { redis: LockClientOptions['redis']; close: () => void };
  admin: Redis | Cluster;
  stop(): Promise<void>;
}

const topologies: [string, () => Promise<Topology>][] = [
  [
    'single server',
    async () => {
      const server = await RedisServer.start();
      return { redisOption: () => ({ redis: server.url, close: () => undefined }), admin: server.connect(), stop: () => server.stop() };
    },
  ],
  ...[
    ['Cluster (3 masters)', []],
    // Servers without sharded pub/sub (as before Redis 7): the client falls back to PUBLISH.
    ['Cluster without sharded pub/sub', ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', '']],
  ].map(([label, serverArgs]): [string, () => Promise<Topology>] => [
    label as string,
    async () => {
      const cluster = await RedisCluster.start({ masters: 3, serverArgs: serverArgs as string[] });
      let n = 0;
      return {
        // Half the clients get an ioredis Cluster passed in, half build their own from options.
        redisOption: () => {
          if (n++ % 2 === 0) return { redis: { clusterNodes: cluster.startupNodes }, close: () => undefined };
          const connection = cluster.connect();
          return { redis: connection, close: () => connection.disconnect() };
        },
        admin: cluster.connect(),
        stop: () => cluster.stop(),
      };
    },
  ]),
  [
    'Sentinel (master + replica)',
    async () => {
      const group = await RedisSentinelGroup.start();
      const options = { sentinels: group.sentinels, name: group.masterName };
      return { redisOption: () => ({ redis: options, close: () => undefined }), admin: new Redis({ ...options, disconnectTimeout: 0 }), stop: () => group.stop() };
    },
  ],
];

describe.each(topologies)('%s', (_label, start) => {
  let topology: Topology;
  const cleanups: (() => Promise<void> | void)[] = [];
  let seq = 0;
  const uniqueName = (): string => `topo:${++seq}:${Date.now()}`;

  function client(options: Partial<LockClientOptions> = {}): LockClient {
    const { redis, close } = topology.redisOption();
    const made = new LockClient({ redis, ...options });
    cleanups.push(async () => {
      await made.close();
      close();
    });
    return made;
  }

  beforeAll(async () => {
    topology = await start();
  }, 60_000);
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  afterAll(async () => {
    topology.admin.disconnect();
    await topology.stop();
  });

  test('a client asks COMMAND INFO (sharded pub/sub or not) at most once, however many waits it makes', async () => {
    const asked = async (): Promise<number> => {
      const nodes = topology.admin instanceof Cluster ? topology.admin.nodes('master') : [topology.admin];
      let calls = 0;
      for (const node of nodes) calls += Number(/^cmdstat_command\|info:calls=(\d+)/m.exec(await node.info('commandstats'))?.[1] ?? 0);
      return calls;
    };
    const before = await asked();
    const holder = client();
    const waiter = client();
    for (let i = 0; i < 3; i++) {
      const name = uniqueName();
      const lock = holder.getLock(name);
      await lock.lock();
      const waiting = waiter.getLock(name).tryLock({ waitTime: 10_000 });
      await until('the waiter is in line', async () => (await lock.inspect()).waitingClients === 1);
      await lock.unlock();
      expect(await waiting).toBe(true);
      await waiter.getLock(name).forceUnlock();
    }
    expect((await asked()) - before).toBeLessThanOrEqual(2); // once per client
  });

  test('fenced lock: increasing tokens, a reentrant hold keeps its token (lock and token key share a slot)', async () => {
    const c = client();
    const name = uniqueName();
    const first = await c.getFencedLock(name).withLock(async (_signal, token) => {
      expect(await c.getFencedLock(name).lock()).toBe(token);
      expect(await c.getFencedLock(name).getToken()).toBe(token);
      return token;
    });
    const second = await client().getFencedLock(name).withLock((_signal, token) => token);
    expect(second).toBeGreaterThan(first);
    expect(await topology.admin.exists(name)).toBe(0);
  });

  test('fencedSet under a keyPrefix with a hash tag: a data key with that tag is written; on a Cluster one without it is refused before Redis (it failed with CROSSSLOT)', async () => {
    const prefix = `{tenant${seq}}:`;
    const c = client({ keyPrefix: prefix });
    const lock = c.getFencedLock(uniqueName());
    const token = await lock.lock();
    expect(await lock.fencedSet(`${prefix}orders`, 'v', token)).toBe(true);
    const elsewhere = lock.fencedSet(`orders:${seq}`, 'v', token);
    if (topology.admin instanceof Cluster) await expect(elsewhere).rejects.toBeInstanceOf(InvalidArgumentError);
    else expect(await elsewhere).toBe(true); // one node: every key is in reach
    await lock.unlock();
  });

  test('a MultiLock over locks in different slots of one client: all or nothing', async () => {
    const c = client();
    const names = [uniqueName(), uniqueName(), uniqueName()];
    const other = client().getLock(names[2]!);
    await other.lock();
    const multi = new MultiLock(names.map((name) => c.getLock(name)));
    expect(await multi.tryLock()).toBe(false);
    expect(await topology.admin.exists(names[0]!)).toBe(0);
    await other.unlock();
    expect(await multi.tryLock({ waitTime: 5_000 })).toBe(true);
    for (const name of names) expect(await topology.admin.exists(name)).toBe(1);
    await multi.unlock();
    for (const name of names) expect(await topology.admin.exists(name)).toBe(0);
  });

  test('a MultiLock over locks of one slot of one client takes them in one all-or-nothing script call (family.md: same-slot members in one script); refused, it writes nothing', async () => {
    /** A command's calls on every master so far (scripts' inner calls included). */
    const calls = async (command: string): Promise<number> => {
      const nodes = topology.admin instanceof Cluster ? topology.admin.nodes('master') : [topology.admin];
      let sum = 0;
      for (const node of nodes) sum += Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(await node.info('commandstats'))?.[1] ?? 0);
      return sum;
    };
    const c = client();
    const tag = uniqueName();
    const names = ['a', 'b', 'c'].map((member) => `{${tag}}:${member}`); // one slot
    const multi = new MultiLock(names.map((name) => c.getLock(name)));
    expect(await multi.isLocked()).toBe(false); // connected
    const other = client().getLock(names[2]!);
    await other.lock();
    const [scriptsBefore, writesBefore] = [(await calls('evalsha')) + (await calls('eval')), await calls('hincrby')];
    expect(await multi.tryLock()).toBe(false);
    // One call, and no member written and given back (one script per member did both).
    expect((await calls('evalsha')) + (await calls('eval')) - scriptsBefore).toBe(1);
    expect((await calls('hincrby')) - writesBefore).toBe(0);
    await other.unlock();
    expect(await multi.tryLock({ waitTime: 5_000 })).toBe(true);
    for (const name of names) expect(await topology.admin.exists(name)).toBe(1);
    await multi.unlock();
    for (const name of names) expect(await topology.admin.exists(name)).toBe(0);
  });

  test('lock, reentrant withLock, hold counts, TTL, unlock', async () => {
    expect.assertions(7); // four of them in the callback: it must run
    const c = client();
    const name = uniqueName();
    const lock = c.getLock(name);
    await lock.withLock(async () => {
      const inner = c.getLock(name);
      await inner.lock();
      expect(await inner.getHoldCount()).toBe(2);
      expect(await inner.isHeldByCurrentOwner()).toBe(true);
      expect(await lock.remainTimeToLive()).toBeGreaterThan(25_000);
      await inner.unlock();
      expect(await inner.getHoldCount()).toBe(1);
    });
    expect(await lock.isLocked()).toBe(false);
    expect(await lock.isHeldByCurrentOwner()).toBe(false);
    expect(await topology.admin.exists(name)).toBe(0);
  });

  test('two clients exclude each other: a GET + SET counter loses no update', async () => {
    const name = uniqueName();
    const counter = `{${name}}:counter`;
    const work = async (c: LockClient): Promise<void> => {
      for (let i = 0; i < 15; i++) {
        await c.getLock(name).withLock(async () => {
          const value = Number((await topology.admin.get(counter)) ?? 0);
          await sleep(1); // between the read and the write: without the lock an update would be lost
          await topology.admin.set(counter, value + 1);
        });
      }
    };
    await Promise.all([work(client()), work(client()), work(client())]);
    expect(await topology.admin.get(counter)).toBe('45');
  });

  test('a waiter is woken by the release message, long before the pttl', async () => {
    const holder = client();
    const waiting = client();
    const name = uniqueName();
    const lock = holder.getLock(name);
    await lock.lock(); // 30 s lease
    let heldAt = 0;
    const waiter = waiting.getLock(name).withLock(() => {
      heldAt = performance.now();
    });
    await until('the waiter is parked and counted by inspect', async () => (await holder.inspect(name)).waitingClients === 1);
    const releasedAt = performance.now();
    await lock.unlock();
    await waiter;
    expect(heldAt - releasedAt).toBeLessThan(2000);
  });

  test('forceUnlock wakes a waiter at once', async () => {
    const holder = client();
    const waiting = client();
    const name = uniqueName();
    await holder.getLock(name).lock();
    const taking = waiting.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5000 });
    await until('the waiter parked', () => waiting.stats.waiters === 1);
    const start = performance.now();
    expect(await client().getLock(name).forceUnlock()).toBe(true);
    await expect(taking).resolves.toBe(true);
    expect(performance.now() - start).toBeLessThan(2000);
  });

  test('the watchdog keeps 30 locks on many slots past 2 leases (no CROSSSLOT), and stops after unlock', async () => {
    // Not shorter: a loaded machine can stall a renewal past most of a 600 ms lease.
    const c = client({ watchdogTimeout: 1_500 });
    const failed: unknown[] = [];
    c.on('renewalFailed', (error) => failed.push(error));
    const locks = Array.from({ length: 30 }, () => c.getLock(uniqueName()));
    await Promise.all(locks.map((lock) => lock.lock()));
    await sleep(3_100); // past two 1.5 s leases: only renewals keep them
    expect(failed).toEqual([]);
    for (const lock of locks) expect(await lock.isLocked()).toBe(true);
    await Promise.all(locks.map((lock) => lock.unlock()));
    expect(c.stats.renewals).toBe(0);
  });

  test('read-write locks on 40 names over many slots: readers share, writers exclude and are woken, the watchdog renews (no CROSSSLOT)', async () => {
    // A lease well above this shared machine's event-loop lag (a renewal must land within its tenth).
    const readers = client({ watchdogTimeout: 2_000 });
    const failed: unknown[] = [];
    readers.on('renewalFailed', (error) => failed.push(error));
    const writers = client();
    const names = Array.from({ length: 40 }, () => uniqueName());
    // allSettled: a failure for one name must not leave the others running into the next test.
    const outcomes = await Promise.allSettled(
      names.map(async (name) => {
        const read = readers.getReadWriteLock(name).readLock();
        await read.lock();
        expect(await readers.getReadWriteLock(name).readLock().tryLock({ leaseTime: 30_000 })).toBe(true);
        const write = writers.getReadWriteLock(name).writeLock();
        const writing = write.tryLock({ waitTime: 20_000 });
        writing.catch(() => undefined); // awaited below, unless an expectation fails first
        await sleep(2_500); // past the first lease: only renewals keep it
        expect(await read.getHoldCount()).toBe(1);
        await read.unlock();
        expect(await writers.getReadWriteLock(name).readLock().tryLock()).toBe(false); // the writer waits: newcomers wait behind it
        await readers.getReadWriteLock(name).readLock().forceUnlock();
        expect(await writing).toBe(true);
        const reading = readers.getReadWriteLock(name).readLock().tryLock({ waitTime: 20_000 });
        await write.unlock();
        expect(await reading).toBe(true);
      }),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
    expect(failed).toEqual([]);
  });

  test('semaphores and a latch (every key of one in one slot): waits woken by message, permits kept by the watchdog on many slots', async () => {
    const a = client({ watchdogTimeout: 1_500 }); // not shorter: see the 30 locks above
    const b = client();
    const name = uniqueName();
    const sem = a.getSemaphore(name);
    expect(await sem.trySetPermits(2)).toBe(true);
    await sem.acquire({ permits: 2 });
    const big = b.getSemaphore(name).tryAcquire({ permits: 2, waitTime: 20_000 });
    await until('the semaphore waiter parked', () => b.stats.waiters === 1);
    await sem.release({ permits: 2 });
    await expect(big).resolves.toBe(true);
    const failed: unknown[] = [];
    a.on('renewalFailed', (error) => failed.push(error));
    const expirables = Array.from({ length: 10 }, () => a.getPermitExpirableSemaphore(uniqueName()));
    await Promise.all(expirables.map((pes) => pes.trySetPermits(1)));
    const ids = await Promise.all(expirables.map((pes) => pes.acquire()));
    const latchName = uniqueName();
    const latch = b.getCountDownLatch(latchName);
    await latch.trySetCount(1);
    const opened = latch.await({ waitTime: 20_000 });
    await until('the latch awaiter parked', () => b.stats.waiters === 1);
    await sleep(3_100); // past 2 leases
    expect(failed).toEqual([]);
    for (const pes of expirables) expect(await pes.availablePermits()).toBe(0);
    await Promise.all(expirables.map((pes, i) => pes.release(ids[i]!)));
    expect(a.stats.renewals).toBe(0);
    await a.getCountDownLatch(latchName).countDown();
    await expect(opened).resolves.toBe(true);
  });

  test('inspect and listLocks see the locks', async () => {
    const c = client({ keyPrefix: `list${seq}:`, name: 'topo-client' });
    const names = ['a', 'b', 'c', 'd'];
    await Promise.all(names.map((name) => c.getLock(name).lock({ leaseTime: 30_000 })));
    const found: string[] = [];
    for await (const name of c.listLocks()) found.push(name);
    expect(found.sort()).toEqual(names);
    const info = await c.inspect('a');
    expect(info.holders).toEqual([expect.objectContaining({ clientId: c.id, holdCount: 1, clientName: 'topo-client' })]);
  });

  test('fair locks on many slots: served in arrival order, handed over by the grant message, queue keys in the lock slot', async () => {
    const holder = client();
    const waiters = [client({ queueTimeout: 900 }), client({ queueTimeout: 900 }), client({ queueTimeout: 900 })];
    for (let round = 0; round < 4; round++) {
      const name = uniqueName();
      const lock = holder.getFairLock(name);
      await lock.lock(); // 30 s lease: only a message can hand it over in time
      const order: number[] = [];
      const waiting: Promise<void>[] = [];
      for (const [i, waiter] of waiters.entries()) {
        waiting.push(
          waiter.getFairLock(name).withLock(async () => {
            order.push(i);
            await sleep(5); // the section's work
          }),
        );
        await until(`waiter ${i} is queued`, async () => (await lock.inspect()).queue?.length === i + 1);
      }
      // Past the 900 ms queue timeout: the heartbeats keep the entries (a grant's first lease is
      // 900 ms too, so the watchdog must extend it early on every topology).
      await sleep(1200);
      expect((await lock.inspect()).queue).toHaveLength(3);
      const releasedAt = performance.now();
      await lock.unlock();
      await Promise.all(waiting);
      expect(order).toEqual([0, 1, 2]);
      expect(performance.now() - releasedAt).toBeLessThan(5000);
    }
  }, 60_000);
});

