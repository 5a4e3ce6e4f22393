import type { LockClient } from '../../src';
import { sleep } from './time';

/**
 * 4 tasks in each of `clients` take a permit (through `hold`, which runs `section` holding it) in
 * a loop, holding it 5 ms, until `holds` holds were made in all: the mean number of holds per
 * task, the fewest any task got, the longest wait for a permit in ms, and the most holds that
 * other tasks made during one wait. A starved task shows in the last one whatever the machine's
 * speed (a loaded CI box stretches every wait in ms, not how often a task is passed over).
 */
export async function takeTurns(
  clients: LockClient[],
  hold: (client: LockClient, section: () => Promise<void>) => Promise<unknown>,
  holds = 1_800,
): Promise<{ mean: number; fewest: number; longest: number; longestOvertaken: number }> {
  const served = Array.from({ length: 4 * clients.length }, () => 0);
  let total = 0;
  let longest = 0;
  let longestOvertaken = 0;
  await Promise.all(
    served.map(async (_, task) => {
      while (total < holds) {
        const asked = performance.now();
        const seen = total;
        await hold(clients[task % clients.length]!, async () => {
          longest = Math.max(longest, performance.now() - asked);
          longestOvertaken = Math.max(longestOvertaken, total - seen);
          total++;
          served[task]!++;
          await sleep(5);
        });
      }
    }),
  );
  return { mean: total / served.length, fewest: Math.min(...served), longest, longestOvertaken };
}
