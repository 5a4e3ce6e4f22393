// The scaling scenario (the contention issue's §3): P processes × (32 / P) tasks on one hot lock,
// for rlock, rlock's fair lock and redis-semaphore (polling every 10 ms), with a zero-length and
// a 1 ms critical section. Each comparison is repeated (the order rotated) and reported as
// medians of per-repetition figures; ratios are taken within one repetition. Used by
// `npm run bench` (scenario 7) and by `npm run bench:scaling` (bench/scaling.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { scalingChart } from './chart';
import { redisSemaphore, rlock, rlockFair } from './contestants';
import { pooled, runWorker } from './scenarios';
import { jain, quantile, round } from './stats';

export const contestants = [rlock, rlockFair, redisSemaphore];

export interface ScalingOptions {
  reps: number;
  /** Measured time per run, ms. */
  runMs: number;
  /**
   * Each run's warm-up before its measured `runMs`: the workers contend as in the measured part,
   * uncounted. V8 is still compiling the libraries' code in a run's first seconds (on 2 vCPUs its
   * compiler took 23 % of a fair-lock worker's CPU 1.5–4.5 s into a run, 4 % at 15 s), and a
   * poller's tasks collide most while they all start together; without it, a 3 s run measures
   * the start as much as the contest. 0 measures from the start, as the runs of 2026-11-25 and
   * before did.
   */
  warmupMs: number;
  processCounts: number[];
  /** Critical sections to run: 0 (GET + SET only) and/or 1 (plus a 1 ms sleep). */
  holds: number[];
}

export const defaultScalingOptions: ScalingOptions = { reps: 3, runMs: 3000, warmupMs: 3000, processCounts: [2, 4, 8, 16], holds: [0, 1] };

export interface Run {
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

/** Runs by `<P>x<W> hold <ms>`, then by contestant name: one Run per repetition. */
export type ScalingResults = Record<string, Record<string, Run[]>>;

const labelOf = (processes: number, holdMs: number): string => `${processes}x${32 / processes} hold ${holdMs}`;

/** The process counts and critical sections that `results` has runs of (the inverse of labelOf). */
export function runsIn(results: ScalingResults): { processes: number; holdMs: number }[] {
  return Object.keys(results).map((label) => ({ processes: Number(label.split('x')[0]), holdMs: Number(label.split(' hold ')[1]) }));
}
const median = (values: number[]): number => round(quantile(values, 0.5), 3);

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

async function run(name: string, url: string, admin: Redis, processes: number, holdMs: number, { runMs, warmupMs }: ScalingOptions): Promise<Run> {
  const key = `bench:scaling:${name.replace(/\W/g, '')}:${processes}:${holdMs}:${Date.now()}`;
  const startAt = Date.now() + 3000 + processes * 300; // for the processes to start
  const measureFrom = startAt + warmupMs;
  const deadline = measureFrom + runMs;
  // Redis's counters start with the measured window too (awaited with the workers, so that a
  // failure of either is handled).
  const windowOpened = new Promise((resolve) => setTimeout(resolve, measureFrom - Date.now())).then(async () => {
    await admin.config('RESETSTAT');
    return redisCpuUs(admin);
  });
  const [workers, redisCpuBefore] = await Promise.all([
    Promise.all(
      Array.from({ length: processes }, () =>
        runWorker<{ counts: number[]; waits: number[]; total: number; requests: number; cpuUs: number }>([
          name, url, key, String(deadline), String(32 / processes), String(holdMs), String(startAt), '', String(warmupMs > 0 ? measureFrom : 0),
        ]),
      ),
    ),
    windowOpened,
  ]);
  const commands = await commandsRun(admin);
  const redisCpu = (await redisCpuUs(admin)) - redisCpuBefore;
  const { counts, waits, acquisitions } = pooled(workers);
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

/** Every run of the scenario against the redis-server at `url`. */
export async function runScaling(url: string, options: ScalingOptions, log: (line: string) => void): Promise<ScalingResults> {
  const admin = new Redis(url);
  const results: ScalingResults = {};
  try {
    for (const holdMs of options.holds) {
      for (const processes of options.processCounts) {
        const label = labelOf(processes, holdMs);
        results[label] = {};
        for (let rep = 0; rep < options.reps; rep++) {
          // Rotate the order so that no contestant always runs first (or last) on a warm machine.
          const order = contestants.map((_, i) => contestants[(i + rep) % contestants.length]!);
          for (const c of order) {
            log(`7 scaling ${label} rep ${rep + 1}/${options.reps}: ${c.name}`);
            const result = await run(c.name, url, admin, processes, holdMs, options);
            log(`  ${result.acqPerSec} acq/s, fairness ${result.fairness}, requests/acq ${result.requestsPerAcq}, CPU µs/acq node ${result.nodeCpuUsPerAcq} redis ${result.redisCpuUsPerAcq}, wait p99 ${result.waitP99} ms, lost ${result.lostUpdates}`);
            (results[label]![c.name] ??= []).push(result);
          }
        }
      }
    }
  } finally {
    admin.disconnect();
  }
  return results;
}

/** The median over repetitions of `pick`, for one contestant at one P and critical section; undefined when not run. */
function medianOf(results: ScalingResults, name: string, processes: number, holdMs: number, pick: (run: Run) => number): number | undefined {
  const runs = results[labelOf(processes, holdMs)]?.[name];
  return runs ? median(runs.map(pick)) : undefined;
}

/** The median of per-repetition ratios `pick(name) / pick(redis-semaphore)`. */
function ratioOf(results: ScalingResults, name: string, processes: number, holdMs: number, pick: (run: Run) => number): number | undefined {
  const byLib = results[labelOf(processes, holdMs)];
  const runs = byLib?.[name];
  const base = byLib?.[redisSemaphore.name];
  return runs && base ? median(runs.map((r, i) => pick(r) / pick(base[i]!))) : undefined;
}

/** The tables (markdown), one per critical section. */
export function scalingTables(results: ScalingResults, options: ScalingOptions): string {
  const lines: string[] = [];
  for (const holdMs of options.holds) {
    lines.push(
      '',
      `### Critical section ${holdMs ? '1 ms' : 'GET + SET only'} (medians of ${options.reps} repetitions of ${options.runMs / 1000} s after a ${options.warmupMs / 1000} s warm-up, ratios within a repetition)`,
      '',
      '| P × W | library | acq/s | × redis-semaphore | wait p50 / p99 / p99.9 / max ms | fairness | requests/acq | commands/acq | CPU µs/acq Node / Redis | lost |',
      '|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const processes of options.processCounts) {
      for (const c of contestants) {
        const runs = results[labelOf(processes, holdMs)]?.[c.name];
        if (!runs) continue;
        const m = (pick: (r: Run) => number): number => median(runs.map(pick));
        lines.push(
          `| ${processes} × ${32 / processes} | ${c.name} | ${m((r) => r.acqPerSec)} | ${ratioOf(results, c.name, processes, holdMs, (r) => r.acqPerSec)} | ${m((r) => r.waitP50)} / ${m((r) => r.waitP99)} / ${m((r) => r.waitP999)} / ${m((r) => r.waitMax)} | ${m((r) => r.fairness)} | ${m((r) => r.requestsPerAcq)} | ${m((r) => r.commandsPerAcq)} | ${m((r) => r.nodeCpuUsPerAcq)} / ${m((r) => r.redisCpuUsPerAcq)} | ${Math.max(...runs.map((r) => r.lostUpdates))} |`,
        );
      }
    }
  }
  return lines.join('\n');
}

/**
 * The contention issue's targets that these runs can check, as [what, met, measured]. Only the
 * ones whose runs were made are listed. Not checked here: "no wait of a 60 s run above 1 s"
 * (1 ms section), which needs a 60 s run (`bench/scaling.ts --ms 60000`).
 */
export function scalingTargets(results: ScalingResults): [string, boolean, string][] {
  const targets: [string, boolean, string][] = [];
  const fair = rlockFair.name;
  const acq = (r: Run): number => r.acqPerSec;
  const atLeast = (what: string, value: number | undefined, bound: number, unit = '× redis-semaphore'): void => {
    if (value !== undefined) targets.push([what, value >= bound, `${value} ${unit}`]);
  };
  atLeast('7: RLock ≥ 1.3 × redis-semaphore at 4 × 8', ratioOf(results, rlock.name, 4, 0, acq), 1.3);
  atLeast('7: RLock ≥ 2 × redis-semaphore at 16 × 2', ratioOf(results, rlock.name, 16, 0, acq), 2);
  const four = medianOf(results, rlock.name, 4, 0, acq);
  const eight = medianOf(results, rlock.name, 8, 0, acq);
  if (four !== undefined && eight !== undefined) atLeast('7: RLock at 8 × 4 ≥ 0.8 × its 4 × 8 acq/s', round(eight / four, 3), 0.8, '×');
  atLeast('7: FairLock ≥ 1.0 × redis-semaphore at 4 × 8', ratioOf(results, fair, 4, 0, acq), 1);
  atLeast('7: FairLock ≥ 2 × redis-semaphore at 16 × 2', ratioOf(results, fair, 16, 0, acq), 2);
  // Checked at every P that ran, each listed.
  const valuesAtEveryP = (holdMs: number, pick: (p: number) => number | undefined): (readonly [number, number])[] =>
    runsIn(results)
      .filter((run) => run.holdMs === holdMs)
      .map(({ processes }) => [processes, pick(processes)] as const)
      .filter((entry): entry is readonly [number, number] => entry[1] !== undefined);
  const everyP = (what: string, holdMs: number, pick: (p: number) => number | undefined, ok: (value: number) => boolean): void => {
    const values = valuesAtEveryP(holdMs, pick);
    if (values.length > 0) targets.push([what, values.every(([, v]) => ok(v)), values.map(([p, v]) => `${p}: ${v}`).join(', ')]);
  };
  everyP('7: RLock fairness ≥ 0.9 at every P', 0, (p) => medianOf(results, rlock.name, p, 0, (r) => r.fairness), (v) => v >= 0.9);
  everyP('7: FairLock fairness ≥ 0.99 at every P', 0, (p) => medianOf(results, fair, p, 0, (r) => r.fairness), (v) => v >= 0.99);
  everyP('7: FairLock wait p99 ≤ 1/5 of redis-semaphore\'s at every P (ratio)', 0, (p) => ratioOf(results, fair, p, 0, (r) => r.waitP99), (v) => v <= 0.2);
  everyP('7: FairLock ≤ 3 requests per acquisition at every P', 0, (p) => medianOf(results, fair, p, 0, (r) => r.requestsPerAcq), (v) => v <= 3);
  const fairRequests = valuesAtEveryP(0, (p) => medianOf(results, fair, p, 0, (r) => r.requestsPerAcq)).map(([, v]) => v);
  if (fairRequests.length > 1) {
    const spread = round(Math.max(...fairRequests) / Math.min(...fairRequests), 3);
    targets.push(['7: FairLock requests per acquisition flat in P (largest ≤ 1.25 × smallest)', spread <= 1.25, `${spread} ×`]);
  }
  everyP('7: 1 ms section: RLock wait p99.9 ≤ redis-semaphore\'s at every P (ratio)', 1, (p) => ratioOf(results, rlock.name, p, 1, (r) => r.waitP999), (v) => v <= 1);
  everyP('7: 1 ms section: RLock fairness ≥ 0.9 at every P', 1, (p) => medianOf(results, rlock.name, p, 1, (r) => r.fairness), (v) => v >= 0.9);
  const lost = Object.values(results).flatMap((byLib) => Object.values(byLib).flat()).reduce((sum, r) => sum + r.lostUpdates, 0);
  if (Object.keys(results).length > 0) targets.push(['7: zero lost updates (all)', lost === 0, `${lost}`]);
  return targets;
}

/** Writes `<date>-scaling.json` (with `fresh`), `.md` and `.svg` under bench/results. */
export function writeScaling(results: ScalingResults, options: ScalingOptions, date: string, table: string, fresh: boolean): void {
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  if (fresh) writeFileSync(join(dir, `${date}-scaling.json`), `${JSON.stringify({ date, reps: options.reps, runMs: options.runMs, warmupMs: options.warmupMs, results }, null, 2)}\n`);
  writeFileSync(join(dir, `${date}-scaling.md`), `${table}\n`);
  const panels = options.holds.map((holdMs) => ({
    title: `acq/s, critical section ${holdMs ? 'GET + SET + 1 ms' : 'GET + SET'} (medians)`,
    series: contestants.map((c) => ({
      label: c.name,
      points: options.processCounts.flatMap((p): [number, number][] => {
        const value = medianOf(results, c.name, p, holdMs, (r) => r.acqPerSec);
        return value === undefined ? [] : [[p, value]];
      }),
    })),
  }));
  writeFileSync(join(dir, `${date}-scaling.svg`), `${scalingChart(panels)}\n`);
}
