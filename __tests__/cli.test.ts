// The built `rlock` CLI, driven as a child process against a private redis-server.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { usePrivateRedis } from './helpers/privateRedis';
import { commandCounts, settledCommandCounts, withReplica } from './helpers/testRedis';
import { orAfter, until } from './helpers/time';

const redis = usePrivateRedis();
const root = join(__dirname, '..');
const cli = join(root, 'dist', 'cli.js');

beforeAll(() => {
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'ignore' });
}, 60_000);

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, REDIS_URL: '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin.end(); // stdin is not a terminal
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The CLI as a running child: what it printed so far, and its exit code once it closes. */
function spawnCli(args: string[]): { child: ReturnType<typeof spawn>; out: { stdout: string; stderr: string }; closed: Promise<number | null> } {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (chunk) => (out.stdout += chunk));
  child.stderr!.on('data', (chunk) => (out.stderr += chunk));
  return { child, out, closed: new Promise((resolve) => child.on('close', resolve)) };
}

test('inspect prints holders and client names, in text and JSON', async () => {
  const client = redis.client({ name: 'billing' });
  await client.getLock('orders:9').lock();
  const url = ['--url', redis.server.url];
  const text = await run([...url, 'inspect', 'orders:9']);
  expect(text).toMatchObject({ code: 0, stderr: '' });
  expect(text.stdout).toMatch(/^orders:9 \(key orders:9\): locked, ttl \d+\.\d s, 0 client\(s\) waiting\n {2}held by \S+ × 1, client "billing"\n$/);
  const json = await run(['inspect', 'orders:9', '--json'], { REDIS_URL: redis.server.url });
  expect(JSON.parse(json.stdout)).toMatchObject({ locked: true, holders: [{ clientId: client.id, holdCount: 1, clientName: 'billing' }] });
});

test('inspect of a name with no keys says so, exit 0, hinting at list when --prefix was not given; --json adds exists: false', async () => {
  const url = ['--url', redis.server.url];
  // A lock held by a client with a prefix, inspected without it: its key is nk:jobs:1, not jobs:1.
  const lock = redis.client({ keyPrefix: 'nk:' }).getLock('jobs:1');
  await lock.lock();
  const bare = await run([...url, 'inspect', 'jobs:1']);
  expect(bare).toEqual({
    code: 0,
    stderr: '',
    stdout: "jobs:1 (key jobs:1): no keys under this name (free if it is a lock's; or not in use)\n  no --prefix given: `rlock list` shows the names in use, with their prefixes\n",
  });
  const prefixed = await run([...url, '--prefix', 'nk:', 'inspect', 'jobs:2']);
  expect(prefixed).toEqual({ code: 0, stderr: '', stdout: "jobs:2 (key nk:jobs:2): no keys under this name (free if it is a lock's; or not in use)\n" });
  const json = await run([...url, '--json', 'inspect', 'jobs:1']);
  expect(json.code).toBe(0);
  expect(JSON.parse(json.stdout)).toEqual({ name: 'jobs:1', key: 'jobs:1', locked: false, holders: [], ttl: -2, waitingClients: 0, exists: false });
  // The lock itself, with its prefix: shown as before, exists: true.
  expect((await run([...url, '--prefix', 'nk:', 'inspect', 'jobs:1'])).stdout).toMatch(/^jobs:1 \(key nk:jobs:1\): locked, ttl \d+\.\d s, 0 client\(s\) waiting\n/);
  expect(JSON.parse((await run([...url, '--prefix', 'nk:', '--json', 'inspect', 'jobs:1'])).stdout)).toMatchObject({ locked: true, exists: true });
  await lock.unlock(); // list tests read every name under their prefix
});

test('inspect --kind shows a semaphore (free permits, reservation), a permit-expirable one (permits and leases) and a latch', async () => {
  const client = redis.client();
  const url = ['--url', redis.server.url];
  const sem = client.getSemaphore('cli:sem');
  await sem.trySetPermits(3);
  await sem.acquire({ permits: 2 });
  const waiting = client.getSemaphore('cli:sem').tryAcquire({ permits: 3, waitTime: 20_000 }); // reserves
  waiting.catch(() => undefined); // settled by close() if an expectation below fails first
  const pes = client.getPermitExpirableSemaphore('cli:pes');
  await pes.trySetPermits(2);
  const id = await pes.acquire({ leaseTime: 60_000 });
  const latch = client.getCountDownLatch('cli:latch');
  await latch.trySetCount(2);
  let reserved = await run([...url, '--json', 'inspect', '--kind', 'semaphore', 'cli:sem']);
  while (JSON.parse(reserved.stdout).reservation === null) reserved = await run([...url, '--json', 'inspect', '--kind', 'semaphore', 'cli:sem']);
  expect(JSON.parse(reserved.stdout)).toMatchObject({ availablePermits: 1, reservation: { clientId: client.id, permits: 3 }, waitingClients: 1 });
  const text = await run([...url, 'inspect', '--kind', 'semaphore', 'cli:sem']);
  expect(text.stdout).toMatch(/^cli:sem \(key cli:sem\): semaphore, 1 permit\(s\) free, 1 client\(s\) waiting\n {2}reserved for \S+: 3 permits, ttl \d+\.\d s\n$/);
  const permits = await run([...url, 'inspect', '--kind', 'permits', 'cli:pes']);
  expect(permits.stdout).toMatch(new RegExp(`^cli:pes \\(key cli:pes\\): permit-expirable semaphore, 1 of 2 permit\\(s\\) free, 0 client\\(s\\) waiting\n {2}permit ${id}, lease left \\d+\\.\\d s\n$`));
  // A claim (a long-waiting client's) on the free permit shows too.
  await redis.admin.set('rlock__permits_claim:{cli:pes}', 'slowclient', 'PX', 60_000);
  const claimed = await run([...url, 'inspect', '--kind', 'permits', 'cli:pes']);
  expect(claimed.stdout).toMatch(/\n {2}next free permit kept for slowclient, ttl \d+\.\d s\n$/);
  await redis.admin.del('rlock__permits_claim:{cli:pes}');
  const latchText = await run([...url, 'inspect', '--kind', 'latch', 'cli:latch']);
  expect(latchText.stdout).toBe('cli:latch (key cli:latch): latch count 2, 0 client(s) waiting\n');
  await sem.release({ permits: 2 });
  expect(await waiting).toBe(true);
});

test('inspect --kind rw shows a read-write lock: holders with their mode, waiting writers; list finds it', async () => {
  const client = redis.client({ name: 'catalog' });
  const rw = client.getReadWriteLock('cli:rw');
  await rw.writeLock().lock();
  await rw.readLock().lock();
  const waiting = redis.client().getReadWriteLock('cli:rw').writeLock().tryLock({ waitTime: 20_000 });
  waiting.catch(() => undefined); // settled by close() if an expectation below fails first
  await until('the writer waits', async () => (await rw.readLock().inspect()).waitingWriters === 1);
  const text = await run(['--url', redis.server.url, 'inspect', '--kind', 'rw', 'cli:rw']);
  expect(text).toMatchObject({ code: 0, stderr: '' });
  expect(text.stdout).toMatch(/^cli:rw \(key cli:rw\): locked, ttl \d+\.\d s, 1 client\(s\) waiting\n {2}held by \S+ × 1 \((read|write)\), client "catalog"\n {2}held by \S+ × 1 \((read|write)\), client "catalog"\n {2}mode write, 1 writer\(s\) waiting\n$/);
  const list = await run(['--url', redis.server.url, 'list', '--match', 'cli:rw']);
  expect(list.stdout).toBe('cli:rw (rw)\n');
  await rw.writeLock().unlock();
  await rw.readLock().unlock();
  expect(await waiting).toBe(true);
});

test('inspect shows a fenced lock\'s token; list finds fenced locks', async () => {
  const token = await redis.client({ name: 'ledger' }).getFencedLock('ledger:1').lock();
  const text = await run(['--url', redis.server.url, 'inspect', 'ledger:1']);
  expect(text.stdout).toMatch(new RegExp(`client "ledger"\\n {2}fencing token ${token}\\n$`));
  const json = await run(['--url', redis.server.url, '--json', 'inspect', 'ledger:1']);
  expect(JSON.parse(json.stdout)).toMatchObject({ locked: true, fencingToken: String(token) });
  // A plain lock hash: list finds it (and not its token key).
  const listed = await run(['--url', redis.server.url, '--json', 'list', '--match', 'ledger:*']);
  expect(JSON.parse(listed.stdout)).toEqual([{ name: 'ledger:1', kind: 'lock' }]);
});

test('list uses the prefix and --match', async () => {
  const client = redis.client({ keyPrefix: 'app:' });
  await client.getLock('x:1').lock({ leaseTime: 30_000 });
  await client.getLock('y:1').lock({ leaseTime: 30_000 });
  const all = await run(['--url', redis.server.url, '--prefix', 'app:', 'list']);
  expect(all.stdout.split('\n').filter(Boolean).sort()).toEqual(['x:1', 'y:1']);
  const some = await run(['--url', redis.server.url, '--prefix', 'app:', '--json', 'list', '--match', 'x:*']);
  expect(JSON.parse(some.stdout)).toEqual([{ name: 'x:1', kind: 'lock' }]);
});

test('list finds semaphores, permit-expirable semaphores and latches with their kind; inspect recognises them without --kind', async () => {
  const client = redis.client({ keyPrefix: 'k:' });
  await client.getSemaphore('kinds:sem').trySetPermits(3);
  await client.getSemaphore('kinds:released').release(); // a semaphore created by a release (INCRBY)
  const pes = client.getPermitExpirableSemaphore('kinds:pes');
  await pes.trySetPermits(2);
  const id = await pes.acquire({ leaseTime: 60_000 });
  await client.getPermitExpirableSemaphore('kinds:added').addPermits(1);
  const latch = client.getCountDownLatch('kinds:latch');
  await latch.trySetCount(2);
  await client.getLock('kinds:lock').lock({ leaseTime: 60_000 });
  await redis.admin.set('k:kinds:plain', '5'); // an integer string no primitive marked: not listed
  const url = ['--url', redis.server.url, '--prefix', 'k:'];
  const keysBefore = (await commandCounts(redis.admin)).keys ?? 0;
  const text = await run([...url, 'list', '--match', 'kinds:*']);
  expect(text).toMatchObject({ code: 0, stderr: '' });
  expect(text.stdout.split('\n').filter(Boolean).sort()).toEqual(
    ['kinds:added (permits)', 'kinds:latch (latch)', 'kinds:lock', 'kinds:pes (permits)', 'kinds:released (semaphore)', 'kinds:sem (semaphore)'],
  );
  const json = await run([...url, '--json', 'list', '--kind', 'semaphore']);
  expect(JSON.parse(json.stdout).sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name))).toEqual([
    { name: 'kinds:released', kind: 'semaphore' },
    { name: 'kinds:sem', kind: 'semaphore' },
  ]);
  expect((await commandCounts(redis.admin)).keys ?? 0).toBe(keysBefore); // SCAN, never KEYS
  const sem = await run([...url, 'inspect', 'kinds:sem']);
  expect(sem).toEqual({ code: 0, stderr: '', stdout: 'kinds:sem (key k:kinds:sem): semaphore, 3 permit(s) free, 0 client(s) waiting\n' });
  const permits = await run([...url, 'inspect', 'kinds:pes']);
  expect(permits.stdout).toMatch(new RegExp(`^kinds:pes \\(key k:kinds:pes\\): permit-expirable semaphore, 1 of 2 permit\\(s\\) free, 0 client\\(s\\) waiting\n {2}permit ${id}, lease left \\d+\\.\\d s\n$`));
  const counting = await run([...url, '--json', 'inspect', 'kinds:latch']);
  expect(JSON.parse(counting.stdout)).toEqual({ name: 'kinds:latch', key: 'k:kinds:latch', count: 2, state: 'closed', waitingClients: 0 });
  await latch.countDown();
  await latch.countDown();
  // Open: only its marker is left, so list no longer finds it, but inspect still tells it apart from a name never used.
  expect((await run([...url, 'list', '--kind', 'latch'])).stdout).toBe('');
  expect((await run([...url, 'inspect', 'kinds:latch'])).stdout).toBe('kinds:latch (key k:kinds:latch): latch open, 0 client(s) waiting\n');
  expect((await run([...url, 'inspect', '--kind', 'latch', 'kinds:never'])).stdout).toBe('kinds:never (key k:kinds:never): latch never set, 0 client(s) waiting\n');
  expect(await latch.delete()).toBe(true);
  expect((await run([...url, 'inspect', 'kinds:latch'])).stdout).toBe('kinds:latch (key k:kinds:latch): latch deleted, 0 client(s) waiting\n');
  // A name with no keys at all says so (it printed "free, no TTL", as a free lock that is there).
  expect((await run([...url, 'inspect', 'kinds:none'])).stdout).toBe("kinds:none (key k:kinds:none): no keys under this name (free if it is a lock's; or not in use)\n");
  // Bad usage exits 2 before Redis is asked anything.
  expect(await run([...url, 'list', '--kind', 'queue'])).toMatchObject({ code: 2, stdout: '' });
  expect(await run([...url, 'list', '--match', ''])).toMatchObject({ code: 2, stdout: '' });
});

test('force-unlock refuses without --yes off a terminal, removes with it, exits 1 when there is nothing', async () => {
  await redis.client({ name: 'stuck' }).getLock('stuck').lock();
  const url = ['--url', redis.server.url];
  const refused = await run([...url, 'force-unlock', 'stuck']);
  expect(refused).toEqual({ code: 2, stdout: '', stderr: 'rlock: refusing to force-unlock without --yes when stdin is not a terminal\n' });
  expect(await redis.admin.exists('stuck')).toBe(1);
  const removed = await run([...url, 'force-unlock', 'stuck', '--yes']);
  expect(removed.code).toBe(0);
  expect(removed.stdout).toMatch(/^removed stuck \(key stuck\): locked.*\n {2}held by .* client "stuck"\n$/);
  expect(await redis.admin.exists('stuck')).toBe(0);
  const nothing = await run([...url, 'force-unlock', 'stuck', '--yes']);
  expect(nothing).toEqual({ code: 1, stdout: '', stderr: 'rlock: no lock stuck (key stuck): nothing removed\n' });
});

test('watch refreshes until interrupted, with nothing on stderr after 15 refreshes (no listener piling up on its stop signal)', async () => {
  const { child, out, closed } = spawnCli(['--url', redis.server.url, '--json', 'watch', 'w', '--interval', '50']);
  await until('watch printed 15 frames', () => out.stdout.split('\n').filter(Boolean).length >= 15, 20_000);
  child.kill('SIGINT');
  expect(await closed).toBe(0);
  // One abort listener per refresh printed MaxListenersExceededWarning at the 11th.
  expect(out.stderr).toBe('');
  const frames = out.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { locked: boolean });
  expect(frames.length).toBeGreaterThanOrEqual(15);
  expect(frames[0]).toMatchObject({ name: 'w', locked: false });
});

test('watch stops at Ctrl-C while Redis does not answer its refresh, not after --timeout', async () => {
  const child = spawn(process.execPath, [cli, '--url', redis.server.url, '--timeout', '30000', '--json', 'watch', 'w2', '--interval', '100'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  await until('watch printed a frame', () => stdout.includes('\n'), 20_000);
  redis.server.pause();
  try {
    // No frame can come while Redis is paused: ten intervals on, a refresh waits for its reply.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const frames = stdout.split('\n').filter(Boolean).length;
    const interrupted = performance.now();
    child.kill('SIGINT');
    expect(await closed).toBe(0);
    expect(performance.now() - interrupted).toBeLessThan(5_000);
    expect(stdout.split('\n').filter(Boolean)).toHaveLength(frames);
  } finally {
    redis.server.resume();
  }
}, 60_000);

test('watch shows what inspect recognises: a write-held read-write lock as locked in write mode, not free', async () => {
  const client = redis.client();
  await client.getReadWriteLock('ww').writeLock().lock();
  const child = spawn(process.execPath, [cli, '--url', redis.server.url, '--json', 'watch', 'ww', '--interval', '100'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  await until('watch printed a frame', () => stdout.includes('\n'), 20_000);
  child.kill('SIGINT');
  expect(await new Promise((resolve) => child.on('close', resolve))).toBe(0);
  expect(JSON.parse(stdout.split('\n')[0]!)).toMatchObject({ name: 'ww', locked: true, mode: 'write', holders: [{ clientId: client.id, mode: 'write' }] });
});

test('a name with a control character prints quoted: a newline cannot fake a second entry', async () => {
  const name = 'evil\nfake-lock (semaphore)';
  await redis.client().getLock(name).lock();
  const listed = await run(['--url', redis.server.url, 'list', '--match', 'evil*']);
  expect(listed).toEqual({ code: 0, stdout: `${JSON.stringify(name)}\n`, stderr: '' });
  expect((await run(['--url', redis.server.url, 'inspect', name])).stdout).toMatch(/^"evil\\nfake-lock \(semaphore\)" \(key "evil\\nfake-lock \(semaphore\)"\): locked/);
});

test.each([
  [['--url', 'http://example.com', 'inspect', 'x'], 2, 'rlock: not a Redis URL (redis:// or rediss://): http://example.com\n'],
  [['--url', 'not a url', 'inspect', 'x'], 2, 'rlock: not a Redis URL: not a url\n'],
  // ioredis reads a password from the query too: a mistyped URL is shown without it.
  [['--url', 'rediss//127.0.0.1:1?password=s3cret', 'inspect', 'x'], 2, 'rlock: not a Redis URL: rediss//127.0.0.1:1\n'],
  [['--url', 'redis://127.0.0.1:1', 'inspect', 'x'], 3, 'rlock: cannot reach Redis at 127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1\n'],
  [['inspect', ''], 2, 'rlock: name: must not be empty\n'],
  [['inspect', 'x'.repeat(1025)], 2, 'rlock: name: must be at most 1024 bytes long, got 1025\n'],
  [['bogus'], 2, "error: unknown command 'bogus'\n"],
  // Commander quotes a mistyped option: the password in it is not.
  [['--uri=redis://user:s3cret@127.0.0.1:1', 'inspect', 'x'], 2, "error: unknown option '--uri=redis://user:***@127.0.0.1:1'\n"],
  // A password with a `#` in it is not shown in part either.
  [['--url', 'redis://user:abc#def@127.0.0.1:1', 'inspect', 'x'], 2, 'rlock: not a Redis URL: redis://user:***@127.0.0.1:1\n'],
  // A bad --prefix: the connection already made did not let the process exit (it hung).
  [['--prefix', '{bad', 'inspect', 'x'], 2, 'rlock: options.keyPrefix: may hold a "{" only as a whole hash tag ("{tag}", non-empty), got "{bad"\n'],
])('bad input %j: exit %i with one clear line', async (args, code, stderr) => {
  const needsServer = !args.includes('--url');
  const result = await run(needsServer ? ['--url', redis.server.url, ...args] : args);
  expect(result).toEqual({ code, stdout: '', stderr });
});

describe('bad input is refused before anything reaches Redis', () => {
  // Before, names were checked only after connecting and after the prefix lookup (TIME and up to
  // 65 EXISTS), and --prefix and a database beyond Redis's int only once connected: with Redis
  // unreachable these exited 3, "cannot reach Redis", instead of 2.
  const cases: [string, (url: string) => string[], string][] = [
    ['inspect of an empty name', (url) => ['--url', url, 'inspect', ''], 'rlock: name: must not be empty\n'],
    ['inspect of a name among the library\'s own keys', (url) => ['--url', url, 'inspect', 'rlock__queue:{x}'], 'rlock: name: must not contain "rlock__" (nor make it with the key prefix): the library\'s own keys do\n'],
    ['inspect of a 1100-byte name', (url) => ['--url', url, 'inspect', 'x'.repeat(1100)], 'rlock: name: must be at most 1024 bytes long, got 1100\n'],
    ['inspect of a name too long with the prefix', (url) => ['--url', url, '--prefix', 'p'.repeat(1000), 'inspect', 'x'.repeat(100)], 'rlock: name: with the key prefix makes a key of 1100 bytes; at most 1024 are allowed\n'],
    ['force-unlock --yes of an empty name', (url) => ['--url', url, 'force-unlock', '', '--yes'], 'rlock: name: must not be empty\n'],
    ['watch of an empty name', (url) => ['--url', url, 'watch', ''], 'rlock: name: must not be empty\n'],
    ['--prefix {', (url) => ['--url', url, '--prefix', '{', 'inspect', 'x'], 'rlock: options.keyPrefix: may hold a "{" only as a whole hash tag ("{tag}", non-empty), got "{"\n'],
    ['a 1100-byte --prefix', (url) => ['--url', url, '--prefix', 'p'.repeat(1100), 'list'], 'rlock: options.keyPrefix: must be at most 1024 bytes long, got 1100\n'],
    ['a database beyond Redis\'s int', (url) => ['--url', `${url}/99999999999`, 'list'], ''],
  ];
  const dbRefusal = (url: string): string => `rlock: the URL's database must be a number from 0 to 2147483647: ${url}/99999999999\n`;

  // Nothing listens on port 1: had the CLI tried to connect, it would have exited 3.
  test.each(cases)('%s: exit 2 with its message, Redis unreachable', async (_, args, stderr) => {
    const url = 'redis://127.0.0.1:1';
    expect(await run(args(url))).toEqual({ code: 2, stdout: '', stderr: stderr || dbRefusal(url) });
  });

  test('against a running Redis: each exits 2, and the server got no connection and no command', async () => {
    const connections = async (): Promise<number> => Number(/total_connections_received:(\d+)/.exec(await redis.admin.info('stats'))![1]);
    const countsBefore = await settledCommandCounts(redis.admin);
    const connectionsBefore = await connections();
    for (const [what, args, stderr] of cases) {
      const result = await run(args(redis.server.url));
      expect({ what, ...result }).toEqual({ what, code: 2, stdout: '', stderr: stderr || dbRefusal(redis.server.url) });
    }
    expect(await settledCommandCounts(redis.admin)).toEqual(countsBefore);
    expect(await connections()).toBe(connectionsBefore);
  });
});

test('force-unlock of a read-write lock removes its holds, leases and waiting writers and wakes its waiters; a semaphore or latch is refused', async () => {
  const reader = redis.client({ name: 'reader' });
  // Its queue heartbeat (the fallback that finds the lock free without a message) every 20 s.
  const writer = redis.client({ queueTimeout: 60_000 });
  const url = ['--url', redis.server.url];
  await reader.getReadWriteLock('report').readLock().lock(); // under the watchdog: a 30 s lease
  const [readerField] = Object.keys(await redis.admin.hgetall('report')).filter((field) => field !== 'mode');
  const waiting = writer.getReadWriteLock('report').writeLock().tryLock({ waitTime: 25_000 });
  await until('the writer waits', async () => (await redis.admin.zcard('rlock__rw_writers:{report}')) === 1);
  expect(await run([...url, 'force-unlock', 'report'])).toMatchObject({ code: 2, stdout: '' }); // no --yes off a terminal
  expect(await run([...url, 'force-unlock', 'report', '--yes', '--if-holder', reader.id])).toMatchObject({ code: 2, stdout: '' });
  // Forced as a plain or fair lock, its hash alone went and the reader's lease blocked the writers.
  for (const kind of ['lock', 'fair']) {
    const wrongKind = await run([...url, 'force-unlock', '--kind', kind, 'report', '--yes']);
    expect(wrongKind).toMatchObject({ code: 2, stdout: '' });
    expect(wrongKind.stderr).toBe(`rlock: report is a read-write lock, not a ${kind === 'lock' ? 'lock' : 'fair lock'}: force-unlock it with --kind rw (or without --kind); nothing removed\n`);
  }
  const forcedAt = Date.now(); // before the CLI starts: its start-up is part of the bound
  const forced = await run([...url, 'force-unlock', 'report', '--yes']);
  expect(forced.code).toBe(0);
  expect(forced.stdout).toMatch(/^removed report \(key report\): locked.*\n {2}held by \S+ × 1 \(read\), client "reader"\n$/);
  // Woken by the force's message, not by the reader's 30 s lease running out nor by the writer's
  // heartbeat (20 s); before, a force that published nothing passed too (a helper's mutation).
  expect(await orAfter(waiting, 5_000, 'not woken within 5 s of the force-unlock')).toBe(true);
  expect(Date.now() - forcedAt).toBeLessThan(5_000);
  expect(await redis.admin.zscore('rlock__rw_leases:{report}', readerField!)).toBeNull();
  expect(await run([...url, 'force-unlock', '--kind', 'rw', 'nothing', '--yes'])).toEqual({ code: 1, stdout: '', stderr: 'rlock: no lock nothing (key nothing): nothing removed\n' });

  await reader.getSemaphore('pool').trySetPermits(2);
  await reader.getCountDownLatch('gate').trySetCount(1);
  expect(await run([...url, 'force-unlock', 'pool', '--yes'])).toEqual({ code: 2, stdout: '', stderr: 'rlock: pool is a semaphore: force-unlock removes locks only, nothing removed\n' });
  expect(await run([...url, 'force-unlock', 'gate', '--yes'])).toEqual({ code: 2, stdout: '', stderr: 'rlock: gate is a count-down latch: force-unlock removes locks only, nothing removed\n' });
  expect(await redis.admin.get('pool')).toBe('2');
  expect(await redis.admin.get('gate')).toBe('1');
});

describe('force-unlock --if-holder', () => {
  test('removes the lock only while the holder it names still holds it', async () => {
    const stuck = redis.client({ name: 'stuck', keyPrefix: 'app:' });
    const other = redis.client({ keyPrefix: 'app:' });
    await stuck.getLock('job').lock();
    const args = ['--url', redis.server.url, '--prefix', 'app:', 'force-unlock', 'job', '--yes'];

    const wrong = await run([...args, '--if-holder', other.id]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(new RegExp(`^rlock: job is held by ${stuck.id}:\\S+, not ${other.id}: nothing removed\\n$`));
    expect(await redis.admin.exists('app:job')).toBe(1);

    const [field] = Object.keys(await redis.admin.hgetall('app:job'));
    const removed = await run([...args, '--if-holder', field!]); // the full owner field works too
    expect(removed.code).toBe(0);
    expect(removed.stdout).toMatch(/^removed job \(key app:job\): locked/);
    expect(await redis.admin.exists('app:job')).toBe(0);

    const nothing = await run([...args, '--if-holder', stuck.id]);
    expect(nothing).toMatchObject({ code: 1, stderr: 'rlock: no lock job (key app:job): nothing removed\n' });
    expect(await run([...args, '--if-holder', 'not an id'])).toMatchObject({ code: 2, stdout: '' });
  });

  test('the check is in the script: a lock that changed hands is left alone, the holder it names is removed and the next waiting client is woken', async () => {
    const client = redis.client();
    const waiter = redis.client();
    {
      const stale = 'AAAAAAAAAAAAAAAAAAAAA';
      const holder = client.getLock('handover');
      await holder.lock();
      const [field] = Object.keys(await redis.admin.hgetall('handover'));
      const waiting = waiter.getLock('handover').tryLock({ waitTime: 30_000 });
      await until('the waiter is in line', async () => (await redis.admin.zcard('rlock__clients:{handover}')) === 1);
      expect(await client.getLock('handover').forceUnlockIfHolder(stale)).toEqual({ removed: false, holders: [field] });
      expect(await redis.admin.hgetall('handover')).toEqual({ [field!]: '1' });
      expect(await client.getLock('handover').forceUnlockIfHolder(client.id)).toEqual({ removed: true, holders: [field] });
      // Woken by the force's message (its pttl is the 30 s watchdog lease).
      await expect(waiting).resolves.toBe(true);
      expect(await client.getLock('handover').forceUnlockIfHolder(stale)).toEqual({ removed: false, holders: [expect.stringMatching(new RegExp(`^${waiter.id}:`))] });
      await waiter.getLock('handover').forceUnlock();
      expect(await client.getLock('handover').forceUnlockIfHolder(stale)).toEqual({ removed: false, holders: [] });
    }
  });
});

test('--version prints the package version; --help lists the exit codes', async () => {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  expect(await run(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  const help = await run(['--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/--timeout <ms>/);
  expect(help.stdout).toMatch(/\nExit codes:\n {2}0 {2}done\n {2}1 {2}.+\n {2}2 {2}bad usage or input\n {2}3 {2}Redis unreachable .+\n$/);
});

test('a server that accepts but never answers: exit 3 after --timeout, one clear line', async () => {
  redis.server.pause();
  try {
    const result = await run(['--url', redis.server.url, '--timeout', '300', 'inspect', 'x']);
    expect(result).toEqual({ code: 3, stdout: '', stderr: `rlock: cannot reach Redis at 127.0.0.1:${redis.server.port}: no reply within 300 ms (--timeout)\n` });
  } finally {
    redis.server.resume();
  }
});

test('a server that stops answering mid-watch: exit 3 after --timeout, one clear line', async () => {
  const { out, closed } = spawnCli(['--url', redis.server.url, '--json', '--timeout', '300', 'watch', 'w', '--interval', '50']);
  try {
    await until('watch printed a frame', () => out.stdout.includes('\n'));
    redis.server.pause();
    expect(await closed).toBe(3);
  } finally {
    redis.server.resume();
  }
  expect(out.stderr).toBe(`rlock: cannot reach Redis at 127.0.0.1:${redis.server.port}: no reply within 300 ms (--timeout)\n`);
});

test('--timeout must be a whole number of ms', async () => {
  expect(await run(['--url', redis.server.url, '--timeout', '1.5', 'inspect', 'x'])).toEqual({
    code: 2,
    stdout: '',
    stderr: 'rlock: --timeout: a whole number of ms from 1 to 3600000, got 1.5\n',
  });
});

describe('the database of --url', () => {
  // Before, ioredis's SELECT of a database Redis refused only emitted an error the CLI never read,
  // and every command, force-unlock included, went to database 0 with exit 0; `/abc` crashed with
  // an unhandled rejection and exit 1, the "nothing to force-unlock" code.
  test('one Redis refuses (out of range): exit 3, and database 0 is left alone', async () => {
    await redis.client().getLock('cli:db0').lock();
    const forced = await run(['--url', `${redis.server.url}/99`, 'force-unlock', '--yes', 'cli:db0']);
    expect(forced.code).toBe(3);
    expect(forced.stderr).toMatch(/cannot use database 99: .*out of range/);
    expect(await redis.admin.exists('cli:db0')).toBe(1);
  });

  test('a lock in the database the URL names is the one acted on', async () => {
    const inDb2 = redis.client({ redis: `${redis.server.url}/2` });
    await inDb2.getLock('cli:db2').lock();
    await redis.client().getLock('cli:db2').lock(); // the same name in database 0
    const forced = await run(['--url', `${redis.server.url}/2`, 'force-unlock', '--yes', 'cli:db2']);
    expect(forced.code).toBe(0);
    expect(await inDb2.getLock('cli:db2').isLocked()).toBe(false);
    expect(await redis.admin.exists('cli:db2')).toBe(1);
  });

  test.each([['/abc'], ['/-1'], ['/?db=2'], ['/1/2']])('a path or query that is not one database number (%s): exit 2', async (suffix) => {
    const result = await run(['--url', `${redis.server.url}${suffix}`, 'list']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/database/);
  });
});

test('a password with an unencoded `@` and `/`: refused as a URL whose path is no database, and no part of the password is printed (its tail passed for the host before)', async () => {
  const result = await run(['--url', 'redis://:pa@sX5w/x@127.0.0.1:1', '--timeout', '500', 'list']);
  expect(result).toEqual({ code: 2, stdout: '', stderr: "rlock: the URL's path must be a database number (redis://host:port/2): (not shown: it may hold a password)\n" });
});

test('--kind naming another kind than the key holds (a plain lock asked of a string that is not ours): exit 2, bad input, not 3', async () => {
  await redis.admin.set('cli:wrongkind', '2');
  const result = await run(['--url', redis.server.url, 'force-unlock', '--yes', '--kind', 'lock', 'cli:wrongkind']);
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/another kind than asked/);
  expect(await redis.admin.get('cli:wrongkind')).toBe('2');
});

describe('--kind naming another kind than the name’s keys show', () => {
  test('watch checks the kind at every refresh: a plain lock taken on the name while watched as a read-write lock ends the watch with exit 2 (it showed the held lock as free)', async () => {
    const name = 'cli:kind-watched';
    const { child, out, closed } = spawnCli(['--url', redis.server.url, '--json', 'watch', '--interval', '100', '--kind', 'rw', name]);
    try {
      await until('the watch showed its first frame (the name free)', () => out.stdout.includes('"locked":false'));
      await redis.client().getLock(name).lock();
      expect(await orAfter(closed, 10_000, 'still watching')).toBe(2);
    } finally {
      child.kill('SIGINT'); // ended already, unless the expectation above failed
    }
    expect(out.stderr).toBe(`rlock: ${name} is a plain or fair lock, not a read-write lock: watch it with --kind lock (or without --kind); nothing shown\n`);
  });

  test('inspect --kind semaphore (or permits, or latch) of a key that holds a string no primitive wrote fails naming it, not "NaN permit(s) free"', async () => {
    await redis.admin.set('cli:kind-foreign', 'hello');
    for (const kind of ['semaphore', 'permits', 'latch']) {
      const result = await run(['--url', redis.server.url, 'inspect', '--kind', kind, 'cli:kind-foreign']);
      expect({ kind, code: result.code, stdout: result.stdout }).toEqual({ kind, code: 2, stdout: '' }); // a kind the key is not, as for another kind's keys
      expect(result.stderr).toMatch(/WRONGTYPE the name holds a value that is not a count/);
    }
  });

  // Read as the kind said, a held plain lock showed as a free read-write lock, a latch as a
  // semaphore with its count for permits.
  test('inspect and watch exit 2 naming the kind the keys show; force-unlock --kind lock of a semaphore is refused as a semaphore', async () => {
    const client = redis.client();
    await client.getLock('cli:kind-plain').lock();
    await client.getCountDownLatch('cli:kind-latch').trySetCount(3);
    await client.getSemaphore('cli:kind-sem').trySetPermits(2);
    const url = ['--url', redis.server.url];
    expect(await run([...url, 'inspect', '--kind', 'rw', 'cli:kind-plain'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'rlock: cli:kind-plain is a plain or fair lock, not a read-write lock: inspect it with --kind lock (or without --kind); nothing shown\n',
    });
    expect(await run([...url, 'watch', '--kind', 'semaphore', 'cli:kind-latch'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'rlock: cli:kind-latch is a count-down latch, not a semaphore: watch it with --kind latch (or without --kind); nothing shown\n',
    });
    expect(await run([...url, 'force-unlock', '--yes', '--kind', 'lock', 'cli:kind-sem'])).toEqual({ code: 2, stdout: '', stderr: 'rlock: cli:kind-sem is a semaphore: force-unlock removes locks only, nothing removed\n' });
    expect(await client.getSemaphore('cli:kind-sem').availablePermits()).toBe(2);
    // A lock taken on an opened latch's name (its marker stays for good) is the lock: shown, and
    // forced, as one (the latch's marker made --kind lock refuse it, and without --kind it showed
    // as an open latch).
    const latch = client.getCountDownLatch('cli:kind-was-latch');
    await latch.trySetCount(1);
    await latch.countDown();
    await client.getLock('cli:kind-was-latch').lock();
    expect((await run([...url, 'inspect', 'cli:kind-was-latch'])).stdout).toMatch(/^cli:kind-was-latch \(key cli:kind-was-latch\): locked/);
    expect(await run([...url, 'force-unlock', '--yes', '--kind', 'lock', 'cli:kind-was-latch'])).toMatchObject({ code: 0 });
    // The lock family agrees with itself, and a name with no keys is free whatever is said.
    expect(await run([...url, 'inspect', '--kind', 'fair', 'cli:kind-plain'])).toMatchObject({ code: 0, stderr: '' });
    expect((await run([...url, 'inspect', '--kind', 'rw', 'cli:kind-none'])).stdout).toMatch(/^cli:kind-none \(key cli:kind-none\): free/);
  });
});

test('force-unlock --kind rw of a held plain lock: exit 2 naming its kind, nothing removed (before: "no lock", exit 1)', async () => {
  const client = redis.client();
  await client.getLock('cli:plain-as-rw').lock();
  const result = await run(['--url', redis.server.url, 'force-unlock', '--yes', '--kind', 'rw', 'cli:plain-as-rw']);
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/is a plain or fair lock, not a read-write lock/);
  expect(await client.getLock('cli:plain-as-rw').isLocked()).toBe(true);
});

describe('a name given without --prefix that belongs to a client with a keyPrefix', () => {
  // `rlock list` without --prefix shows such a name whole (`pfx:orders`). inspect and force-unlock
  // of it found its key but not its helper keys: a forced lock's waiters were not woken (they took
  // it by their own bound, seconds later), a read-write lock showed as free, the queue was not shown.
  const refusal = (name: string, prefix: string): { code: number; stdout: string; stderr: string } => ({
    code: 2,
    stdout: '',
    stderr: `rlock: pfx:${name} belongs to a client with keyPrefix "${prefix}" (its keys are there): run with --prefix "${prefix}" and the name "${name}" (or with --prefix '' if it is a client's without a prefix); nothing done\n`,
  });

  test('force-unlock, inspect and watch exit 2 naming the prefix, nothing removed; with --prefix, force-unlock wakes the waiting client at once', async () => {
    const holder = redis.client({ keyPrefix: 'pfx:' });
    // Without the force's message the waiter finds the lock gone at its client's next queue
    // heartbeat, every queueTimeout / 3: by default 1.7 s, which a CLI run on a loaded machine
    // comes near. Every 20 s here, none comes before the waiter's waitTime has run out.
    const other = redis.client({ keyPrefix: 'pfx:', queueTimeout: 60_000 });
    const lock = holder.getLock('orders');
    await lock.lock(); // a 30 s lease, kept by the watchdog
    const waiting = other.getLock('orders').tryLock({ waitTime: 20_000 });
    waiting.catch(() => undefined); // settled by close() if an expectation below fails first
    await until('the other client is in line', async () => (await redis.admin.exists('pfx:rlock__clients:{pfx:orders}')) === 1);
    for (const command of [['force-unlock', '--yes'], ['inspect'], ['watch']]) {
      expect(await run(['--url', redis.server.url, ...command, 'pfx:orders'])).toEqual(refusal('orders', 'pfx:'));
    }
    expect(await lock.isHeldByCurrentOwner()).toBe(true);
    // An explicit --prefix '' takes the name as it is (here: inspected, its waiting client not seen).
    expect(await run(['--url', redis.server.url, '--prefix', '', 'inspect', 'pfx:orders'])).toMatchObject({ code: 0, stderr: '' });
    // Stamped before the CLI starts: the bound covers the whole run, start-up included.
    const forcedAt = performance.now();
    const forced = run(['--url', redis.server.url, '--prefix', 'pfx:', 'force-unlock', '--yes', 'orders']);
    // Woken by the force-unlock's message: the lease (30 s) and the heartbeat (20 s) are far off.
    const woken = await orAfter(waiting, 5_000, 'not woken within 5 s of the force-unlock');
    const elapsed = performance.now() - forcedAt;
    expect(await forced).toMatchObject({ code: 0 });
    expect(woken).toBe(true);
    expect(elapsed).toBeLessThan(5_000);
  });

  test('a held read-write lock: inspect exits 2 (it showed the lock as free)', async () => {
    const holder = redis.client({ keyPrefix: 'pfx:' });
    await holder.getReadWriteLock('rw').writeLock().lock();
    expect(await run(['--url', redis.server.url, 'inspect', 'pfx:rw'])).toEqual(refusal('rw', 'pfx:'));
    const right = await run(['--url', redis.server.url, '--prefix', 'pfx:', 'inspect', 'rw']);
    expect(right.stdout).toMatch(/^rw \(key pfx:rw\): locked/);
  });

  test('a name with a colon of a client without a prefix is inspected as before, its waiting client shown', async () => {
    const holder = redis.client();
    const other = redis.client();
    await holder.getLock('plain:orders').lock();
    const waiting = other.getLock('plain:orders').tryLock({ waitTime: 20_000 });
    waiting.catch(() => undefined); // settled by close()
    await until('the other client is in line', async () => (await redis.admin.exists('rlock__clients:{plain:orders}')) === 1);
    const inspected = await run(['--url', redis.server.url, 'inspect', 'plain:orders']);
    expect(inspected).toMatchObject({ code: 0, stderr: '' });
    expect(inspected.stdout).toMatch(/^plain:orders \(key plain:orders\): locked, ttl [\d.]+ s, 1 client\(s\) waiting\n/);
  });
});

test('force-unlock through a replica (READONLY) gives up within --timeout, exit 3, not after the library\'s offlineTimeout', async () => {
  // A force-unlock rides out READONLY for a while (a failover demoting the master under the
  // client); the command does for --timeout at most, as it does for everything else.
  await redis.client().getLock('cli:replica').lock();
  await withReplica(redis, async (replica) => {
    const started = performance.now();
    const result = await run(['--url', `redis://127.0.0.1:${replica.port}`, '--timeout', '1000', 'force-unlock', '--yes', 'cli:replica']);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/READONLY/);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
  expect(await redis.admin.exists('cli:replica')).toBe(1);
});
