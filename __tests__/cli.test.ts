// The built `rlock` CLI, driven as a child process against a private redis-server.
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { usePrivateRedis } from './helpers/privateRedis';

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

test('inspect shows a fenced lock\'s token; list finds fenced locks', async () => {
  const token = await redis.client({ name: 'ledger' }).getFencedLock('ledger:1').lock();
  const text = await run(['--url', redis.server.url, 'inspect', 'ledger:1']);
  expect(text.stdout).toMatch(new RegExp(`client "ledger"\\n {2}fencing token ${token}\\n$`));
  const json = await run(['--url', redis.server.url, '--json', 'inspect', 'ledger:1']);
  expect(JSON.parse(json.stdout)).toMatchObject({ locked: true, fencingToken: String(token) });
  // A plain lock hash: list finds it (and not its token key).
  const listed = await run(['--url', redis.server.url, '--json', 'list', '--match', 'ledger:*']);
  expect(JSON.parse(listed.stdout)).toEqual(['ledger:1']);
});

test('list uses the prefix and --match', async () => {
  const client = redis.client({ keyPrefix: 'app:' });
  await client.getLock('x:1').lock({ leaseTime: 30_000 });
  await client.getLock('y:1').lock({ leaseTime: 30_000 });
  const all = await run(['--url', redis.server.url, '--prefix', 'app:', 'list']);
  expect(all.stdout.split('\n').filter(Boolean).sort()).toEqual(['x:1', 'y:1']);
  const some = await run(['--url', redis.server.url, '--prefix', 'app:', '--json', 'list', '--match', 'x:*']);
  expect(JSON.parse(some.stdout)).toEqual(['x:1']);
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

test('watch refreshes until interrupted', async () => {
  const child = spawn(process.execPath, [cli, '--url', redis.server.url, '--json', 'watch', 'w', '--interval', '100'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  await new Promise((resolve) => setTimeout(resolve, 1200));
  child.kill('SIGINT');
  const code = await new Promise((resolve) => child.on('close', resolve));
  expect(code).toBe(0);
  const frames = stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { locked: boolean });
  expect(frames.length).toBeGreaterThanOrEqual(3);
  expect(frames[0]).toMatchObject({ name: 'w', locked: false });
});

test.each([
  [['--url', 'http://example.com', 'inspect', 'x'], 2, 'rlock: not a Redis URL (redis:// or rediss://): http://example.com\n'],
  [['--url', 'not a url', 'inspect', 'x'], 2, 'rlock: not a Redis URL: not a url\n'],
  [['--url', 'redis://127.0.0.1:1', 'inspect', 'x'], 3, 'rlock: cannot reach Redis at 127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1\n'],
  [['inspect', ''], 2, 'rlock: name: must not be empty\n'],
  [['inspect', 'x'.repeat(1025)], 2, 'rlock: name: must be at most 1024 bytes long, got 1025\n'],
  [['bogus'], 2, "error: unknown command 'bogus'\n"],
])('bad input %j: exit %i with one clear line', async (args, code, stderr) => {
  const needsServer = !args.includes('--url');
  const result = await run(needsServer ? ['--url', redis.server.url, ...args] : args);
  expect(result).toEqual({ code, stdout: '', stderr });
});
