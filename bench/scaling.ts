// npm run bench:scaling: P processes × (32 / P) tasks on one hot lock, P ∈ {2, 4, 8, 16}, for
// rlock, rlock's fair lock and redis-semaphore (polling every 10 ms), with a zero-length and a
// 1 ms critical section. Each comparison is repeated (3 times by default, the order rotated)
// and reported as medians of per-repetition figures; ratios are taken within one repetition.
// Writes bench/results/<date>-scaling.json, .md and .svg (acq/s against P). `--from <json>`
// prints the table and draws the chart again from a saved run's JSON, without running anything.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { redisFromEnv } from '../scripts/redisServer';
import { scalingChart } from './chart';
import { redisSemaphore, rlock, rlockFair } from './contestants';
import { runWorker } from './scenarios';
import { jain, quantile, round } from './stats';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const reps = arg('reps', 3);
const runMs = arg('ms', 3000);
/**
 * Each run's warm-up before its measured `runMs`: the workers contend as in the measured part,
 * uncounted. V8 is still compiling the libraries' code in a run's first seconds (on 2 vCPUs its
 * compiler took 23 % of a fair-lock worker's CPU 1.5–4.5 s into a run, 4 % at 15 s), and a
 * poller's tasks collide most while they all start together; without it, a 3 s run measures the
 * start as much as the contest. `--warmup 0` measures from the start, as the runs of
 * 2026-11-25 and before did.
 */
const warmupMs = arg('warmup', 3000);
const list = (name: string, fallback: number[]): number[] => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]!.split(',').map(Number) : fallback;
};
const processCounts = list('processes', [2, 4, 8, 16]);
const holds = list('holds', [0, 1]);
const contestants = [rlock, rlockFair, redisSemaphore];

interface Run {
  acqPerSec: number;
  waitP50: number;
  waitP99: number;
  waitP999: number;
  waitMax: number;
  fairness: number;
  lostUpdates: number;
  requestsPerAcq: number;
  commandsPerAcq: number;
  /** CPU time (user + system) per acquisition: all worker processes together, and redis-server. */
  nodeCpuUsPerAcq: number;
  redisCpuUsPerAcq: number;
}

/** redis-server's CPU time so far (user + system, its own and its threads'), in µs. */
async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/** Commands Redis ran (scripts' inner calls included): INFO commandstats. */
async function commandsRun(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let total = 0;
  for (const [, calls] of info.matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) total += Number(calls);
  return total;
}

async function run(name: string, url: string, admin: Redis, processes: number, holdMs: number): Promise<Run> {
  const key = `bench:scaling:${name.replace(/\W/g, '')}:${processes}:${holdMs}:${Date.now()}`;
  const startAt = Date.now() + 3000 + processes * 300; // for the processes to start
  const measureFrom = startAt + warmupMs;
  const deadline = measureFrom + runMs;
  // Redis's counters start with the measured window too.
  let redisCpuBefore = 0;
  const windowOpened = new Promise<void>((resolve, reject) => {
    setTimeout(() => {
      admin
        .config('RESETSTAT')
        .then(() => redisCpuUs(admin))
        .then((cpu) => {
          redisCpuBefore = cpu;
          resolve();
        }, reject);
    }, measureFrom - Date.now());
  });
  const workers = await Promise.all(
    Array.from({ length: processes }, () =>
      runWorker<{ counts: number[]; waits: number[]; total: number; requests: number; cpuUs: number }>([
        name, url, key, String(deadline), String(32 / processes), String(holdMs), String(startAt), '', String(warmupMs > 0 ? measureFrom : 0),
      ]),
    ),
  );
  await windowOpened;
  const commands = await commandsRun(admin);
  const redisCpu = (await redisCpuUs(admin)) - redisCpuBefore;
  const counts = workers.flatMap((w) => w.counts);
  const waits = workers.flatMap((w) => w.waits);
  const acquisitions = counts.reduce((a, b) => a + b, 0);
  const counter = Number(await admin.get(`${key}:counter`));
  return {
    acqPerSec: round(acquisitions / (runMs / 1000), 0),
    waitP50: round(quantile(waits, 0.5), 2),
    waitP99: round(quantile(waits, 0.99), 1),
    waitP999: round(quantile(waits, 0.999), 1),
    waitMax: round(Math.max(...waits), 1),
    fairness: round(jain(counts), 3),
    lostUpdates: workers.reduce((sum, w) => sum + w.total, 0) - counter,
    // Requests: counted by each worker as it sends them; commands: as Redis ran them. Both less
    // the critical section's GET + SET.
    requestsPerAcq: round(workers.reduce((sum, w) => sum + w.requests, 0) / acquisitions, 2),
    commandsPerAcq: round((commands - 2 * acquisitions) / acquisitions, 2),
    nodeCpuUsPerAcq: round(workers.reduce((sum, w) => sum + w.cpuUs, 0) / acquisitions, 0),
    redisCpuUsPerAcq: round(redisCpu / acquisitions, 0),
  };
}

const median = (values: number[]): number => round(quantile(values, 0.5), 3);

async function main(): Promise<void> {
  const from = process.argv.indexOf('--from');
  if (from >= 0) {
    const saved = JSON.parse(readFileSync(process.argv[from + 1]!, 'utf8')) as { date: string; reps: number; runMs?: number; warmupMs?: number; results: Record<string, Record<string, Run[]>> };
    report(saved.results, saved.reps, saved.date, saved.runMs ?? 3000, saved.warmupMs ?? 0, false);
    return;
  }
  const redis = await redisFromEnv();
  const admin = new Redis(redis.url);
  const results: Record<string, Record<string, Run[]>> = {};
  try {
    for (const holdMs of holds) {
      for (const processes of processCounts) {
        const label = `${processes}x${32 / processes} hold ${holdMs}`;
        results[label] = {};
        for (let rep = 0; rep < reps; rep++) {
          // Rotate the order so that no contestant always runs first (or last) on a warm machine.
          const order = contestants.map((_, i) => contestants[(i + rep) % contestants.length]!);
          for (const c of order) {
            process.stderr.write(`${label} rep ${rep + 1}/${reps}: ${c.name}\n`);
            const result = await run(c.name, redis.url, admin, processes, holdMs);
            process.stderr.write(`  ${result.acqPerSec} acq/s, fairness ${result.fairness}, requests/acq ${result.requestsPerAcq}, CPU µs/acq node ${result.nodeCpuUsPerAcq} redis ${result.redisCpuUsPerAcq}, wait p99 ${result.waitP99} ms, lost ${result.lostUpdates}\n`);
            (results[label]![c.name] ??= []).push(result);
          }
        }
      }
    }
  } finally {
    admin.disconnect();
    await redis.stop();
  }
  report(results, reps, new Date().toISOString().slice(0, 10), runMs, warmupMs, true);
}

/** Prints the tables and writes the JSON (for a new run), the tables and the chart. */
function report(results: Record<string, Record<string, Run[]>>, reps: number, date: string, runMs: number, warmupMs: number, fresh: boolean): void {
  const lines: string[] = [];
  for (const holdMs of holds) {
    lines.push(
      '',
      `### Critical section ${holdMs ? '1 ms' : 'GET + SET only'} (medians of ${reps} repetitions of ${runMs / 1000} s after a ${warmupMs / 1000} s warm-up, ratios within a repetition)`,
      '',
      '| P × W | library | acq/s | × redis-semaphore | wait p50 / p99 / p99.9 / max ms | fairness | requests/acq | commands/acq | CPU µs/acq Node / Redis | lost |',
      '|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const processes of processCounts) {
      const label = `${processes}x${32 / processes} hold ${holdMs}`;
      const byLib = results[label]!;
      const base = byLib[redisSemaphore.name]!;
      for (const c of contestants) {
        const runs = byLib[c.name]!;
        const m = (pick: (r: Run) => number): number => median(runs.map(pick));
        const ratio = median(runs.map((r, i) => r.acqPerSec / base[i]!.acqPerSec));
        lines.push(
          `| ${processes} × ${32 / processes} | ${c.name} | ${m((r) => r.acqPerSec)} | ${ratio} | ${m((r) => r.waitP50)} / ${m((r) => r.waitP99)} / ${m((r) => r.waitP999)} / ${m((r) => r.waitMax)} | ${m((r) => r.fairness)} | ${m((r) => r.requestsPerAcq)} | ${m((r) => r.commandsPerAcq)} | ${m((r) => r.nodeCpuUsPerAcq)} / ${m((r) => r.redisCpuUsPerAcq)} | ${Math.max(...runs.map((r) => r.lostUpdates))} |`,
        );
      }
    }
  }
  const table = lines.join('\n');
  console.log(table);
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  if (fresh) writeFileSync(join(dir, `${date}-scaling.json`), `${JSON.stringify({ date, reps, runMs, warmupMs, results }, null, 2)}\n`);
  writeFileSync(join(dir, `${date}-scaling.md`), `${table}\n`);
  const panels = holds.map((holdMs) => ({
    title: `acq/s, critical section ${holdMs ? 'GET + SET + 1 ms' : 'GET + SET'} (medians)`,
    series: contestants.map((c) => ({
      label: c.name,
      points: processCounts.flatMap((p): [number, number][] => {
        const runs = results[`${p}x${32 / p} hold ${holdMs}`]?.[c.name];
        return runs ? [[p, median(runs.map((r) => r.acqPerSec))]] : [];
      }),
    })),
  }));
  writeFileSync(join(dir, `${date}-scaling.svg`), `${scalingChart(panels)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
