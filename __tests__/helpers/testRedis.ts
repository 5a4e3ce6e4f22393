import { Redis } from 'ioredis';
import { hasRedisServer, redisFromEnv } from '../../scripts/redisServer';

export { RedisServer } from '../../scripts/redisServer';

/**
 * Where the behaviour tests run: `REDIS_URL` when set (the test then never flushes or counts
 * commands on it), else a private server. Tests that count commands, kill or pause the server
 * always use `RedisServer.start()`.
 */
export async function testRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (!process.env.REDIS_URL && !hasRedisServer()) return startContainer();
  return redisFromEnv();
}

/** Only where no redis-server binary exists: a Docker engine must answer (globalSetup checked). */
async function startContainer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const { GenericContainer } = await import('testcontainers');
  const container = await new GenericContainer('redis:7').withExposedPorts(6379).start();
  return {
    url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`,
    stop: async () => {
      await container.stop();
    },
  };
}

/** How many times each command ran on a server, from INFO commandstats (`evalsha`, `hget`, ...). */
export async function commandCounts(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}
