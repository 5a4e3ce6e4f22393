import type { LockClient } from '../../src';
import { sleep } from './time';

/**
 * 4 tasks in each of `clients` take a permit (through `hold`, which runs `section` holding it) in
 * a loop for `ms`, holding it 5 ms: the mean number of holds per task, the fewest any task got,
 * and the longest wait for a permit.
 */
export async function takeTurns(clients: LockClient[], hold: (client: LockClient, section: () => Promise<void>) => Promise<unknown>, ms = 3_000): Promise<{ mean: number; fewest: number; longest: number }> {
  const served = Array.from({ length: 4 * clients.length }, () => 0);
  let longest = 0;
  const stop = performance.now() + ms;
  await Promise.all(
    served.map(async (_, task) => {
      while (performance.now() < stop) {
        const asked = performance.now();
        await hold(clients[task % clients.length]!, async () => {
          longest = Math.max(longest, performance.now() - asked);
          served[task]!++;
          await sleep(5);
        });
      }
    }),
  );
  return { mean: served.reduce((a, b) => a + b, 0) / served.length, fewest: Math.min(...served), longest };
}
