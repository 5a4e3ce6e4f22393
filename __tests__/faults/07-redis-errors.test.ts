// Fault 7: Redis answers with errors. Each surfaces as a typed RedisCommandError (or is recovered
// from), never as a hang or an unhandled rejection (the suite fails on one).
import { type LockClient, type LockHandle, RedisCommandError } from '../../src';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { RedisServer } from '../helpers/testRedis';
import { usePrivateRedis } from '../helpers/privateRedis';
import { until } from '../helpers/time';
import { outerEndsFirst } from '../helpers/scopes';
import { TcpProxy } from '../helpers/tcpProxy';
import { clientQueueKeyOf, permitsKeyOf, queueKeyOf, rwWritersKeyOf } from '../../src/names';

const redis = usePrivateRedis();

test('OOM (maxmemory 1, noeviction): acquire fails with code OOM, and works again after', async () => {
  const client = redis.client();
  const lock = client.getLock('errors:oom');
  await redis.admin.config('SET', 'maxmemory-policy', 'noeviction');
  await redis.admin.config('SET', 'maxmemory', '1');
  try {
    await expect(lock.tryLock()).rejects.toMatchObject({ name: 'RedisCommandError', code: 'OOM' });
    // A waiting lock() fails the same way instead of waiting forever.
    await expect(client.getLock('errors:oom:2').lock()).rejects.toBeInstanceOf(RedisCommandError);
    // Reads still answer.
    await expect(lock.isLocked()).resolves.toBe(false);
  } finally {
    await redis.admin.config('SET', 'maxmemory', '0');
  }
  await expect(lock.tryLock()).resolves.toBe(true);
  await lock.unlock();
});

test('OOM refusing a nested scope’s release after the outer scope ended: the last one out still gives back what is left (nothing stays held by the watchdog)', async () => {
  const client = redis.client();
  const name = 'errors:oom:nested';
  // The outer scope ends with the inner one inside and a lock() left behind: Redis counts 2.
  const { open, innerEnded } = await outerEndsFirst(client.getLock(name), client.getLock(name), () => client.getLock(name).lock());
  expect(await redis.admin.hvals(name)).toEqual(['2']);
  // The next script call (the inner scope's release) is written while Redis is out of memory;
  // the ones after it wait until Redis takes writes again.
  type Send = (command: { name: string; promise?: Promise<unknown> }, ...rest: unknown[]) => unknown;
  const connection = (client as unknown as { context: { redis: { sendCommand: Send } } }).context.redis;
  const send = connection.sendCommand;
  let writable!: () => void;
  const writesTaken = new Promise<void>((resolve) => (writable = resolve));
  const script = (command: { name: string }): boolean => command.name === 'evalsha' || command.name === 'eval';
  await redis.admin.config('SET', 'maxmemory-policy', 'noeviction');
  connection.sendCommand = function (this: unknown, command, ...rest) {
    if (!script(command)) return send.call(this, command, ...rest);
    connection.sendCommand = function (this: unknown, later, ...laterRest) {
      if (!script(later)) return send.call(this, later, ...laterRest);
      void writesTaken.then(() => send.call(this, later, ...laterRest));
      return later.promise;
    };
    void redis.admin
      .config('SET', 'maxmemory', '1')
      .then(() => {
        send.call(this, command, ...rest);
        return command.promise?.catch(() => undefined);
      })
      .then(() => redis.admin.config('SET', 'maxmemory', '0'))
      .then(() => {
        connection.sendCommand = send;
        writable();
      });
    return command.promise;
  };
  try {
    open();
    // Its own release refused: the scope is left all the same (were it left only after a release
    // that succeeded, its hold and the lock()'s would stay, renewed by the watchdog for good).
    await expect(innerEnded).rejects.toMatchObject({ name: 'RedisCommandError', code: 'OOM' });
  } finally {
    connection.sendCommand = send;
    await redis.admin.config('SET', 'maxmemory', '0');
  }
  await until('the lock is free', async () => (await redis.admin.exists(name)) === 0, 3_000);
  expect(client.stats.renewals).toBe(0);
});

test('READONLY: a client pointed at a replica gets code READONLY for writes; reads work', async () => {
  const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(redis.server.port)]);
  try {
    const probe = replica.connect();
    await until('the replica synced', async () => /master_link_status:up/.test(await probe.info('replication')));
    probe.disconnect();
    // A force-unlock rides READONLY out for offlineTimeout (a demoted master's), then fails.
    const client = redis.client({ redis: replica.url, offlineTimeout: 1000 });
    const lock = client.getLock('errors:readonly');
    await expect(lock.tryLock()).rejects.toMatchObject({ name: 'RedisCommandError', code: 'READONLY' });
    // A call that would wait forever rejects too, instead of retrying (READONLY is not transient).
    await expect(client.getLock('errors:readonly:waiting').lock()).rejects.toMatchObject({ name: 'RedisCommandError', code: 'READONLY' });
    expect(client.stats.waiters).toBe(0);
    // A lock the replica has (taken on its master) cannot be deleted there; with none, the
    // force-unlock script only reads and answers false.
    const holder = redis.client();
    await holder.getLock('errors:readonly:held').lock({ leaseTime: 10_000 });
    await until('the replica has the lock', () => client.getLock('errors:readonly:held').isLocked());
    await expect(client.getLock('errors:readonly:held').forceUnlock()).rejects.toMatchObject({ code: 'READONLY' });
    await expect(lock.forceUnlock()).resolves.toBe(false);
    await expect(lock.isLocked()).resolves.toBe(false);
    await expect(lock.remainTimeToLive()).resolves.toBe(-2);
    await client.close();
  } finally {
    await replica.stop();
  }
});

test('READONLY while a failover demotes the master under the client: a give-back (unlock, a semaphore’s or a permit’s release, a countDown) is sent again until the server takes writes, and runs once', async () => {
  const client = redis.client();
  const name = `errors:demoted:${process.pid}`;
  const lock = client.getLock(`${name}:lock`);
  const sem = client.getSemaphore(`${name}:sem`);
  const pes = client.getPermitExpirableSemaphore(`${name}:pes`);
  const latch = client.getCountDownLatch(`${name}:latch`);
  await lock.lock();
  await sem.trySetPermits(1);
  await sem.acquire();
  await pes.trySetPermits(1);
  const id = await pes.acquire();
  await latch.trySetCount(1);
  const refusals = async (): Promise<number> => Number(/errorstat_READONLY:count=(\d+)/.exec(await redis.admin.info('errorstats'))?.[1] ?? 0);
  const before = await refusals();
  // A replica of nothing (a closed port) keeps its data and refuses writes, as a demoted master
  // does until the client follows Sentinel's switch.
  await redis.admin.call('REPLICAOF', '127.0.0.1', '1');
  const giveBacks = Promise.allSettled([lock.unlock(), sem.release(), pes.release(id), latch.countDown()]);
  try {
    await until('each give-back was refused at least once', async () => (await refusals()) - before >= 4);
  } finally {
    await redis.admin.call('REPLICAOF', 'NO', 'ONE');
  }
  // Before, each rejected with READONLY: the lock stayed taken for its lease, the permit and the count for good.
  expect((await giveBacks).map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
  expect(await lock.isLocked()).toBe(false);
  expect(await sem.availablePermits()).toBe(1);
  expect(await pes.availablePermits()).toBe(1);
  expect(await latch.getCount()).toBe(0);
});

test('MASTERDOWN: a replica cut off from its master refuses every call; a waiter rides it out (transient) and takes the lock once the replica is promoted', async () => {
  const master = await RedisServer.start();
  const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(master.port), '--replica-serve-stale-data', 'no']);
  try {
    const probe = replica.connect();
    await until('the replica synced', async () => /master_link_status:up/.test(await probe.info('replication')));
    await master.stop();
    await until('the replica lost its master', async () => /master_link_status:down/.test(await probe.info('replication')));
    const client = redis.client({ redis: replica.url });
    const single = await client.getLock('errors:masterdown').tryLock().catch((error: unknown) => error);
    expect(single).toMatchObject({ name: 'RedisCommandError', code: 'MASTERDOWN', transient: true });
    const waiting = client.getLock('errors:masterdown').tryLock({ waitTime: 10_000 });
    // The waiter retries every 200 ms meanwhile (each refusal is transient), then the replica becomes a master.
    const refusals = async (): Promise<number> => {
      let n = 0;
      for (const [, rejected, failed] of (await probe.info('commandstats')).matchAll(/^cmdstat_eval(?:sha)?:.*rejected_calls=(\d+),failed_calls=(\d+)/gm)) n += Number(rejected) + Number(failed);
      return n;
    };
    await until('the waiter was refused at least twice more', async () => (await refusals()) >= 3);
    await probe.call('REPLICAOF', 'NO', 'ONE');
    await expect(waiting).resolves.toBe(true);
    probe.disconnect();
  } finally {
    await replica.stop();
    await master.stop().catch(() => undefined);
  }
});

test('NOSCRIPT after SCRIPT FLUSH: recovered from, the calls succeed', async () => {
  const client = redis.client();
  const lock = client.getLock('errors:noscript');
  await lock.lock({ leaseTime: 10_000 });
  await redis.admin.script('FLUSH');
  await lock.unlock();
  expect(await redis.admin.exists('errors:noscript')).toBe(0);
  await redis.admin.script('FLUSH');
  await expect(lock.tryLock({ leaseTime: 10_000 })).resolves.toBe(true);
  await redis.admin.script('FLUSH');
  await expect(lock.forceUnlock()).resolves.toBe(true);
});

test('WRONGTYPE: a name already used by another kind of key fails with code WRONGTYPE', async () => {
  const client = redis.client();
  await redis.admin.set('errors:wrongtype', 'not a lock');
  const lock = client.getLock('errors:wrongtype');
  await expect(lock.tryLock()).rejects.toMatchObject({ name: 'RedisCommandError', code: 'WRONGTYPE' });
  await expect(lock.lock()).rejects.toMatchObject({ code: 'WRONGTYPE' });
  await expect(lock.getHoldCount()).rejects.toMatchObject({ code: 'WRONGTYPE' });
  expect(await redis.admin.get('errors:wrongtype')).toBe('not a lock');
  expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
});

test.each(heldKindNames)('WRONGTYPE, %s: a name already used by another kind of key fails with code WRONGTYPE, writes nothing, and leaves no waiter', async (kind) => {
  const client = redis.client();
  const name = `errors:wrongtype-${kind}`;
  // A list: no primitive keeps one, so every one of them meets the wrong type.
  await redis.admin.rpush(name, 'not a lock');
  const { tryTake } = heldKinds[kind];
  await expect(tryTake(client, name)).rejects.toMatchObject({ name: 'RedisCommandError', code: 'WRONGTYPE' });
  // Not a refusal to wait out: a wait ends with it at once.
  await expect(tryTake(client, name, 5_000)).rejects.toMatchObject({ code: 'WRONGTYPE' });
  expect(await redis.admin.lrange(name, 0, -1)).toEqual(['not a lock']);
  // No key of its own beside it (a queue, a kind marker, a latch, a lease set): nothing half done.
  expect(await redis.admin.keys(`*${name}*`)).toEqual([name]);
  expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
});

test('WRONGTYPE, latch: await and countDown fail with code WRONGTYPE and write nothing', async () => {
  const client = redis.client();
  const name = 'errors:wrongtype-latch';
  await redis.admin.rpush(name, 'not a latch');
  const latch = client.getCountDownLatch(name);
  await expect(latch.await({ waitTime: 5_000 })).rejects.toMatchObject({ name: 'RedisCommandError', code: 'WRONGTYPE' });
  await expect(latch.countDown()).rejects.toMatchObject({ code: 'WRONGTYPE' });
  expect(await redis.admin.lrange(name, 0, -1)).toEqual(['not a latch']);
  expect(await redis.admin.keys(`*${name}*`)).toEqual([name]);
  expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
});

test('WRONGTYPE in a watchdog batch: a hold whose name now holds another type is reported lost alone; the others of its batch are renewed on', async () => {
  const client = redis.client({ watchdogTimeout: 600 });
  const lost: string[] = [];
  client.on('lockLost', (event) => lost.push(`${event.name}: ${event.error.message}`));
  const names = ['batch:1', 'batch:2', 'batch:3', 'batch:reused'];
  await Promise.all(names.map((name) => client.getLock(name).lock()));
  // Taken away and the name reused by a semaphore (a string): Redis refuses HEXISTS on it.
  await redis.client().getLock('batch:reused').forceUnlock();
  await redis.client().getSemaphore('batch:reused').trySetPermits(3);
  await until('the reused name is reported lost', () => lost.length > 0);
  const before = await Promise.all(names.slice(0, 3).map((name) => redis.admin.pexpiretime(name)));
  await until('the others are renewed again', async () => {
    const now = await Promise.all(names.slice(0, 3).map((name) => redis.admin.pexpiretime(name)));
    return now.every((at, i) => at > before[i]!);
  });
  expect(lost).toEqual(['batch:reused: lock "batch:reused" was lost: the watchdog found it no longer held by its owner']);
  for (const name of names.slice(0, 3)) expect(await client.getLock(name).isLocked()).toBe(true);
});

test('READONLY while a failover demotes the master: a fair waiter’s, a waiting writer’s and a waiting client’s leave, a local permit handover and a force-unlock are sent again until the server takes writes', async () => {
  const holder = redis.client();
  const waiting = redis.client();
  const name = `errors:demoted:leave:${process.pid}`;
  const fair = `${name}:fair`;
  const rw = `${name}:rw`;
  const plain = `${name}:plain`;
  const forced = `${name}:forced`;
  await holder.getFairLock(fair).lock();
  await holder.getReadWriteLock(rw).readLock().lock();
  await holder.getLock(plain).lock();
  await holder.getLock(forced).lock();
  const pes = holder.getPermitExpirableSemaphore(`${name}:pes`);
  await pes.trySetPermits(1);
  const id = await pes.acquire();
  const stop = new AbortController();
  const waits = [waiting.getFairLock(fair), waiting.getReadWriteLock(rw).writeLock(), waiting.getLock(plain)].map((lock) => lock.tryLock({ waitTime: 60_000, signal: stop.signal }).catch(() => 'stopped'));
  // A waiter of the releasing client: the release hands the permit over to it (handoff-3.lua).
  const handedTo = pes.acquire();
  await until('every waiter parked and in line', async () => waiting.stats.waiters === 3 && holder.stats.waiters === 1 && (await redis.admin.zcard(queueKeyOf('', fair))) === 1 && (await redis.admin.zcard(rwWritersKeyOf('', rw))) === 1 && (await redis.admin.zcard(clientQueueKeyOf('', plain))) === 1);
  const refusals = async (): Promise<number> => Number(/errorstat_READONLY:count=(\d+)/.exec(await redis.admin.info('errorstats'))?.[1] ?? 0);
  const before = await refusals();
  await redis.admin.call('REPLICAOF', '127.0.0.1', '1');
  let calls: Promise<PromiseSettledResult<unknown>[]>;
  try {
    stop.abort();
    expect(await Promise.all(waits)).toEqual(['stopped', 'stopped', 'stopped']);
    calls = Promise.allSettled([holder.getLock(forced).forceUnlock(), pes.release(id)]);
    await until('each give-back was refused at least once', async () => (await refusals()) - before >= 5);
    await new Promise((resolve) => setTimeout(resolve, 500));
  } finally {
    await redis.admin.call('REPLICAOF', 'NO', 'ONE');
  }
  // Before, each failed with READONLY: the force-unlock to the admin, the release to its caller,
  // and the leaves
  // silently: the queue entries stayed until queueTimeout, the next fair waiter's grant went to
  // the departed one, the writer's entry kept new readers out.
  expect((await calls).map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : (outcome.reason as Error).message))).toEqual([true, undefined]);
  expect(await holder.getLock(forced).isLocked()).toBe(false);
  // The waiter, pipelined, held the permit from the handoff's send: it is in Redis now (before:
  // Redis never had it, and the released one stayed held until its lease ran out).
  const handed = await handedTo;
  expect(await redis.admin.zscore(permitsKeyOf('', `${name}:pes`), handed)).not.toBeNull();
  expect(await redis.admin.zscore(permitsKeyOf('', `${name}:pes`), id)).toBeNull();
  await until('the leaves ran', async () => (await redis.admin.zcard(queueKeyOf('', fair))) + (await redis.admin.zcard(rwWritersKeyOf('', rw))) + (await redis.admin.zcard(clientQueueKeyOf('', plain))) === 0, 3000);
});

/** A fair waiter's line and a waiting writer's, each with its holder, for the leave tests below. */
const lines: [string, (client: LockClient, name: string) => LockHandle & { withLock<T>(fn: () => Promise<T>): Promise<T> }, (name: string) => string, (client: LockClient, name: string) => LockHandle][] = [
  ['fair', (client, name) => client.getFairLock(name), (name) => queueKeyOf('', name), (client, name) => client.getFairLock(name)],
  ['write', (client, name) => client.getReadWriteLock(name).writeLock(), (name) => rwWritersKeyOf('', name), (client, name) => client.getReadWriteLock(name).readLock()],
];

test.each(lines)('READONLY while a %s waiter’s leave is sent again, and its owner (one withLock scope) waits again meanwhile: the old leave is not sent once writes are taken; the newer wait keeps its entry and gets the lock', async (_kind, handle, lineOf, holderOf) => {
  const holder = redis.client();
  const waiting = redis.client();
  const name = `errors:demoted:rewait:${_kind}:${process.pid}`;
  const line = lineOf(name);
  const held = holderOf(holder, name);
  const refusals = async (): Promise<number> => Number(/errorstat_READONLY:count=(\d+)/.exec(await redis.admin.info('errorstats'))?.[1] ?? 0);
  await handle(waiting, name).withLock(async () => {
    // The scope gives its own hold back; another client takes the lock.
    await handle(waiting, name).unlock();
    await held.lock();
    // The scope's owner waits in line; its wait ends while Redis refuses writes.
    const stop = new AbortController();
    const first = handle(waiting, name)
      .tryLock({ waitTime: 60_000, signal: stop.signal })
      .catch(() => 'stopped');
    await until('the waiter is in line', async () => waiting.stats.waiters === 1 && (await redis.admin.zcard(line)) === 1);
    const before = await refusals();
    await redis.admin.call('REPLICAOF', '127.0.0.1', '1');
    try {
      stop.abort();
      expect(await first).toBe('stopped');
      await until('its leave was refused and sent again', async () => (await refusals()) - before >= 2);
      // Just after a refusal (the next resend comes TRANSIENT_RETRY_MS later): writes are taken
      // again and the same owner waits again, its entry written before that resend.
      const last = await refusals();
      await until('a resend was just refused', async () => (await refusals()) > last);
    } finally {
      await redis.admin.call('REPLICAOF', 'NO', 'ONE');
    }
    const second = handle(waiting, name).tryLock({ waitTime: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 500)); // past two resends
    // Were the old leave sent once writes are taken, it would take out the newer wait's entry: the
    // fair waiter out of line until its heartbeat put it back, at the end. (A writer's leave
    // wakes a parked writer of its client when none is left in line, leave-4.lua: the newer wait
    // queues again at once, so there it does less harm.)
    expect(await redis.admin.zcard(line)).toBe(1);
    await held.unlock();
    expect(await second).toBeTruthy();
  });
  expect(await redis.admin.exists(name)).toBe(0);
});

test('a force-unlock whose reply a dropped connection lost, resent after the reconnect and refused with READONLY: not sent again once writes are taken (its first run may have gone; a second would remove the owner who took the lock since)', async () => {
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const admin = redis.client({ redis: proxy.url });
    const name = `errors:demoted:forced-resent:${process.pid}`;
    const first = redis.client().getLock(name);
    await first.lock();
    // Connected (and its scripts known) before the cut: a force-unlock of another lock.
    await admin.getLock(`${name}:warm`).forceUnlock();
    const cuts = proxy.cuts;
    // The force-unlock runs; its reply is cut, and the client cannot reconnect for now.
    proxy.cutOnNextReply();
    proxy.stopAccepting();
    const forcing = admin.getLock(name).forceUnlock();
    forcing.catch(() => undefined);
    await until('its first run went and its reply was cut', async () => proxy.cuts > cuts && (await redis.admin.exists(name)) === 0);
    // Another owner takes the lock; then Redis refuses writes, and the client reconnects and resends.
    const next = redis.client().getLock(name);
    await next.lock();
    const refusals = async (): Promise<number> => Number(/errorstat_READONLY:count=(\d+)/.exec(await redis.admin.info('errorstats'))?.[1] ?? 0);
    const before = await refusals();
    await redis.admin.call('REPLICAOF', '127.0.0.1', '1');
    try {
      await proxy.resumeAccepting();
      await until('the resend was refused', async () => (await refusals()) > before);
      await new Promise((resolve) => setTimeout(resolve, 500)); // past two resend pauses
    } finally {
      await redis.admin.call('REPLICAOF', 'NO', 'ONE');
    }
    await expect(forcing).rejects.toMatchObject({ name: 'RedisCommandError', code: 'READONLY' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await next.isHeldByCurrentOwner()).toBe(true);
    await next.unlock();
  } finally {
    await proxy.close();
  }
});
