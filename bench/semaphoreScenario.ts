// `npm run bench -- --semaphore`: permits = 4, 4 processes × 8 tasks on one semaphore, each
// holding its permit for an INCR + DECR of a holders counter (which also checks the limit).
// rlock's Semaphore and PermitExpirableSemaphore against redis-semaphore's Semaphore (polling
// every 10 ms, its default). Acquisitions per second, wait p99, Redis commands per acquisition.
import { Redis } from 'ioredis';
import { runWorker } from './scenarios';
import { jain, longestFreeWhileWaiting, quantile, round } from './stats';

export const SEMAPHORE_CONTESTANTS = ['rlock Semaphore', 'rlock PermitExpirableSemaphore', 'redis-semaphore Semaphore'] as const;
export type SemaphoreContestant = (typeof SEMAPHORE_CONTESTANTS)[number];

export const PERMITS = 4;

/** Who contends and how: processes × tasks, each hold's sleep, and whether to record the timeline. */
interface Shape {
  processes: number;
  tasks: number;
  holdMs: number;
  timeline: boolean;
}

const SCENARIO_SHAPE: Shape = { processes: 4, tasks: 8, holdMs: 0, timeline: false };
/** Redisson #3728's report: 16 processes × 4 tasks on 4 permits, 5 ms holds. */
const STARVATION_SHAPE: Shape = { processes: 16, tasks: 4, holdMs: 5, timeline: true };

export interface SemaphoreFigures {
  acquisitionsPerSec: number;
  waitP50: number;
  waitP99: number;
  waitP999: number;
  waitMax: number;
  waitsOver1s: number;
  waits: number;
  /** With a timeline: the longest stretch (ms) in which a permit sat free while a task waited. */
  longestFreeWhileWaitingMs: number | undefined;
  fairness: number;
  /** From INFO stats (script-internal calls included), less the holders counter's INCR + DECR. */
  commandsPerAcquisition: number;
  /** The most holders the counter saw at once (must be ≤ PERMITS). */
  maxHolders: number;
  /** How long the processes took to start and connect (not measured: they all begin after). */
  readyAfterMs: number;
  /** CPU time (user + system) of the worker processes per acquisition, in ms: their client library's cost and the holders counter's. */
  cpuMsPerAcquisition: number;
  /** Per acquisition, by command (INFO commandstats: script calls and the commands inside them), the holders counter's left out. */
  commandsByKind: Record<string, number>;
}

/** INFO commandstats as command → calls. */
async function commandStats(admin: Redis): Promise<Record<string, number>> {
  const stats: Record<string, number> = {};
  for (const match of (await admin.info('commandstats')).matchAll(/^cmdstat_(\S+):calls=(\d+)/gm)) stats[match[1]!] = Number(match[2]);
  return stats;
}

let seq = 0;

export async function semaphoreContended(contestant: SemaphoreContestant, url: string, ms: number, shape = SCENARIO_SHAPE): Promise<SemaphoreFigures> {
  const { processes, tasks } = shape;
  const admin = new Redis(url);
  const key = `bench:sem:${process.pid}:${++seq}`;
  try {
    let failed: unknown;
    const running = Promise.all(
      Array.from({ length: processes }, () =>
        runWorker<{ counts: number[]; waits: number[]; maxHolders: number; cpuMs: number; timeline?: [number, number, number][] }>(
          [contestant, url, key, String(tasks), String(PERMITS), String(shape.holdMs), shape.timeline ? '1' : '0'],
          'semaphoreWorker.ts',
        ),
      ),
    );
    running.catch((error: unknown) => (failed = error));
    // Every process connected (a loaded machine is slow to start them): all begin at once and run
    // for `ms`, and what they did to get ready is not counted.
    const readySince = Date.now();
    while (Number(await admin.get(`${key}:ready`)) < processes) {
      if (failed) throw failed;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const readyAfterMs = Date.now() - readySince;
    const statsBefore = await commandStats(admin);
    const commandsBefore = Number(/total_commands_processed:(\d+)/.exec(await admin.info('stats'))![1]);
    const start = Date.now() + 50;
    await admin.rpush(`${key}:go`, ...Array.from({ length: processes }, () => `${start}:${start + ms}`));
    const workers = await running;
    const elapsed = ms / 1000;
    const commands = Number(/total_commands_processed:(\d+)/.exec(await admin.info('stats'))![1]) - commandsBefore;
    const statsAfter = await commandStats(admin);
    const counts = workers.flatMap((w) => w.counts);
    const waits = workers.flatMap((w) => w.waits);
    const acquisitions = counts.reduce((a, b) => a + b, 0);
    return {
      acquisitionsPerSec: round(acquisitions / elapsed, 0),
      waitP50: round(quantile(waits, 0.5), 1),
      waitP99: round(quantile(waits, 0.99), 1),
      waitP999: round(quantile(waits, 0.999), 1),
      waitMax: round(Math.max(...waits), 1),
      waitsOver1s: waits.filter((wait) => wait > 1000).length,
      waits: waits.length,
      longestFreeWhileWaitingMs: shape.timeline ? round(longestFreeWhileWaiting(workers.flatMap((w) => w.timeline ?? []), PERMITS), 1) : undefined,
      fairness: round(jain(counts), 3),
      // Less the INCR + DECR in each hold, the first INFO stats, the RPUSH and the BLPOPs of the start.
      commandsPerAcquisition: round((commands - 2 * acquisitions - 2 - processes) / acquisitions),
      maxHolders: Math.max(...workers.map((w) => w.maxHolders)),
      readyAfterMs,
      cpuMsPerAcquisition: round(workers.reduce((sum, w) => sum + w.cpuMs, 0) / acquisitions, 3),
      commandsByKind: Object.fromEntries(
        Object.entries(statsAfter)
          .map(([command, calls]): [string, number] => [command, calls - (statsBefore[command] ?? 0) - (command === 'incr' || command === 'decr' ? acquisitions : 0)])
          .filter(([command, calls]) => calls > 0 && !['info', 'rpush', 'blpop'].includes(command))
          .map(([command, calls]) => [command, round(calls / acquisitions)]),
      ),
    };
  } finally {
    admin.disconnect();
  }
}


/**
 * Runs every contestant `repetitions` times, the order rotated each time (so that no contestant
 * always runs first, or last, on a machine whose load drifts); a markdown table with each
 * repetition's ratios to redis-semaphore *within that repetition*, the target's verdicts per
 * repetition, and the figures.
 */
export async function semaphoreReport(url: string, ms: number, log: (line: string) => void, repetitions = 1): Promise<{ text: string; figures: Record<string, SemaphoreFigures>[] }> {
  const runs: Record<string, SemaphoreFigures>[] = [];
  const rows: string[] = [];
  const verdicts: string[] = [];
  for (let r = 0; r < repetitions; r++) {
    const order = SEMAPHORE_CONTESTANTS.map((_, i) => SEMAPHORE_CONTESTANTS[(i + r) % SEMAPHORE_CONTESTANTS.length]!);
    const figures: Record<string, SemaphoreFigures> = {};
    for (const contestant of order) {
      log(`semaphore: repetition ${r + 1}, ${contestant}`);
      figures[contestant] = await semaphoreContended(contestant, url, ms);
    }
    runs.push(figures);
    const base = figures['redis-semaphore Semaphore']!;
    for (const name of SEMAPHORE_CONTESTANTS) {
      const f = figures[name]!;
      rows.push(`| ${r + 1} | ${name} | ${f.acquisitionsPerSec} (${round(f.acquisitionsPerSec / base.acquisitionsPerSec)} ×) | ${f.waitP99} / ${f.waitMax} | ${f.fairness} | ${f.commandsPerAcquisition} | ${f.maxHolders} | ${f.cpuMsPerAcquisition} | ${f.readyAfterMs} |`);
    }
    for (const name of SEMAPHORE_CONTESTANTS.filter((n) => n !== 'redis-semaphore Semaphore')) {
      const f = figures[name]!;
      const ok = f.acquisitionsPerSec >= 1.3 * base.acquisitionsPerSec && f.commandsPerAcquisition <= base.commandsPerAcquisition;
      verdicts.push(`${ok ? 'MET   ' : 'MISSED'} (${r + 1}) ${name}: ≥ 1.3 × redis-semaphore's acq/s at ≤ its commands: ${round(f.acquisitionsPerSec / base.acquisitionsPerSec)} ×, ${f.commandsPerAcquisition} vs ${base.commandsPerAcquisition} commands`);
    }
  }
  const text = [
    `permits = ${PERMITS}, ${SCENARIO_SHAPE.processes} processes × ${SCENARIO_SHAPE.tasks} tasks, ${ms / 1000} s each, ${repetitions} repetition(s) in rotated order`,
    '| rep | library | acq/s (× redis-semaphore, same repetition) | wait p99 / max ms | fairness | cmds/acq | max holders | worker CPU ms/acq | start-up ms |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    ...verdicts,
  ].join('\n');
  return { text, figures: runs };
}

/**
 * `npm run bench -- --semaphore-starvation`: Redisson #3728's shape (16 processes × 4 tasks, 4
 * permits, 5 ms holds) for each library in turn; the anchor asks that no wait last over 1 s while
 * a permit is free, so besides the waits it reports the longest stretch in which a permit sat free
 * while somebody waited.
 */
export async function semaphoreStarvationReport(url: string, ms: number, log: (line: string) => void): Promise<{ text: string; figures: Record<string, SemaphoreFigures> }> {
  const figures: Record<string, SemaphoreFigures> = {};
  for (const contestant of SEMAPHORE_CONTESTANTS) {
    log(`semaphore starvation: ${contestant}`);
    figures[contestant] = await semaphoreContended(contestant, url, ms, STARVATION_SHAPE);
  }
  const rows = SEMAPHORE_CONTESTANTS.map((name) => {
    const f = figures[name]!;
    return `| ${name} | ${f.acquisitionsPerSec} | ${f.waitP50} / ${f.waitP99} / ${f.waitP999} / ${f.waitMax} | ${f.waitsOver1s} of ${f.waits} | ${f.longestFreeWhileWaitingMs} | ${f.fairness} | ${f.maxHolders} |`;
  });
  const text = [
    `permits = ${PERMITS}, ${STARVATION_SHAPE.processes} processes × ${STARVATION_SHAPE.tasks} tasks, ${STARVATION_SHAPE.holdMs} ms holds, ${ms / 1000} s each`,
    '| library | acq/s | wait p50 / p99 / p99.9 / max ms | waits > 1 s | longest free-while-waiting ms | fairness | most holders |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  return { text, figures };
}
