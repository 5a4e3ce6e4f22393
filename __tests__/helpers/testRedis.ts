import type { Redis } from 'ioredis';
import { settled, until } from './time';

export { RedisServer } from '../../scripts/redisServer';

/** How many times each command ran on a server, from INFO commandstats (`evalsha`, `hget`, ...). */
export async function commandCounts(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const counts: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

/** Script calls (EVALSHA, or EVAL after NOSCRIPT) the server ran so far. */
export async function scriptCallCount(redis: Redis): Promise<number> {
  const counts = await commandCounts(redis);
  return (counts.evalsha ?? 0) + (counts.eval ?? 0);
}

/**
 * `commandCounts` once they stopped moving for `quietMs` (calls still on their way from other
 * processes have landed); `info` reads 0 (INFO counts itself).
 */
export function settledCommandCounts(redis: Redis, quietMs = 1_000): Promise<Record<string, number>> {
  return settled('the command counts', async () => ({ ...(await commandCounts(redis)), info: 0 }), quietMs);
}

/** The replication offset a node has reached (a master: written; a replica: received). */
async function replicationOffset(node: Redis): Promise<number> {
  return Number(/master_repl_offset:(\d+)/.exec(await node.info('replication'))![1]);
}

/** Resolves once `replica` has everything `master` had written when this was called. */
export async function untilReplicaHasAll(master: Redis, replica: Redis): Promise<void> {
  const written = await replicationOffset(master);
  await until('the replica caught up', async () => (await replicationOffset(replica)) >= written);
}
