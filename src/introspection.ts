import type { Cluster, Redis } from 'ioredis';

/** One owner holding a lock. */
export interface LockHolder {
  clientId: string;
  ownerId: string;
  holdCount: number;
  /** The holding client's `name` option, when its connection is still there to say it. */
  clientName: string | undefined;
}

/** What `inspect()` tells about a lock. */
export interface LockInfo {
  name: string;
  key: string;
  locked: boolean;
  holders: LockHolder[];
  /** Remaining lease in ms; -2 when there is no lock, -1 when it never expires (as PTTL). */
  ttl: number;
  /** Clients with waiters parked on the lock (for a plain lock: connections subscribed to its release channel). */
  waitingClients: number;
  /** A fair lock's queue, first in line first: who waits, with the lease each asked for. */
  queue?: QueuedWaiter[];
}

/** One waiter in a fair lock's queue. */
export interface QueuedWaiter {
  clientId: string;
  ownerId: string;
  leaseMs: number;
  /** Remaining time before the entry is dropped unless its client refreshes it, in ms. */
  expiresInMs: number;
  clientName: string | undefined;
}

/** Connection names are `rlock:<clientId>:<name>`, so that an operator (and inspect) can tell who is who. */
export const CONNECTION_NAME_PREFIX = 'rlock:';

export function connectionName(clientId: string, name: string): string {
  return `${CONNECTION_NAME_PREFIX}${clientId}:${name}`;
}

const OWNER_FIELD = /^([\w-]{21}):([\w-]{21})$/;
const HOLD_COUNT = /^[1-9]\d*$/;

/** Whether a hash has the layout of a lock: every field `<clientId>:<ownerId>`, every value a positive count. */
export function isLockHash(hash: Record<string, string>): boolean {
  const fields = Object.keys(hash);
  return fields.length > 0 && fields.every((field) => OWNER_FIELD.test(field) && HOLD_COUNT.test(hash[field]!));
}

/**
 * HGETALL, PTTL and PUBSUB NUMSUB (SHARDNUMSUB when sharded) of the release `channel` in one
 * round trip; then CLIENT LIST for names, if anyone holds it.
 */
export async function inspectLock(redis: Redis | Cluster, name: string, key: string, channel: string, sharded: boolean): Promise<LockInfo> {
  const pipeline = redis.pipeline().hgetall(key).pttl(key);
  const replies = await (sharded ? pipeline.pubsub('SHARDNUMSUB', channel) : pipeline.pubsub('NUMSUB', channel)).exec();
  const failed = replies?.find(([error]) => error);
  if (!replies || failed) throw failed?.[0] ?? new Error('pipeline gave no replies');
  const hash = replies[0]![1] as Record<string, string>;
  const ttl = replies[1]![1] as number;
  const numsub = replies[2]![1] as [string, number | string];
  const holders: LockHolder[] = [];
  for (const [field, count] of Object.entries(hash)) {
    const match = OWNER_FIELD.exec(field);
    if (!match) continue;
    holders.push({ clientId: match[1]!, ownerId: match[2]!, holdCount: Number(count), clientName: undefined });
  }
  if (holders.length > 0) {
    const names = await clientNames(redis);
    for (const holder of holders) holder.clientName = names.get(holder.clientId);
  }
  let waitingClients = Number(numsub[1] ?? 0);
  // Classic pub/sub on a Cluster: a subscriber sits on a node of its own choosing, and NUMSUB
  // counts only the subscribers of the node it is asked on.
  if (redis.isCluster && !sharded) waitingClients = await subscribersOnEveryNode(redis as Cluster, channel);
  return { name, key, locked: holders.length > 0, holders, ttl, waitingClients };
}

async function subscribersOnEveryNode(cluster: Cluster, channel: string): Promise<number> {
  const counts = await Promise.all(cluster.nodes('all').map((node) => node.pubsub('NUMSUB', channel) as Promise<[string, number]>));
  return counts.reduce((sum, [, count]) => sum + Number(count), 0);
}

/** clientId → name, from the connection names; empty when CLIENT LIST is not allowed. */
export async function clientNames(redis: Redis | Cluster): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const node of masters(redis)) {
    let list: string;
    try {
      list = String(await node.client('LIST'));
    } catch {
      continue; // an ACL without CLIENT LIST: names stay unknown
    }
    for (const match of list.matchAll(/ name=rlock:([\w-]{21}):(\S*)/g)) names.set(match[1]!, match[2]!);
  }
  return names;
}

/** Lock names under `keyPrefix` whose name matches the glob `match`, by SCAN (never KEYS) on every master. */
export async function* listLockNames(redis: Redis | Cluster, keyPrefix: string, match: string, count: number): AsyncGenerator<string> {
  const pattern = escapeGlob(keyPrefix) + match;
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count, 'TYPE', 'hash');
      cursor = next;
      if (keys.length === 0) continue;
      const pipeline = node.pipeline();
      for (const key of keys) pipeline.hgetall(key);
      const hashes = (await pipeline.exec()) ?? [];
      for (let i = 0; i < keys.length; i++) {
        const [error, hash] = hashes[i] ?? [];
        if (!error && hash && isLockHash(hash as Record<string, string>)) yield keys[i]!.slice(keyPrefix.length);
      }
    } while (cursor !== '0');
  }
}

/** The nodes that hold keys: every master of a Cluster, or the one server. */
function masters(redis: Redis | Cluster): Redis[] {
  return redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
}

/** The prefix is literal: glob characters in it must not match anything else. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
