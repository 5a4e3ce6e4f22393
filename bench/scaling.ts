// npm run bench:scaling: the scaling scenario alone (bench/scalingScenario.ts; `npm run bench`
// runs it as scenario 7): P processes × (32 / P) tasks on one hot lock, P ∈ {2, 4, 8, 16}, for
// rlock, rlock's fair lock and redis-semaphore, with a zero-length and a 1 ms critical section.
// Options: --reps N, --ms <measured ms per run>, --warmup <ms>, --processes 1,4, --holds 0,1.
// Prints the tables and the targets, writes bench/results/<date>-scaling.json, .md and .svg.
// `--from <json>` prints the tables and targets and draws the chart again from a saved run's
// JSON, without running anything.
import { readFileSync } from 'node:fs';
import { redisFromEnv } from '../scripts/redisServer';
import { defaultScalingOptions, runScaling, runsIn, scalingTables, scalingTargets, writeScaling, type ScalingOptions, type ScalingResults } from './scalingScenario';
import { runMain } from './runMain';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const list = (name: string, fallback: number[]): number[] => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]!.split(',').map(Number) : fallback;
};

function report(results: ScalingResults, options: ScalingOptions, date: string, fresh: boolean): void {
  const table = scalingTables(results, options);
  const verdicts = scalingTargets(results).map(([what, ok, got]) => `${ok ? 'MET   ' : 'MISSED'} ${what}: ${got}`);
  console.log(`${table}\n\n${verdicts.join('\n')}`);
  writeScaling(results, options, date, table, fresh);
}

async function main(): Promise<void> {
  const from = process.argv.indexOf('--from');
  if (from >= 0) {
    const saved = JSON.parse(readFileSync(process.argv[from + 1]!, 'utf8')) as { date: string; reps: number; runMs?: number; warmupMs?: number; results: ScalingResults };
    const runs = runsIn(saved.results);
    const processCounts = [...new Set(runs.map((run) => run.processes))];
    const holds = [...new Set(runs.map((run) => run.holdMs))];
    report(saved.results, { reps: saved.reps, runMs: saved.runMs ?? 3000, warmupMs: saved.warmupMs ?? 0, processCounts, holds }, saved.date, false);
    return;
  }
  const options: ScalingOptions = {
    reps: arg('reps', defaultScalingOptions.reps),
    runMs: arg('ms', defaultScalingOptions.runMs),
    warmupMs: arg('warmup', defaultScalingOptions.warmupMs),
    processCounts: list('processes', defaultScalingOptions.processCounts),
    holds: list('holds', defaultScalingOptions.holds),
  };
  const redis = await redisFromEnv();
  let results: ScalingResults;
  try {
    results = await runScaling(redis.url, options, (line) => process.stderr.write(`${line}\n`));
  } finally {
    await redis.stop();
  }
  report(results, options, new Date().toISOString().slice(0, 10), true);
}

runMain(main);
