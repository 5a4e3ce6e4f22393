// Scenario 4's worker process: `tasks` tasks contend for one hot lock until the deadline; the
// critical section is GET + SET of a counter. Prints one JSON line with its figures.
import { Redis } from 'ioredis';
import { byName } from './contestants';

async function main(): Promise<void> {
  const [name, url, key, deadlineArg, tasksArg] = process.argv.slice(2);
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
