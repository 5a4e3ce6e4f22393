// Scenario 4's worker process: `tasks` tasks contend for one hot lock until the deadline; the
// critical section is GET + SET of a counter (and, with holdMs, a sleep of that long). Prints
// one JSON line with its figures. With `measureFrom` (ms since the epoch, after startAt), the
// time before it is a warm-up: the tasks contend as in the rest of the run, but only the
// acquisitions that take the lock from then on are counted (with their waits), and requests and
// CPU time are counted from then on
// (`total` still counts every acquisition, for the lost-update check).
import { Redis } from 'ioredis';
import { byName } from './contestants';
import { runMain } from './runMain';

// Requests this process sends (every connection, subscriber included; never a script's inner
// calls, which Redis's commandstats would count too), less the critical section's GET + SET.
let requests = 0;
const send = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
  requests++;
  return send.apply(this, args);
};

async function main(): Promise<void> {
  const [name, url, key, deadlineArg, tasksArg, holdArg = '0', startArg = '0', eventsArg = '', measureFromArg = '0'] = process.argv.slice(2);
  // 'events': also report each hold's start and end on the machine's clock (bench/gaps.ts).
  const events: [number, number][] | undefined = eventsArg === 'events' ? [] : undefined;
  const now = (): number => performance.timeOrigin + performance.now();
  const holdMs = Number(holdArg);
  // Every worker starts at the same instant (when given), so a slow start-up is not a loss of share.
  const startAt = Number(startArg);
  if (startAt > Date.now()) await new Promise((resolve) => setTimeout(resolve, startAt - Date.now()));
  const contestant = byName.get(name!)!;
  const session = await contestant.open(url!);
  const data = new Redis(url!);
  const deadline = Number(deadlineArg);
  requests = 0; // connecting is not part of the contest
  let cpuAtStart = process.cpuUsage();
  // performance.now() at which the measured window opens (0: no warm-up).
  const measureFrom = Number(measureFromArg) > 0 ? performance.now() + (Number(measureFromArg) - Date.now()) : 0;
  const warmedUp =
    measureFrom > 0 &&
    setTimeout(() => {
      requests = 0;
      cpuAtStart = process.cpuUsage();
    }, measureFrom - performance.now());
  let total = 0;
  const counts: number[] = [];
  const waits: number[] = [];
  await Promise.all(
    Array.from({ length: Number(tasksArg) }, async (_, task) => {
      counts[task] = 0;
      while (Date.now() < deadline) {
        const start = performance.now();
        const release = await session.acquire(key!);
        const heldFrom = performance.now();
        const measured = heldFrom >= measureFrom;
        if (measured) waits.push(heldFrom - start);
        const heldAt = events && now();
        const value = Number((await data.get(`${key}:counter`)) ?? 0);
        if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
        await data.set(`${key}:counter`, value + 1);
        if (events) events.push([heldAt!, now()]);
        await release();
        total++;
        if (measured) counts[task]!++;
      }
    }),
  );
  if (warmedUp) clearTimeout(warmedUp);
  const acquisitions = counts.reduce((a, b) => a + b, 0);
  const cpu = process.cpuUsage(cpuAtStart);
  console.log(JSON.stringify({ counts, waits, total, requests: requests - 2 * acquisitions, cpuUs: cpu.user + cpu.system, ...(events && { pid: process.pid, events }) }));
  await data.quit();
  await session.close();
}

runMain(main);
