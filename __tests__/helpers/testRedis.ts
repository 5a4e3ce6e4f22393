import type { Redis } from 'ioredis';
import { RedisServer } from '../../scripts/redisServer';
import { settled, until } from './time';

export { RedisServer };

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

/**
 * Runs `fn` with a replica of `primary` (a private redis-server started for it), once the primary
 * sees it in sync; resumes the replica (`fn` may have paused it) and stops it afterwards.
 */
export async function withReplica<T>(primary: { admin: Redis; server: { port: number } }, fn: (replica: RedisServer) => Promise<T>): Promise<T> {
  await primary.admin.config('SET', 'repl-diskless-sync-delay', '0'); // else the first sync waits 5 s
  const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(primary.server.port)]);
  try {
    await until('the replica is in sync', async () => /slave0:.*state=online/.test(await primary.admin.info('replication')));
    return await fn(replica);
  } finally {
    replica.resume();
    await replica.stop();
  }
}
