// npm run bench:read-mostly: the read-write lock under a read-mostly load (90 % reads, 4 OS
// processes × 8 tasks on one lock) beside the same load on RLock, where every access is
// exclusive. Prints reads/s, writes/s and the wait quantiles of each, and the ratios; writes
// bench/results/<date>-read-mostly.json.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { redisFromEnv } from '../scripts/redisServer';
import { quantile, round } from './stats';
import { runMain } from './runMain';

const RUN_MS = 10_000;
const PROCESSES = 4;
const TASKS = 8;

interface Figures {
  readsPerSec: number;
  writesPerSec: number;
  readWaitP99: number;
  writeWaitP50: number;
  writeWaitP99: number;
  writeWaitMax: number;
  lostUpdates: number;
}

function runWorker(args: string[]): Promise<{ readWaits: number[]; writeWaits: number[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'readMostlyWorker.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as { readWaits: number[]; writeWaits: number[] }) : reject(new Error(`worker: ${code} ${err}`))));
  });
}

async function measure(mode: 'rw' | 'rlock', url: string): Promise<Figures> {
  const key = `bench:read-mostly:${mode}:${process.pid}`;
  const deadline = Date.now() + 2000 + RUN_MS; // 2 s for the processes to start
  const workers = await Promise.all(Array.from({ length: PROCESSES }, () => runWorker([mode, url, key, String(deadline), String(TASKS)])));
  const readWaits = workers.flatMap((w) => w.readWaits);
  const writeWaits = workers.flatMap((w) => w.writeWaits);
  const admin = new Redis(url);
  const counter = Number((await admin.get(`${key}:counter`)) ?? 0);
  admin.disconnect();
  return {
    readsPerSec: round(readWaits.length / (RUN_MS / 1000), 0),
    writesPerSec: round(writeWaits.length / (RUN_MS / 1000), 0),
    readWaitP99: round(quantile(readWaits, 0.99)),
    writeWaitP50: round(quantile(writeWaits, 0.5)),
    writeWaitP99: round(quantile(writeWaits, 0.99)),
    writeWaitMax: round(Math.max(...writeWaits)),
    lostUpdates: writeWaits.length - counter,
  };
}

async function main(): Promise<void> {
  const redis = await redisFromEnv();
  try {
    const rw = await measure('rw', redis.url);
    const exclusive = await measure('rlock', redis.url);
    const row = (label: string, f: Figures): string =>
      `| ${label} | ${f.readsPerSec} | ${f.writesPerSec} | ${f.readWaitP99} | ${f.writeWaitP50} / ${f.writeWaitP99} / ${f.writeWaitMax} | ${f.lostUpdates} |`;
    console.log(
      [
        '| lock | reads/s | writes/s | read wait p99 ms | write wait p50 / p99 / max ms | lost updates |',
        '|---|---|---|---|---|---|',
        row('getReadWriteLock', rw),
        row('getLock (all exclusive)', exclusive),
        '',
        `reads/s ${round(rw.readsPerSec / exclusive.readsPerSec)} ×, writes/s ${round(rw.writesPerSec / exclusive.writesPerSec)} ×, writer wait p99 ${round(rw.writeWaitP99 / exclusive.writeWaitP99)} × RLock's`,
      ].join('\n'),
    );
    const date = new Date().toISOString().slice(0, 10);
    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${date}-read-mostly.json`), `${JSON.stringify({ date, runMs: RUN_MS, processes: PROCESSES, tasks: TASKS, readWriteLock: rw, rlock: exclusive }, null, 2)}\n`);
  } finally {
    await redis.stop();
  }
}

runMain(main);
