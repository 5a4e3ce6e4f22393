// npm run bench:gaps [-- --processes 4 --ms 3000 --library rlock]: where a contended acquisition's
// time goes. P processes × (32 / P) tasks on one hot lock (the scaling scenario's worker, GET + SET
// counter as the section); every hold's start and end on the machine's clock, merged, give the
// section's length and the gap from one release to the next holder, split by whether that holder
// is in the same process or another one. docs/benchmarks.md, "Where an acquisition's time goes".
import { Redis } from 'ioredis';
import { redisFromEnv } from '../scripts/redisServer';
import { byName } from './contestants';
import { runWorker } from './scenarios';
import { quantile, round } from './stats';
import { runMain } from './runMain';

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};

async function main(): Promise<void> {
  const processes = Number(arg('processes', '4'));
  const ms = Number(arg('ms', '3000'));
  const names = arg('library', 'rlock,rlock fair,redis-semaphore').split(',');
  for (const name of names) if (!byName.has(name)) throw new Error(`--library: one of ${[...byName.keys()].join(', ')}`);
  const redis = await redisFromEnv();
  try {
    // The unit the gaps are made of: one round trip at a time from an otherwise idle process (on a
    // virtual machine, most of it is waking an idle CPU: see docs/benchmarks.md).
    const probe = new Redis(redis.url);
    for (let i = 0; i < 500; i++) await probe.get('bench:gaps:probe'); // warm-up
    const cpuBefore = process.cpuUsage();
    const startedAt = performance.now();
    for (let i = 0; i < 2000; i++) await probe.get('bench:gaps:probe');
    const cpu = process.cpuUsage(cpuBefore);
    console.log(`one round trip at a time (GET): ${round(((performance.now() - startedAt) * 1000) / 2000, 0)} µs, Node CPU ${round((cpu.user + cpu.system) / 2000, 0)} µs`);
    probe.disconnect();
    for (const name of names) {
      const key = `bench:gaps:${name.replace(/\W/g, '')}:${Date.now()}`;
      const startAt = Date.now() + 2500 + processes * 300;
      const workers = await Promise.all(
        Array.from({ length: processes }, () =>
          runWorker<{ pid: number; events: [number, number][] }>([name, redis.url, key, String(startAt + ms), String(32 / processes), '0', String(startAt), 'events']),
        ),
      );
      const holds = workers.flatMap((w) => w.events.map(([heldAt, releasedAt]) => ({ pid: w.pid, heldAt, releasedAt }))).sort((a, b) => a.heldAt - b.heldAt);
      const same: number[] = [];
      const other: number[] = [];
      for (let i = 1; i < holds.length; i++) (holds[i]!.pid === holds[i - 1]!.pid ? same : other).push(holds[i]!.heldAt - holds[i - 1]!.releasedAt);
      const sections = holds.map((h) => h.releasedAt - h.heldAt);
      // p50, mean, and the share of the run's time that went there (the means are what throughput sees).
      const figures = (values: number[]): string => {
        const sum = values.reduce((a, b) => a + b, 0);
        return `p50 ${round(quantile(values, 0.5), 3)} / mean ${round(sum / values.length, 3)} ms, ${round((100 * sum) / ms, 0)} % of the time`;
      };
      console.log(
        `${processes} × ${32 / processes} ${name}: ${round(holds.length / (ms / 1000), 0)} acq/s; section ${figures(sections)}; ` +
          `next holder in the same process: ${same.length} × ${figures(same)}; in another: ${other.length} × ${figures(other)}`,
      );
    }
  } finally {
    await redis.stop();
  }
}

runMain(main);
