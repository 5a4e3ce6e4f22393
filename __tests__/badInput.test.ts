// Bad input, everywhere: every public call gets wrong types and values and must answer with a
// typed error that names the argument, before a single command reaches Redis.
import type { Redis } from 'ioredis';
import { ClientClosedError, InvalidArgumentError, LockClient, LockError, MultiLock, RedLock, type RLock } from '../src';
import { commandCounts, RedisServer } from './helpers/testRedis';

let server: RedisServer;
let admin: Redis;
let client: LockClient;
let lock: RLock;

beforeAll(async () => {
  server = await RedisServer.start();
  admin = server.connect();
  client = new LockClient({ redis: server.url });
  lock = client.getLock('bad-input');
  await lock.isLocked(); // connect first, so that connecting is not counted below
});

afterAll(async () => {
  await client.close();
  await admin.quit();
  await server.stop();
});

/** Runs `call` and returns what it threw or rejected with, and the commands Redis ran meanwhile. */
async function attempt(call: () => unknown): Promise<{ error: unknown; commands: Record<string, number> }> {
  const before = await commandCounts(admin);
  let error: unknown;
  try {
    const made = await call();
    if (made instanceof LockClient) await made.close(); // it should not exist; do not let it leak
  } catch (caught) {
    error = caught;
  }
  const after = await commandCounts(admin);
  const commands: Record<string, number> = {};
  for (const [name, calls] of Object.entries(after)) {
    if (name !== 'info' && calls !== (before[name] ?? 0)) commands[name] = calls - (before[name] ?? 0);
  }
  return { error, commands };
}

const badNames: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['NaN', NaN],
  ['a number', 42],
  ['an object', { name: 'x' }],
  ['an array', ['x']],
  ['a symbol', Symbol('x')],
  ['empty', ''],
  // The library's own keys: a lock by that name could be another lock's queue or fence.
  ['one of the library\'s own keys', 'rlock__queue:{invoices}'],
  // ... and those of a client with the key prefix "app:" (a helper audit: this deleted semaphore s's kind marker).
  ['one of the library\'s own keys under a prefix', 'app:rlock__kind:{app:s}'],
  ['over 1 KiB', 'x'.repeat(1025)],
  ['over 1 KiB in UTF-8', 'é'.repeat(513)],
];

const badTimes: [string, unknown][] = [
  ['null', null],
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['negative', -1],
  ['fractional', 1.5],
  ['huge', 2 ** 40],
  ['a string', '100'],
  ['a bigint', 100n],
  ['an object', { ms: 100 }],
];

const badSignals: [string, unknown][] = [
  ['null', null],
  ['an object', {}],
  ['a controller', new AbortController()],
  ['a string', 'abort'],
];

const badOptionBags: [string, unknown][] = [
  ['null', null],
  ['a number', 5],
  ['a string', 'leaseTime=5'],
  ['an array', [5]],
  ['a misspelt key', { leaseTme: 5 }],
  // No keys of their own, so they passed as "no options": lock(signal) took the lock deaf to the signal.
  ['an AbortSignal', AbortSignal.abort()],
  ['a Date', new Date()],
  ['a Map', new Map([['leaseTime', 5]])],
];

type Case = [call: string, value: string, argument: string, run: () => unknown];

const cases: Case[] = [
  ...badNames.map(([label, name]): Case => ['getLock', label, 'name', () => client.getLock(name as string)]),
  ...(['lock', 'tryLock', 'withLock', 'hold'] as const).flatMap((method): Case[] => {
    const call = (options: unknown): unknown =>
      method === 'withLock' ? lock.withLock(() => 1, options as never) : lock[method](options as never);
    return [
      ...badOptionBags.map(([label, options]): Case => [method, `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => call(options)]),
      ...badTimes.map(([label, value]): Case => [method, `leaseTime ${label}`, 'options.leaseTime', () => call({ leaseTime: value })]),
      [method, 'leaseTime 0', 'options.leaseTime', () => call({ leaseTime: 0 })],
      ...badSignals.map(([label, value]): Case => [method, `signal ${label}`, 'options.signal', () => call({ signal: value })]),
      ...(method === 'lock'
        ? [[method, 'a waitTime (lock() waits as long as it takes)', 'options.waitTime', () => call({ waitTime: 100 })] as Case]
        : badTimes.map(([label, value]): Case => [method, `waitTime ${label}`, 'options.waitTime', () => call({ waitTime: value, leaseTime: 1000 })])),
    ];
  }),
  ...([undefined, null, 'fn', 42, {}] as unknown[]).map((fn): Case => ['withLock', `fn ${String(fn)}`, 'fn', () => lock.withLock(fn as never)]),
  ...badNames.flatMap(([label, name]): Case[] => [
    ['getSemaphore', label, 'name', () => client.getSemaphore(name as string)],
    ['getPermitExpirableSemaphore', label, 'name', () => client.getPermitExpirableSemaphore(name as string)],
    ['getCountDownLatch', label, 'name', () => client.getCountDownLatch(name as string)],
  ]),
  ...semaphoreCases(),
  ...badNames.map(([label, name]): Case => ['getFairLock', label, 'name', () => client.getFairLock(name as string)]),
  ...badTimes.map(([label, value]): Case => ['FairLock.tryLock', `waitTime ${label}`, 'options.waitTime', () => client.getFairLock('fair').tryLock({ waitTime: value as number })]),
  ...badTimes.map(([label, value]): Case => ['FairLock.lock', `leaseTime ${label}`, 'options.leaseTime', () => client.getFairLock('fair').lock({ leaseTime: value as number })]),
  ...badSignals.map(([label, value]): Case => ['FairLock.lock', `signal ${label}`, 'options.signal', () => client.getFairLock('fair').lock({ signal: value as never })]),
  ...badNames.map(([label, name]): Case => ['getFencedLock', label, 'name', () => client.getFencedLock(name as string)]),
  ...([undefined, null, 'fn', 42] as unknown[]).map((fn): Case => ['FencedLock.withLock', `fn ${String(fn)}`, 'fn', () => client.getFencedLock('f').withLock(fn as never)]),
  ...badTimes.map(([label, value]): Case => ['FencedLock.tryLock', `waitTime ${label}`, 'options.waitTime', () => client.getFencedLock('f').tryLock({ waitTime: value as number })]),
  // An empty holder would mean "whoever holds it": the check must be refused, not dropped.
  ...(['', undefined, null, 42, 'a b', 'x:y:z', {}] as unknown[]).map((holder): Case => ['forceUnlockIfHolder', `holder ${JSON.stringify(holder)}`, 'holder', () => lock.forceUnlockIfHolder(holder as string)]),
  ...badNames.map(([label, name]): Case => ['client.inspect', label, 'name', () => client.inspect(name as string)]),
  ['FencedLock.fencedSet', 'dataKey empty', 'dataKey', () => client.getFencedLock('f').fencedSet('', 'v', 1n)],
  // Written as a string, the lock's own hash was gone for good: every call on it failed with WRONGTYPE.
  ['FencedLock.fencedSet', "dataKey the lock's own key", 'dataKey', () => client.getFencedLock('f').fencedSet('f', 'v', 1n)],
  ['FencedLock.fencedSet', "dataKey one of the library's keys", 'dataKey', () => client.getFencedLock('f').fencedSet('rlock__fence:{g}', '1', 1n)],
  ['FencedLock.fencedSet', 'value a number', 'value', () => client.getFencedLock('f').fencedSet('k', 5 as never, 1n)],
  // 10n ** 40n: no lock mints one; accepted, it fenced the key against every real token for good.
  ...([5, '5', 0n, -1n, undefined, 2n ** 63n, 10n ** 40n] as unknown[]).map((token): Case => ['FencedLock.fencedSet', `token ${String(token)}`, 'token', () => client.getFencedLock('f').fencedSet('k', 'v', token as bigint)]),
  ...([MultiLock, RedLock] as const).flatMap((Kind): Case[] => [
    ...([undefined, null, 'x', {}, []] as unknown[]).map((locks): Case => [Kind.name, `locks ${JSON.stringify(locks)}`, 'locks', () => new Kind(locks as never)]),
    [Kind.name, 'a member not a lock handle', 'locks[1]', () => new Kind([lock, {} as never])],
    // eslint-disable-next-line no-sparse-arrays
    [Kind.name, 'a hole in a sparse array', 'locks[1]', () => new Kind([lock, , client.getLock('bad-input-2')] as never)],
    [Kind.name, 'a fenced lock as member', 'locks[0]', () => new Kind([client.getFencedLock('f') as never])],
    [Kind.name, 'the same lock of one client twice', 'locks[1]', () => new Kind([lock, client.getLock('bad-input')])],
    ...badTimes.map(([label, value]): Case => [`${Kind.name}.tryLock`, `waitTime ${label}`, 'options.waitTime', () => new Kind([lock]).tryLock({ waitTime: value as number })]),
    ...badTimes.map(([label, value]): Case => [`${Kind.name}.lock`, `leaseTime ${label}`, 'options.leaseTime', () => new Kind([lock]).lock({ leaseTime: value as number })]),
    ...([undefined, 'fn'] as unknown[]).map((fn): Case => [`${Kind.name}.withLock`, `fn ${String(fn)}`, 'fn', () => new Kind([lock]).withLock(fn as never)]),
  ]),
  ['RedLock', 'options a number', 'options', () => new RedLock([lock], 5 as never)],
  ['RedLock', 'options an AbortSignal', 'options', () => new RedLock([lock], AbortSignal.abort() as never)],
  ...badOptionBags.map(([label, options]): Case => ['MultiLock.tryLock', `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => new MultiLock([lock]).tryLock(options as never)]),
  ...badOptionBags.map(([label, options]): Case => ['PermitExpirableSemaphore.tryAcquire', `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => client.getPermitExpirableSemaphore('bad-input-pes').tryAcquire(options as never)]),
  ...badOptionBags.map(([label, options]): Case => ['CountDownLatch.await', `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => client.getCountDownLatch('bad-input-latch').await(options as never)]),
  ['LockClient', 'keyPrefix holding rlock__', 'options.keyPrefix', () => new LockClient({ redis: server.url, keyPrefix: 'x:rlock__' })],
  ['RedLock.lock', 'leaseTime within the drift (never valid: it looped for good)', 'options.leaseTime', () => new RedLock([lock]).lock({ leaseTime: 2 })],
  ['RedLock', 'a misspelt option', 'options.attemptTimout', () => new RedLock([lock], { attemptTimout: 5 } as never)],
  ...badTimes.map(([label, value]): Case => ['RedLock', `attemptTimeout ${label}`, 'options.attemptTimeout', () => new RedLock([lock], { attemptTimeout: value as number })]),
  ['RedLock', 'attemptTimeout 0', 'options.attemptTimeout', () => new RedLock([lock], { attemptTimeout: 0 })],
  ['RedLock', 'retryDelay negative', 'options.retryDelay', () => new RedLock([lock], { retryDelay: -1 })],
  ...([NaN, -0.1, 0.5, '0.01'] as unknown[]).map((value): Case => ['RedLock', `driftFactor ${String(value)}`, 'options.driftFactor', () => new RedLock([lock], { driftFactor: value as number })]),
  // The read-write lock's handles share the checks: a sample of each kind on both.
  ...badNames.map(([label, name]): Case => ['getReadWriteLock', label, 'name', () => client.getReadWriteLock(name as string)]),
  ...(['readLock', 'writeLock'] as const).flatMap((half): Case[] => {
    const handle = (): ReturnType<ReturnType<LockClient['getReadWriteLock']>[typeof half]> => client.getReadWriteLock('bad-input-rw')[half]();
    return [
      ...badTimes.map(([label, value]): Case => [`${half}().tryLock`, `leaseTime ${label}`, 'options.leaseTime', () => handle().tryLock({ leaseTime: value as number })]),
      ...badTimes.map(([label, value]): Case => [`${half}().withLock`, `waitTime ${label}`, 'options.waitTime', () => handle().withLock(() => 1, { waitTime: value as number })]),
      ...badSignals.map(([label, value]): Case => [`${half}().lock`, `signal ${label}`, 'options.signal', () => handle().lock({ signal: value as AbortSignal })]),
      ...badOptionBags.map(([label, options]): Case => [`${half}().lock`, `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => handle().lock(options as never)]),
      [`${half}().withLock`, 'fn null', 'fn', () => handle().withLock(null as never)],
    ];
  }),
  ['LockClient', 'no options', 'options', () => new LockClient(undefined as never)],
  ['LockClient', 'null options', 'options', () => new LockClient(null as never)],
  ['LockClient', 'no redis', 'options.redis', () => new LockClient({} as never)],
  ['LockClient', 'redis a number', 'options.redis', () => new LockClient({ redis: 6379 as never })],
  ['LockClient', 'redis an http URL', 'options.redis', () => new LockClient({ redis: 'http://127.0.0.1' })],
  ['LockClient', 'redis a Map', 'options.redis', () => new LockClient({ redis: new Map([['port', server.port]]) as never })],
  ['LockClient', 'redis an http URL object', 'options.redis', () => new LockClient({ redis: new URL('http://127.0.0.1') as never })],
  // ioredis's own TypeError for these carries the whole URL, password and all.
  ['LockClient', 'redis a URL with a bad port', 'options.redis', () => new LockClient({ redis: 'redis://:s3cret@127.0.0.1:63a79' })],
  ['LockClient', 'redis an ioredis keyPrefix', 'options.redis.keyPrefix', () => new LockClient({ redis: { keyPrefix: 'x:' } })],
  // ioredis ignores them and connects to localhost:6379, where another set of locks may live.
  ...(['prot', 'hots', 'Port', 'pasword', 'comandTimeout'] as const).map((key): Case => ['LockClient', `redis a misspelt ioredis option ${key}`, `options.redis.${key}`, () => new LockClient({ redis: { [key]: 1 } as never })]),
  // ioredis reads these as database NaN or -1: it skipped the SELECT on connect, and its later
  // SELECT NaN was an unhandled rejection (the process crashed) while the calls ran in database 0.
  ['LockClient', 'redis a URL whose database is not a number', 'options.redis.db', () => new LockClient({ redis: `${server.url}/abc` })],
  ['LockClient', 'redis db NaN', 'options.redis.db', () => new LockClient({ redis: { port: server.port, db: NaN } })],
  ['LockClient', 'redis db negative', 'options.redis.db', () => new LockClient({ redis: { port: server.port, db: -1 } })],
  // Beyond Redis's int: only the SELECT sent after connecting refused it.
  ['LockClient', 'redis a URL whose database is beyond an int', 'options.redis.db', () => new LockClient({ redis: `${server.url}/99999999999` })],
  ['LockClient', 'redis db 2 ** 31', 'options.redis.db', () => new LockClient({ redis: { port: server.port, db: 2 ** 31 } })],
  ...badTimes.map(([label, value]): Case => ['LockClient', `watchdogTimeout ${label}`, 'options.watchdogTimeout', () => new LockClient({ redis: server.url, watchdogTimeout: value as number })]),
  ...badTimes.map(([label, value]): Case => ['LockClient', `offlineTimeout ${label}`, 'options.offlineTimeout', () => new LockClient({ redis: server.url, offlineTimeout: value as number })]),
  ...badTimes.map(([label, value]): Case => ['LockClient', `queueTimeout ${label}`, 'options.queueTimeout', () => new LockClient({ redis: server.url, queueTimeout: value as number })]),
  ['LockClient', 'queueTimeout below 300 ms', 'options.queueTimeout', () => new LockClient({ redis: server.url, queueTimeout: 100 })],
  ['LockClient', 'watchdogTimeout below 30 ms', 'options.watchdogTimeout', () => new LockClient({ redis: server.url, watchdogTimeout: 10 })],
  ['LockClient', 'keyPrefix a number', 'options.keyPrefix', () => new LockClient({ redis: server.url, keyPrefix: 5 as never })],
  ['LockClient', 'keyPrefix over 1 KiB', 'options.keyPrefix', () => new LockClient({ redis: server.url, keyPrefix: 'p'.repeat(1025) })],
  ['LockClient', 'clusterNodes empty', 'options.redis.clusterNodes', () => new LockClient({ redis: { clusterNodes: [] } })],
  ['LockClient', 'name empty', 'options.name', () => new LockClient({ redis: server.url, name: '' })],
  ['LockClient', 'name a number', 'options.name', () => new LockClient({ redis: server.url, name: 7 as never })],
  ['LockClient', 'syncReplicas a number', 'options.syncReplicas', () => new LockClient({ redis: server.url, syncReplicas: 1 as never })],
  ['LockClient', 'syncReplicas.replicas 0', 'options.syncReplicas.replicas', () => new LockClient({ redis: server.url, syncReplicas: { replicas: 0, timeout: 100 } })],
  ['LockClient', 'syncReplicas without timeout', 'options.syncReplicas.timeout', () => new LockClient({ redis: server.url, syncReplicas: { replicas: 1 } as never })],
  ['LockClient', 'a misspelt option', 'options.watchdogTimout', () => new LockClient({ redis: server.url, watchdogTimout: 5000 } as never)],
];

/** Bad permit counts, lease and wait times, signals and option bags for the semaphores and the latch. */
function semaphoreCases(): Case[] {
  const sem = (): ReturnType<LockClient['getSemaphore']> => client.getSemaphore('bad-input-sem');
  const pes = (): ReturnType<LockClient['getPermitExpirableSemaphore']> => client.getPermitExpirableSemaphore('bad-input-pes');
  const latch = (): ReturnType<LockClient['getCountDownLatch']> => client.getCountDownLatch('bad-input-latch');
  const badCounts: [string, unknown][] = [['undefined', undefined], ['NaN', NaN], ['fractional', 1.5], ['a string', '3'], ['huge', 2 ** 40], ['Infinity', Infinity]];
  const semaphoreCalls: [string, (options: unknown) => unknown][] = [
    ['Semaphore.acquire', (o) => sem().acquire(o as never)],
    ['Semaphore.tryAcquire', (o) => sem().tryAcquire(o as never)],
    ['Semaphore.withPermits', (o) => sem().withPermits(() => 1, o as never)],
  ];
  return [
    ...badCounts.map(([label, value]): Case => ['Semaphore.trySetPermits', label, 'permits', () => sem().trySetPermits(value as number)]),
    ['Semaphore.trySetPermits', 'negative', 'permits', () => sem().trySetPermits(-1)],
    ...badCounts.map(([label, value]): Case => ['Semaphore.addPermits', label, 'delta', () => sem().addPermits(value as number)]),
    ...badCounts.map(([label, value]): Case => ['PermitExpirableSemaphore.trySetPermits', label, 'permits', () => pes().trySetPermits(value as number)]),
    ...badCounts.map(([label, value]): Case => ['CountDownLatch.trySetCount', label, 'count', () => latch().trySetCount(value as number)]),
    ['CountDownLatch.trySetCount', '0', 'count', () => latch().trySetCount(0)],
    ...semaphoreCalls.flatMap(([call, run]): Case[] => [
      ...badOptionBags.map(([label, options]): Case => [call, `options ${label}`, label === 'a misspelt key' ? 'options.leaseTme' : 'options', () => run(options)]),
      ...badCounts.filter(([label]) => label !== 'undefined').map(([label, value]): Case => [call, `permits ${label}`, 'options.permits', () => run({ permits: value })]),
      [call, 'permits 0', 'options.permits', () => run({ permits: 0 })],
      ...badSignals.map(([label, value]): Case => [call, `signal ${label}`, 'options.signal', () => run({ signal: value })]),
    ]),
    ['Semaphore.acquire', 'a waitTime', 'options.waitTime', () => sem().acquire({ waitTime: 5 } as never)],
    ['Semaphore.release', 'permits -1', 'options.permits', () => sem().release({ permits: -1 })],
    ['Semaphore.release', 'a signal', 'options.signal', () => sem().release({ signal: new AbortController().signal } as never)],
    ...badTimes.map(([label, value]): Case => ['Semaphore.tryAcquire', `waitTime ${label}`, 'options.waitTime', () => sem().tryAcquire({ waitTime: value as number })]),
    ...badTimes.map(([label, value]): Case => ['PermitExpirableSemaphore.tryAcquire', `leaseTime ${label}`, 'options.leaseTime', () => pes().tryAcquire({ leaseTime: value as number })]),
    ['PermitExpirableSemaphore.acquire', 'leaseTime 0', 'options.leaseTime', () => pes().acquire({ leaseTime: 0 })],
    ['PermitExpirableSemaphore.acquire', 'permits', 'options.permits', () => pes().acquire({ permits: 2 } as never)],
    ...badTimes.map(([label, value]): Case => ['PermitExpirableSemaphore.withPermit', `waitTime ${label}`, 'options.waitTime', () => pes().withPermit(() => 1, { waitTime: value as number })]),
    ...([undefined, null, 42, '', 'x'.repeat(65)] as unknown[]).flatMap((id): Case[] => [
      ['PermitExpirableSemaphore.release', `id ${describeId(id)}`, 'permitId', () => pes().release(id as string)],
      ['PermitExpirableSemaphore.tryRelease', `id ${describeId(id)}`, 'permitId', () => pes().tryRelease(id as string)],
      ['PermitExpirableSemaphore.updateLeaseTime', `id ${describeId(id)}`, 'permitId', () => pes().updateLeaseTime(id as string, 1000)],
    ]),
    ...badTimes.map(([label, value]): Case => ['PermitExpirableSemaphore.updateLeaseTime', `leaseTime ${label}`, 'leaseTime', () => pes().updateLeaseTime('id', value as number)]),
    ...badTimes.map(([label, value]): Case => ['CountDownLatch.await', `waitTime ${label}`, 'options.waitTime', () => latch().await({ waitTime: value as number })]),
    ...badSignals.map(([label, value]): Case => ['CountDownLatch.await', `signal ${label}`, 'options.signal', () => latch().await({ signal: value as never })]),
    ['CountDownLatch.await', 'requireInit "yes"', 'options.requireInit', () => latch().await({ requireInit: 'yes' as never })],
    ...([5, '', 'x'.repeat(101), null] as unknown[]).map((id): Case => ['CountDownLatch.countDown', `operationId ${describeId(id)}`, 'options.operationId', () => latch().countDown({ operationId: id as string })]),
    ['CountDownLatch.countDown', 'options a string', 'options', () => latch().countDown('op' as never)],
    ...([5, '', 'x'.repeat(101), null] as unknown[]).flatMap((id): Case[] => [
      ['Semaphore.release', `operationId ${describeId(id)}`, 'options.operationId', () => sem().release({ operationId: id as string })],
      ['Semaphore.addPermits', `operationId ${describeId(id)}`, 'options.operationId', () => sem().addPermits(1, { operationId: id as string })],
      ['PermitExpirableSemaphore.addPermits', `operationId ${describeId(id)}`, 'options.operationId', () => pes().addPermits(1, { operationId: id as string })],
    ]),
    ['Semaphore.addPermits', 'options a string', 'options', () => sem().addPermits(1, 'op' as never)],
    ['Semaphore.addPermits', 'a misspelt option', 'options.operationID', () => sem().addPermits(1, { operationID: 'x' } as never)],
    ['CountDownLatch.countDown', 'a misspelt option', 'options.operationID', () => latch().countDown({ operationID: 'x' } as never)],
    ...([undefined, null, 'fn', {}] as unknown[]).flatMap((fn): Case[] => [
      ['Semaphore.withPermits', `fn ${String(fn)}`, 'fn', () => sem().withPermits(fn as never)],
      ['PermitExpirableSemaphore.withPermit', `fn ${String(fn)}`, 'fn', () => pes().withPermit(fn as never)],
    ]),
  ];
}

function describeId(id: unknown): string {
  return typeof id === 'string' ? `${id.length} chars` : String(id);
}

test.each(cases)('%s with %s: InvalidArgumentError naming %s, nothing sent', async (_call, _value, argument, run) => {
  const { error, commands } = await attempt(run);
  expect(error).toBeInstanceOf(InvalidArgumentError);
  expect(error).toBeInstanceOf(LockError);
  expect((error as InvalidArgumentError).argument).toBe(argument);
  expect((error as Error).message.startsWith(`${argument}: `)).toBe(true);
  expect(`${(error as Error).message} ${JSON.stringify(error)}`).not.toContain('s3cret');
  expect(commands).toEqual({});
});

test('habits from Redisson, redlock and redis-semaphore get an error that says what to write instead, nothing sent', async () => {
  // Redisson's tryLock(waitTime, leaseTime, unit): times as arguments.
  const positional = await attempt(() => client.getLock('habits').tryLock(100 as never));
  expect((positional.error as Error).message).toBe('options: must be an object, got 100 (times go in the options object, in ms: { waitTime: ..., leaseTime: ... })');
  // A waitTime given to a call that waits as long as it takes.
  const waitingForever = await attempt(() => client.getLock('habits').lock({ waitTime: 100 } as never));
  expect((waitingForever.error as Error).message).toMatch(/^options\.waitTime: is not an option; expected one of leaseTime, signal \(this call waits as long as it takes, until its signal aborts: a waitTime goes to tryLock\(\)/);
  const permits = await attempt(() => client.getPermitExpirableSemaphore('habits').acquire({ waitTime: 100 } as never));
  expect((permits.error as Error).message).toContain('a waitTime goes to tryLock(), tryAcquire(), or the with… scope');
  for (const { error, commands } of [positional, waitingForever, permits]) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(commands).toEqual({});
  }
});

test('client.inspect() rejects with a bad name or after close(), as every call does, rather than throwing', async () => {
  const inspected = client.inspect(42 as never);
  expect(inspected).toBeInstanceOf(Promise);
  await expect(inspected).rejects.toBeInstanceOf(InvalidArgumentError);
});

test('a key (prefix + name) over 1 KiB is refused by getLock', async () => {
  const prefixed = new LockClient({ redis: server.url, keyPrefix: 'p'.repeat(1000) });
  try {
    // Connected first: its start-up (CLIENT SETNAME) must not count as sent for the bad call.
    await prefixed.getLock('ready').isLocked();
    const { error, commands } = await attempt(() => prefixed.getLock('n'.repeat(30)));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('name');
    expect(commands).toEqual({});
  } finally {
    await prefixed.close();
  }
});

test('ioredis options it does not know but that are no near miss of one it does are passed on (a newer ioredis\'s)', async () => {
  const client = new LockClient({ redis: { port: server.port, someNewerOption: true, localAddress: '127.0.0.1' } as never });
  try {
    expect(await client.getLock('passed-on').isLocked()).toBe(false);
  } finally {
    await client.close();
  }
});

test('redis given as a URL object is the server it names (it went to localhost:6379 before)', async () => {
  const client = new LockClient({ redis: new URL(server.url) as never });
  try {
    const lock = client.getLock('url-object');
    await lock.lock();
    expect(await admin.exists('url-object')).toBe(1);
    await lock.unlock();
  } finally {
    await client.close();
  }
});

test('a prefix and a name that join to "rlock__" are refused by every getter', async () => {
  const prefixed = new LockClient({ redis: server.url, keyPrefix: 'rlo' });
  try {
    await prefixed.getLock('ready').isLocked();
    for (const get of ['getLock', 'getFairLock', 'getFencedLock', 'getReadWriteLock', 'getSemaphore', 'getPermitExpirableSemaphore', 'getCountDownLatch'] as const) {
      const { error, commands } = await attempt(() => prefixed[get]('ck__kind:{rlos}'));
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe('name');
      expect(commands).toEqual({});
    }
    expect(prefixed.getLock('ck_x').name).toBe('ck_x'); // near misses are names like any other
  } finally {
    await prefixed.close();
  }
});

test('an already aborted signal: rejects with its reason, nothing sent', async () => {
  const reason = new Error('already gone');
  for (const run of [
    () => lock.lock({ signal: AbortSignal.abort(reason) }),
    () => lock.tryLock({ signal: AbortSignal.abort(reason), waitTime: 100 }),
    () => lock.withLock(() => 1, { signal: AbortSignal.abort(reason) }),
    () => lock.hold({ signal: AbortSignal.abort(reason) }),
  ]) {
    const { error, commands } = await attempt(run);
    expect(error).toBe(reason);
    expect(commands).toEqual({});
  }
});

test('a closed client: every call throws ClientClosedError, nothing sent', async () => {
  const closing = new LockClient({ redis: server.url });
  const handle = closing.getLock('closed');
  const sem = closing.getSemaphore('closed-sem');
  const pes = closing.getPermitExpirableSemaphore('closed-pes');
  const latch = closing.getCountDownLatch('closed-latch');
  const readWrite = closing.getReadWriteLock('closed-rw');
  await handle.isLocked();
  const fair = closing.getFairLock('closed');
  await closing.close();
  const calls: (() => unknown)[] = [
    () => closing.getLock('closed'),
    () => closing.getSemaphore('closed-sem'),
    () => closing.getPermitExpirableSemaphore('closed-pes'),
    () => closing.getCountDownLatch('closed-latch'),
    () => sem.acquire(),
    () => sem.tryAcquire(),
    () => sem.release(),
    () => sem.withPermits(() => 1),
    () => sem.availablePermits(),
    () => pes.acquire(),
    () => pes.release('some-id'),
    () => pes.availablePermits(),
    () => latch.await(),
    () => latch.countDown(),
    () => latch.delete(),
    () => latch.getState(),
    () => closing.getFairLock('closed'),
    () => fair.lock(),
    () => fair.tryLock({ waitTime: 100 }),
    () => fair.forceUnlock(),
    () => fair.inspect(),
    () => handle.lock(),
    () => handle.tryLock(),
    () => handle.withLock(() => 1),
    () => handle.hold(),
    () => handle.unlock(),
    () => handle.forceUnlock(),
    () => handle.getHoldCount(),
    () => handle.isLocked(),
    () => handle.isHeldByCurrentOwner(),
    () => handle.remainTimeToLive(),
    () => closing.getReadWriteLock('closed'),
    ...(['readLock', 'writeLock'] as const).flatMap((half) => {
      const rw = readWrite[half]();
      return [() => rw.lock(), () => rw.tryLock(), () => rw.withLock(() => 1), () => rw.unlock(), () => rw.forceUnlock(), () => rw.getHoldCount(), () => rw.isLocked(), () => rw.inspect()];
    }),
  ];
  for (const run of calls) {
    const { error, commands } = await attempt(run);
    expect(error).toBeInstanceOf(ClientClosedError);
    expect(commands).toEqual({});
  }
  await expect(closing.close()).resolves.toBeUndefined(); // a second close is harmless
});
