// The semaphore scenario's worker process: once connected, it says so (INCR <key>:ready) and
// waits for the common start and deadline (BLPOP <key>:go), then `tasks` tasks take a permit
// until the deadline and hold it for an INCR + DECR of a holders counter (and, with holdMs, a
// sleep of that long between them). Prints one JSON line with its figures; with `timeline`
// ('1'), also each acquisition's [asked, acquired, releasing] on the machine's monotonic clock
// (process.hrtime, one clock for every process), for the free-while-waiting figure.
import { Redis } from 'ioredis';
import { Semaphore as RedisSemaphore } from 'redis-semaphore';
import { LockClient } from './shippedLibrary';
import type { SemaphoreContestant } from './semaphoreScenario';
import { runMain } from './runMain';

type Take = () => Promise<() => Promise<unknown>>;

async function open(contestant: SemaphoreContestant, url: string, key: string, permits: number): Promise<{ take: Take; close: () => Promise<void> }> {
  if (contestant === 'redis-semaphore Semaphore') {
    const redis = new Redis(url);
    return {
      take: async () => {
        // acquireTimeout is not a retry setting; raised so that a long wait is measured, not failed.
        const semaphore = new RedisSemaphore(redis, key, permits, { lockTimeout: 10_000, acquireTimeout: 600_000 });
        await semaphore.acquire();
        return () => semaphore.release();
      },
      close: async () => void (await redis.quit()),
    };
  }
  const client = new LockClient({ redis: url });
  if (contestant === 'rlock Semaphore') {
    const semaphore = client.getSemaphore(key);
    await semaphore.trySetPermits(permits);
    return {
      take: async () => {
        await semaphore.acquire();
        return () => semaphore.release();
      },
      close: () => client.close(),
    };
  }
  const semaphore = client.getPermitExpirableSemaphore(key);
  await semaphore.trySetPermits(permits);
  return {
    take: async () => {
      const id = await semaphore.acquire(); // watchdog-kept, as an app would call it
      return () => semaphore.release(id);
    },
    close: () => client.close(),
  };
}

async function main(): Promise<void> {
  const [contestant, url, key, tasksArg, permitsArg, holdArg = '0', timelineArg = '0'] = process.argv.slice(2);
  const monotonic = (): number => Number(process.hrtime.bigint()) / 1e6;
  const timeline: [number, number, number][] | undefined = timelineArg === '1' ? [] : undefined;
  const holdMs = Number(holdArg);
  const { take, close } = await open(contestant as SemaphoreContestant, url!, key!, Number(permitsArg));
  const data = new Redis(url!);
  // Every process starts at once, however slow it was to start up, so that the measured window
  // holds the contention of all four.
  await data.incr(`${key}:ready`);
  const [, go] = (await data.blpop(`${key}:go`, 0))!;
  const [start, deadline] = go.split(':').map(Number) as [number, number];
  await new Promise((resolve) => setTimeout(resolve, start - Date.now()));
  const cpuBefore = process.cpuUsage();
  const counts: number[] = [];
  const waits: number[] = [];
  let maxHolders = 0;
  await Promise.all(
    Array.from({ length: Number(tasksArg) }, async (_, task) => {
      counts[task] = 0;
      while (Date.now() < deadline) {
        const asked = monotonic();
        const release = await take();
        const acquired = monotonic();
        waits.push(acquired - asked);
        maxHolders = Math.max(maxHolders, await data.incr(`${key}:holders`));
        if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
        await data.decr(`${key}:holders`);
        timeline?.push([asked, acquired, monotonic()]);
        await release();
        counts[task]!++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  console.log(JSON.stringify({ counts, waits, maxHolders, cpuMs: (cpu.user + cpu.system) / 1000, timeline }));
  await data.quit();
  await close();
}

runMain(main);
