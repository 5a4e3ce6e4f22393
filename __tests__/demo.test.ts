// `npm run demo` as a newcomer runs it: four processes, then the parent's own verdict on the holds.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Hold, overlaps, overtakes } from '../scripts/demo';

const hold = (worker: string, asked: number, from: number, to: number): Hold => ({ worker, round: 1, asked: String(asked), from: String(from), to: String(to) });

test('the checker finds an overlap and an overtake in holds made up for it', () => {
  const a = hold('1', 0, 10, 20);
  const b = hold('2', 5, 19, 30); // starts 1 ns before a ends
  const c = hold('3', 1, 31, 40); // asked before b, served after it
  expect(overlaps([c, b, a])).toEqual([[a, b]]);
  expect(overlaps([a, hold('2', 5, 20, 30)])).toEqual([]);
  expect(overtakes([a, b, c])).toEqual([[c, b]]);
});

test('the demo runs against its own redis-server and reports exclusive holds', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '..', 'scripts', 'demo.ts')], {
    env: { ...process.env, REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise((resolve) => child.on('close', resolve));
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  expect(stdout).toMatch(/^exclusive: 12 holds checked on one monotonic clock, no two overlap$/m);
  expect(stdout).toMatch(/^(not first-come-first-served: \d+ of 12 holds|served in request order this time)/m);
  expect(stdout.match(/ holds demo:order:1001 /g)).toHaveLength(12);
}, 60_000);

test('without redis-server (and no apt-get to install it): one line naming the package, exit 1', async () => {
  const bin = mkdtempSync(join(tmpdir(), 'rlock-path-'));
  symlinkSync(process.execPath, join(bin, 'node'));
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '..', 'scripts', 'demo.ts')], {
      cwd: join(__dirname, '..'),
      env: { ...process.env, REDIS_URL: '', PATH: bin },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toMatch(/^rlock: redis-server not found on the PATH; install the package redis-server \(`(sudo )?apt-get install -y redis-server` on Debian\/Ubuntu, or Redis 7 from redis\.io\) and run again\n$/);
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
}, 30_000);
