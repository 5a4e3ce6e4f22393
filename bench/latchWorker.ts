// Scenario 8's worker process: `awaiters` awaits on the count-down latch `<name>:<round>` in each
// of `rounds` rounds, one round after the other (the parent opens each once every process is
// subscribed). Prints one JSON line: per round, when each awaiter resolved (ms on the machine's
// clock, performance.timeOrigin + performance.now(), comparable across processes).
import { LockClient } from './shippedLibrary';
import { runMain } from './runMain';

async function main(): Promise<void> {
  const [url, name, awaitersArg, roundsArg] = process.argv.slice(2);
  const client = new LockClient({ redis: url! });
  const openedAt: number[][] = [];
  try {
    for (let round = 0; round < Number(roundsArg); round++) {
      const latch = client.getCountDownLatch(`${name}:${round}`);
      openedAt.push(
        await Promise.all(
          Array.from({ length: Number(awaitersArg) }, async () => {
            if (!(await latch.await({ waitTime: 30_000 }))) throw new Error(`round ${round}: not opened within 30 s`);
            return performance.timeOrigin + performance.now();
          }),
        ),
      );
    }
  } finally {
    await client.close();
  }
  console.log(JSON.stringify({ openedAt }));
}

runMain(main);
