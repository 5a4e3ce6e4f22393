// The set-up step of `npm test` and `npm run demo` on a machine without the Redis binaries, where
// it cannot install them (no apt-get on the PATH): one line naming the packages, exit 1.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(__dirname, '..');
let bin: string;

beforeAll(() => {
  // A PATH with node and redis-server only: no redis-cli, no redis-sentinel, no apt-get.
  bin = mkdtempSync(join(tmpdir(), 'rlock-path-'));
  symlinkSync(process.execPath, join(bin, 'node'));
  symlinkSync(execFileSync('which', ['redis-server']).toString().trim(), join(bin, 'redis-server'));
});

afterAll(() => rmSync(bin, { recursive: true, force: true }));

function ensure(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'scripts', 'ensureRedis.ts'), ...args], {
      cwd: root,
      env: { ...process.env, PATH: bin },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('present binaries: nothing to do, exit 0', async () => {
  expect(await ensure([])).toEqual({ code: 0, stdout: '', stderr: '' });
});

test('missing binaries it cannot install: one line naming the packages, exit 1', async () => {
  const result = await ensure(['--topologies']);
  expect(result.code).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr.split('\n')).toEqual([
    expect.stringMatching(/^rlock: redis-cli, redis-sentinel not found on the PATH; install the packages redis-tools redis-sentinel \(`(sudo )?apt-get install -y redis-tools redis-sentinel` on Debian\/Ubuntu, or Redis 7 from redis.io\) and run again$/),
    '',
  ]);
}, 30_000);
