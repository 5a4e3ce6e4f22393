// The read-mostly scenario's worker process: `tasks` tasks on one lock until the deadline, one
// access in ten a write (GET + SET of a counter), the others reads (GET, then 1 ms of "work"
// holding the lock). `mode` rw: the read-write lock; rlock: the same load with every access
// exclusive. Prints one JSON line with its counts and waits.
import { Redis } from 'ioredis';
import { LockClient } from './shippedLibrary';
import { runMain } from './runMain';

async function main(): Promise<void> {
  const [mode, url, key, deadlineArg, tasksArg] = process.argv.slice(2);
  const client = new LockClient({ redis: url! });
  const data = new Redis(url!);
  const deadline = Number(deadlineArg);
  const readWaits: number[] = [];
  const writeWaits: number[] = [];
  const work = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 1));
  await Promise.all(
    Array.from({ length: Number(tasksArg) }, async () => {
      while (Date.now() < deadline) {
        const write = Math.random() < 0.1;
        const lock = mode === 'rw' ? client.getReadWriteLock(key!)[write ? 'writeLock' : 'readLock']() : client.getLock(key!);
        const start = performance.now();
        await lock.withLock(async () => {
          (write ? writeWaits : readWaits).push(performance.now() - start);
          const value = Number((await data.get(`${key}:counter`)) ?? 0);
          if (write) await data.set(`${key}:counter`, value + 1);
          else await work();
        });
      }
    }),
  );
  console.log(JSON.stringify({ readWaits, writeWaits }));
  data.disconnect();
  await client.close();
}

runMain(main);
