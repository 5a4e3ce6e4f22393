import type { Redis } from 'ioredis';

export { RedisServer } from '../../scripts/redisServer';

/** How many times each command ran on a server, from INFO commandstats (`evalsha`, `hget`, ...). */
export async function commandCounts(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}
