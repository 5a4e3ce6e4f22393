// Scenario 4's worker process: `tasks` tasks contend for one hot lock until the deadline; the
// critical section is GET + SET of a counter (and, with holdMs, a sleep of that long). Prints
// one JSON line with its figures.
import { Redis } from 'ioredis';
import { byName } from './contestants';

async function main(): Promise<void> {
  const [name, url, key, deadlineArg, tasksArg, holdArg = '0', startArg = '0'] = process.argv.slice(2);
  const holdMs = Number(holdArg);
  // Every worker starts at the same instant (when given), so a slow start-up is not a loss of share.
  const startAt = Number(startArg);
  if (startAt > Date.now()) await new Promise((resolve) => setTimeout(resolve, startAt - Date.now()));
  const contestant = byName.get(name!)!;
  const session = await contestant.open(url!);
  const data = new Redis(url!);
  const deadline = Number(deadlineArg);
  const counts: number[] = [];
  const waits: number[] = [];
  await Promise.all(
    Array.from({ length: Number(tasksArg) }, async (_, task) => {
      counts[task] = 0;
      while (Date.now() < deadline) {
        const start = performance.now();
        const release = await session.acquire(key!);
        waits.push(performance.now() - start);
        const value = Number((await data.get(`${key}:counter`)) ?? 0);
        if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
        await data.set(`${key}:counter`, value + 1);
        await release();
        counts[task]!++;
      }
    }),
  );
  console.log(JSON.stringify({ counts, waits }));
  await data.quit();
  await session.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
