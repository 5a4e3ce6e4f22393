// npm run bench [-- --quick] [--semaphore: that scenario alone] [--semaphore-starvation: Redisson #3728's shape]: every scenario, every library, one private redis-server, one run.
// Prints a table and the targets, writes bench/results/<date>.json and .svg, and (scenario 7, the
// scaling scenario, left out by --quick) bench/results/<date>-scaling.json, .md and .svg.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { redisFromEnv } from '../scripts/redisServer';
import { chart } from './chart';
import { hashFloor, lockLibraries, raw, redisSemaphore, rlock, rlockFair } from './contestants';
import * as scenario from './scenarios';
import { defaultScalingOptions, runScaling, scalingTables, scalingTargets, writeScaling } from './scalingScenario';
import { latchFanOut } from './latchScenario';
import { semaphoreReport, semaphoreStarvationReport } from './semaphoreScenario';
import { quantile, round } from './stats';
import { runMain } from './runMain';

/** Rounds of scenario 1 (the sequential ops are split between them). */
const S1_ROUNDS = 5;
const median = (values: number[]): number => quantile(values, 0.5);

const quick = process.argv.includes('--quick');
const sizes: scenario.Sizes = quick
  ? { sequentialOps: 6000, parallelOps: 5000, handoffs: 40, slowHandoffs: 10, contendedMs: 3000, manyLocksMs: 2000 }
  : { sequentialOps: 20_000, parallelOps: 30_000, handoffs: 200, slowHandoffs: 40, contendedMs: 10_000, manyLocksMs: 5000 };

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function main(): Promise<void> {
  if (!(globalThis as { gc?: unknown }).gc) throw new Error('run with node --expose-gc (npm run bench does)');
  const redis = await redisFromEnv();
  const started = Date.now();
  if (process.argv.includes('--semaphore-starvation')) {
    // Redisson #3728's shape: `npm run bench -- --semaphore-starvation [--quick]` (60 s, or 10 s, per library).
    try {
      const { text, figures } = await semaphoreStarvationReport(redis.url, quick ? 10_000 : 60_000, log);
      console.log(text);
      const date = new Date().toISOString().slice(0, 10);
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(join(__dirname, 'results', `${date}-semaphore-starvation${quick ? '-quick' : ''}.json`), `${JSON.stringify({ date, quick, figures }, null, 2)}\n`);
    } finally {
      await redis.stop();
    }
    return;
  }
  if (process.argv.includes('--semaphore')) {
    // The semaphore scenario alone (issue 13): `npm run bench -- --semaphore [--quick] [--repeat=3]`.
    try {
      const repetitions = Number(/^--repeat=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith('--repeat=')) ?? '')?.[1] ?? 1);
      const { text, figures } = await semaphoreReport(redis.url, quick ? 3000 : 8000, log, repetitions);
      console.log(text);
      const date = new Date().toISOString().slice(0, 10);
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(join(__dirname, 'results', `${date}-semaphore${quick ? '-quick' : ''}.json`), `${JSON.stringify({ date, quick, figures }, null, 2)}\n`);
    } finally {
      await redis.stop();
    }
    return;
  }
  const everyone = [...lockLibraries, rlockFair, raw, hashFloor];
  try {
    // Scenario 1 in 5 rounds, the order rotated each round: its ratios (against raw and the
    // floors) are medians of ratios within one round, as single runs minutes apart swing by 20 %.
    const rounds: Record<string, number>[] = [];
    for (let r = 0; r < S1_ROUNDS; r++) {
      const row: Record<string, number> = {};
      for (const c of everyone.map((_, i) => everyone[(i + r) % everyone.length]!)) {
        log(`1 uncontended, sequential (round ${r + 1}/${S1_ROUNDS}): ${c.name}`);
        row[c.name] = (await scenario.sequential(c, redis.url, Math.ceil(sizes.sequentialOps / S1_ROUNDS))).opsPerSec;
      }
      rounds.push(row);
    }
    const s1: Record<string, number> = Object.fromEntries(everyone.map((c) => [c.name, median(rounds.map((row) => row[c.name]!))]));
    const s1Ratio = (a: string, b: string): number => round(median(rounds.map((row) => row[a]! / row[b]!)));
    const s2: Record<string, number> = {};
    for (const c of everyone) {
      log(`2 uncontended, parallel: ${c.name}`);
      s2[c.name] = (await scenario.parallel(c, redis.url, sizes.parallelOps)).opsPerSec;
    }
    const s3: Record<string, { p50: number; p99: number }> = {};
    for (const c of lockLibraries) {
      log(`3 handoff: ${c.name}`);
      const { p50, p99 } = await scenario.handoff(c, redis.url, c.name === 'redlock' ? sizes.slowHandoffs : sizes.handoffs);
      s3[c.name] = { p50, p99 };
    }
    s3['pubsub floor'] = await scenario.pubsubFloor(redis.url, sizes.handoffs);
    const s4: Record<string, scenario.Contended> = {};
    for (const c of lockLibraries) {
      log(`4 contended: ${c.name}`);
      s4[c.name] = await scenario.contended(c, redis.url, sizes.contendedMs);
    }
    log('5 many locks: rlock');
    const s5 = await scenario.manyLocks(redis.url, sizes.manyLocksMs);
    log('6 watchdog at scale: rlock');
    const s6 = await scenario.watchdogAtScale(redis.url);
    log('8 latch fan-out: rlock');
    const s8 = await latchFanOut(redis.url, quick ? 3 : 10);
    // 7: P processes × (32 / P) tasks, 3 repetitions of each comparison: about 15 minutes.
    const s7 = quick ? undefined : await runScaling(redis.url, defaultScalingOptions, log);

    const us = rlock.name;
    const sem = redisSemaphore.name;
    const targets: [string, boolean, string][] = [
      ['1: ≥ 0.9 × raw (median of per-round ratios)', s1Ratio(us, raw.name) >= 0.9, `${s1Ratio(us, raw.name)} × raw`],
      ['1: ≥ 0.9 × hash-lock floor (RLock)', s1Ratio(us, hashFloor.name) >= 0.9, `${s1Ratio(us, hashFloor.name)} × floor`],
      ['1: ≥ 0.9 × hash-lock floor (FairLock)', s1Ratio(rlockFair.name, hashFloor.name) >= 0.9, `${s1Ratio(rlockFair.name, hashFloor.name)} × floor`],
      ['2: ≥ 0.8 × raw', s2[us]! >= 0.8 * s2[raw.name]!, `${round(s2[us]! / s2[raw.name]!)} × raw`],
      ['2: ≥ 2 × redis-semaphore', s2[us]! >= 2 * s2[sem]!, `${round(s2[us]! / s2[sem]!)} × redis-semaphore`],
      ['3: p50 ≤ 1/5 of redis-semaphore', s3[us]!.p50 <= s3[sem]!.p50 / 5, `${round(s3[us]!.p50 / s3[sem]!.p50, 3)} × redis-semaphore`],
      ['3: p50 ≤ 2 × pubsub floor', s3[us]!.p50 <= 2 * s3['pubsub floor']!.p50, `${round(s3[us]!.p50 / s3['pubsub floor']!.p50)} × floor`],
      ['3: p99 ≤ 3 × own p50', s3[us]!.p99 <= 3 * s3[us]!.p50, `${round(s3[us]!.p99 / s3[us]!.p50)} × p50`],
      ['4: ≥ 1.3 × redis-semaphore acq/s', s4[us]!.acquisitionsPerSec >= 1.3 * s4[sem]!.acquisitionsPerSec, `${round(s4[us]!.acquisitionsPerSec / s4[sem]!.acquisitionsPerSec)} × redis-semaphore`],
      ['4: fairness ≥ 0.9', s4[us]!.fairness >= 0.9, `${s4[us]!.fairness}`],
      ['4: zero lost updates (all)', Object.values(s4).every((r) => r.lostUpdates === 0), Object.entries(s4).map(([k, r]) => `${k} ${r.lostUpdates}`).join(', ')],
      ['4: ≤ 3 commands per acquisition (INFO stats, script-internal calls included)', s4[us]!.commandsPerAcquisition <= 3, `${s4[us]!.commandsPerAcquisition}`],
      ['4: ≤ 3 requests per acquisition (sent by clients, MONITOR)', s4[us]!.requestsPerAcquisition <= 3, `${s4[us]!.requestsPerAcquisition}`],
      ['5: one subscriber connection', s5.subscriberConnections === 1, `${s5.subscriberConnections}`],
      ['5: no waiter late by > 10 × handoff p99', s5.maxLateMs <= 10 * s3[us]!.p99, `max ${s5.maxLateMs} ms vs ${round(10 * s3[us]!.p99)} ms`],
      ['6: ≤ 1 script call per 100 held locks per period', s6.callsPer100Locks <= 1, `${s6.callsPer100Locks}`],
      ['6: ≤ 1 KiB heap per held lock', s6.heapBytesPerHeldLock <= 1024, `${s6.heapBytesPerHeldLock} B`],
      ['6: ≤ 2 KiB heap per waiter', s6.heapBytesPerWaiter <= 2048, `${s6.heapBytesPerWaiter} B`],
      ...(s7 ? scalingTargets(s7) : []),
      [`8: latch, ${s8.processes} processes × ${s8.awaitersPerProcess} awaiters: all resolve < 100 ms after the countDown (worst of ${s8.rounds} rounds)`, Math.max(...s8.lastMs) < 100, `${Math.max(...s8.lastMs)} ms (rounds: ${s8.lastMs.join(', ')}; median awaiter ${s8.medianMs} ms)`],
    ];

    const table = [
      '| library | 1 seq ops/s | 2 par ops/s | 3 handoff p50 / p99 ms | 4 acq/s | 4 lost | 4 fairness | 4 wait p99 / max ms | 4 cmds/acq | 4 requests/acq |',
      '|---|---|---|---|---|---|---|---|---|---|',
      ...[...lockLibraries.map((c) => c.name), rlockFair.name, raw.name, hashFloor.name, 'pubsub floor'].map((name) => {
        const c4 = s4[name];
        const h = s3[name];
        return `| ${name} | ${s1[name] ?? '–'} | ${s2[name] ?? '–'} | ${h ? `${h.p50} / ${h.p99}` : '–'} | ${c4?.acquisitionsPerSec ?? '–'} | ${c4?.lostUpdates ?? '–'} | ${c4?.fairness ?? '–'} | ${c4 ? `${c4.waitP99} / ${c4.waitMax}` : '–'} | ${c4?.commandsPerAcquisition ?? '–'} | ${c4?.requestsPerAcquisition ?? '–'} |`;
      }),
    ].join('\n');
    const scale = [
      `5 (rlock, 1 000 locks × 2 tasks): ${s5.acquisitionsPerSec} acq/s, ${s5.subscriberConnections} subscriber connection(s), latest waiter ${s5.maxLateMs} ms after a release`,
      `6 (rlock, 10 000 held locks): ${s6.scriptCallsPerPeriod} renewal script calls per period (${s6.callsPer100Locks} per 100 locks), ${s6.heapBytesPerHeldLock} B heap per held lock, ${s6.heapBytesPerWaiter} B per parked waiter`,
      `8 (rlock, a count-down latch, ${s8.processes} processes × ${s8.awaitersPerProcess} awaiters, ${s8.rounds} rounds): the last awaiter ${Math.max(...s8.lastMs)} ms after the countDown at worst, ${round(quantile(s8.lastMs, 0.5))} ms in the median round; the median awaiter ${s8.medianMs} ms`,
    ].join('\n');
    const verdicts = targets.map(([what, ok, got]) => `${ok ? 'MET   ' : 'MISSED'} ${what}: ${got}`).join('\n');
    const date = new Date().toISOString().slice(0, 10);
    const scalingTable = s7 ? scalingTables(s7, defaultScalingOptions) : undefined;
    if (s7) writeScaling(s7, defaultScalingOptions, date, scalingTable!, true);
    console.log(`${table}\n\n${scale}\n${scalingTable ? `\n7 (scaling):\n${scalingTable}\n` : ''}\n${verdicts}`);

    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    const machine = { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryGiB: round(totalmem() / 2 ** 30, 1), redis: process.env.REDIS_URL ? 'REDIS_URL' : 'private redis-server' };
    const results = { date, quick, seconds: round((Date.now() - started) / 1000, 1), machine, sizes, uncontendedSequential: s1, uncontendedSequentialRounds: rounds, uncontendedParallel: s2, handoff: s3, contended: s4, manyLocks: s5, watchdogAtScale: s6, scaling: s7, latchFanOut: s8, targets: targets.map(([what, ok, got]) => ({ what, ok, got })) };
    const suffix = quick ? '-quick' : '';
    writeFileSync(join(dir, `${date}${suffix}.json`), `${JSON.stringify(results, null, 2)}\n`);
    const svg = chart(
      Object.entries(s3).map(([label, h]) => ({ label, value: h.p50 })),
      Object.entries(s4).map(([label, r]) => ({ label, value: r.acquisitionsPerSec })),
    );
    writeFileSync(join(dir, `${date}${suffix}.svg`), svg);
    log(`wrote bench/results/${date}${suffix}.json and .svg in ${results.seconds} s`);
  } finally {
    await redis.stop();
  }
}

runMain(main);
