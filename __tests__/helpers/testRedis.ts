import type { Redis } from 'ioredis';

export { RedisServer } from '../../scripts/redisServer';

/** How many times each command ran on a server, from INFO commandstats (`evalsha`, `hget`, ...). */
export async function commandCounts(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

/**
 * `commandCounts` once they stopped moving for `quietMs` (calls still on their way from other
 * processes have landed); rejects when they still move after `timeoutMs`.
 */
export async function settledCommandCounts(redis: Redis, quietMs = 1_000, timeoutMs = 15_000): Promise<Record<string, number>> {
  // INFO counts itself.
  const shown = (counts: Record<string, number>): string => JSON.stringify({ ...counts, info: 0 });
  const deadline = performance.now() + timeoutMs;
  let last = shown(await commandCounts(redis));
  for (;;) {
    if (performance.now() > deadline) throw new Error(`the command counts still moved after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    const counts = await commandCounts(redis);
    const now = shown(counts);
    if (now === last) return counts;
    last = now;
  }
}
