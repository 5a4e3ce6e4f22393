import { existsSync } from 'node:fs';
import { hasRedisServer } from '../../scripts/redisServer';

/** Fails the run at once, with the fix, when there is no Redis to test against. */
export default async function globalSetup(): Promise<void> {
  if (process.env.REDIS_URL || hasRedisServer()) return;
  const docker = process.env.DOCKER_HOST !== undefined || existsSync('/var/run/docker.sock');
  if (docker) return;
  throw new Error('No Redis to test against: install redis-server (apt-get install -y redis-server), set REDIS_URL, or run a Docker engine.');
}
