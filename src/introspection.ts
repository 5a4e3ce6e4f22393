import type { Cluster, Redis } from 'ioredis';
import { kindKeyOf, queueKeyOf } from './names';
import { inDatabase, readOne, readValues } from './services/database';

/** One owner holding a lock. */
export interface LockHolder {
  clientId: string;
  ownerId: string;
  holdCount: number;
  /** The holding client's `name` option, when its connection is still there to say it. */
  clientName: string | undefined;
  /** A read-write lock's: whether these are read or write holds (an owner may have both). */
  mode?: 'read' | 'write';
  /** A read-write lock's: how long this holder's own lease still runs, in ms. */
  expiresInMs?: number;
}

/** What `inspect()` tells about a lock. */
export interface LockInfo {
  name: string;
  key: string;
  locked: boolean;
  holders: LockHolder[];
  /** Remaining lease in ms; -2 when there is no lock, -1 when it never expires (as PTTL). */
  ttl: number;
  /** Clients with waiters parked on the lock (for a plain lock: the clients in its queue of waiting clients). */
  waitingClients: number;
  /** A fair lock's queue, first in line first: who waits, with the lease each asked for. */
  queue?: QueuedWaiter[];
  /** A read-write lock's mode while held. */
  mode?: 'read' | 'write';
  /** A read-write lock's waiting writers (each keeps new readers out). */
  waitingWriters?: number;
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

const READ_WRITE_FIELD = /^[\w-]{21}:[\w-]{21}(:write)?$/;

/**
 * Whether a hash has the layout of a lock: every field `<clientId>:<ownerId>`, every value a
 * positive count; or of a read-write lock: `mode` (`read` or `write`) beside such fields, write
 * holds with `:write` appended.
 */
export function isLockHash(hash: Record<string, string>): boolean {
  const fields = Object.keys(hash);
  if ('mode' in hash) {
    return (hash.mode === 'read' || hash.mode === 'write') && fields.length > 1 &&
      fields.every((field) => field === 'mode' || (READ_WRITE_FIELD.test(field) && HOLD_COUNT.test(hash[field]!)));
  }
  return fields.length > 0 && fields.every((field) => OWNER_FIELD.test(field) && HOLD_COUNT.test(hash[field]!));
}

/**
 * HGETALL, PTTL, the deadlines of the lock's queue of waiting clients (`clientsExpiryKey`) and
 * TIME in one round trip; then CLIENT LIST for names, if anyone holds it.
 */
export async function inspectLock(redis: Redis | Cluster, name: string, key: string, clientsExpiryKey: string): Promise<LockInfo> {
  const [hash, ttl, deadlines, [seconds, micros]] = (await readValues(redis, (reads) => reads.hgetall(key).pttl(key).zrange(clientsExpiryKey, 0, -1, 'WITHSCORES').time())) as [
    Record<string, string>,
    number,
    string[],
    [string, string],
  ];
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
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
  // An entry past its deadline is dead (its client stopped refreshing it): the next script drops it.
  let waitingClients = 0;
  for (let i = 1; i < deadlines.length; i += 2) if (Number(deadlines[i]) > now) waitingClients++;
  return { name, key, locked: holders.length > 0, holders, ttl, waitingClients };
}

/** How many clients have waiters subscribed to `channel` (one subscriber connection per client). */
export async function subscriberCount(redis: Redis | Cluster, channel: string, sharded: boolean): Promise<number> {
  // Classic pub/sub on a Cluster: a subscriber sits on a node of its own choosing, and NUMSUB
  // counts only the subscribers of the node it is asked on.
  if (redis.isCluster && !sharded) return subscribersOnEveryNode(redis as Cluster, channel);
  const [, count] = (await (sharded ? redis.pubsub('SHARDNUMSUB', channel) : redis.pubsub('NUMSUB', channel))) as [string, number | string];
  return Number(count ?? 0);
}

/** What `inspect()` of a semaphore tells. */
export interface SemaphoreInfo {
  name: string;
  key: string;
  /** Free permits now; null when never set. */
  availablePermits: number | null;
  /** The multi-permit waiter that smaller requests may not overtake, if one reserved. */
  reservation: { clientId: string; waiterId: string; permits: number; expiresInMs: number } | null;
  waitingClients: number;
}

/** What `inspect()` of a permit-expirable semaphore tells. */
export interface PermitSemaphoreInfo {
  name: string;
  key: string;
  /** The total of permits; null when never set. */
  totalPermits: number | null;
  availablePermits: number;
  /** Permits on lease (expired ones left out), soonest to expire first. */
  permits: { id: string; expiresInMs: number }[];
  /** The client the next free permit is kept for (a waiter of it waited long), if one claimed it: a free permit others cannot take. */
  claim: { clientId: string; expiresInMs: number } | null;
  waitingClients: number;
}

/**
 * A count-down latch's state: `closed` (a count is set), `open` (it reached 0), `unset` (never
 * set), `deleted` (for a while after `delete()`; then `unset`).
 */
export type LatchState = 'closed' | 'open' | 'unset' | 'deleted';

/** What `inspect()` of a count-down latch tells. */
export interface LatchInfo {
  name: string;
  key: string;
  /** The count left; 0 unless `closed`. */
  count: number;
  state: LatchState;
  waitingClients: number;
}

async function subscribersOnEveryNode(cluster: Cluster, channel: string): Promise<number> {
  const counts = await Promise.all(cluster.nodes('all').map((node) => node.pubsub('NUMSUB', channel) as Promise<[string, number]>));
  return counts.reduce((sum, [, count]) => sum + Number(count), 0);
}

/**
 * clientId → name, from the connection names. CLIENT LIST is `@dangerous` (it shows every
 * connection of the server, other tenants' too), so a least-privilege ACL refuses it: the names
 * then stay unknown and inspect() answers the rest. Any other failure is the caller's to see.
 */
export async function clientNames(redis: Redis | Cluster): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const node of masters(redis)) {
    let list: string;
    try {
      list = String(await node.client('LIST'));
    } catch (error) {
      if (/^NOPERM /.test((error as Error)?.message ?? '')) continue;
      throw error;
    }
    for (const match of list.matchAll(/ name=rlock:([\w-]{21}):(\S*)/g)) names.set(match[1]!, match[2]!);
  }
  return names;
}

/** Lock names under `keyPrefix` whose name matches the glob `match`, by SCAN (never KEYS) on every master. */
export async function* listLockNames(redis: Redis | Cluster, keyPrefix: string, match: string, count: number): AsyncGenerator<string> {
  for await (const { node, keys } of scanBatches(redis, keyPrefix, match, count, 'hash')) {
    for (const [key, kind] of await lockKinds(node, keys)) if (kind) yield key.slice(keyPrefix.length);
  }
}

/** What a name is: a lock (plain, fair or fenced: one layout), a read-write lock, a semaphore, a permit-expirable semaphore or a latch. */
export type PrimitiveKind = 'lock' | 'rw' | 'semaphore' | 'permits' | 'latch';

/** What `kindOf` tells apart: the kinds, and a fair lock while its queue has waiters (its hash is a plain lock's). */
export type NameKind = PrimitiveKind | 'fair';

/** Each kind as an error message names it. */
export const KIND_NAMES: Record<NameKind, string> = {
  lock: 'lock',
  fair: 'fair lock',
  rw: 'read-write lock',
  semaphore: 'semaphore',
  permits: 'permit-expirable semaphore',
  latch: 'count-down latch',
};

/** The kinds a marker key (names.ts, kindKeyOf) may name. */
const MARKED_KINDS: readonly string[] = ['semaphore', 'permits', 'latch'] satisfies PrimitiveKind[];

/**
 * Every name under `keyPrefix` matching `match` with its kind, by SCAN (never KEYS) on every
 * master, with the commands the library's ACL recipe grants (no TYPE): lock hashes by their
 * layout, then the integer strings by their kind marker. A latch is found while it has a count
 * (an open one has only its marker).
 */
export async function* listNamesWithKinds(redis: Redis | Cluster, keyPrefix: string, match: string, count: number): AsyncGenerator<{ name: string; kind: PrimitiveKind }> {
  for await (const { node, keys } of scanBatches(redis, keyPrefix, match, count, 'hash')) {
    for (const [key, kind] of await lockKinds(node, keys)) if (kind) yield { name: key.slice(keyPrefix.length), kind };
  }
  for await (const { node, keys } of scanBatches(redis, keyPrefix, match, count, 'string')) {
    const markers = await inDatabase(node, (reads) => {
      for (const key of keys) reads.get(kindKeyOf(keyPrefix, key));
    });
    for (let i = 0; i < keys.length; i++) {
      const [error, marker] = markers?.[i] ?? [new Error('pipeline gave no replies')];
      if (error) throw error;
      if (typeof marker === 'string' && MARKED_KINDS.includes(marker)) yield { name: keys[i]!.slice(keyPrefix.length), kind: marker as PrimitiveKind };
    }
  }
}

/**
 * The kind of the primitive at `key`, from its kind marker, else whether its hash has a
 * read-write lock's mode, else whether a fair lock's queue has waiters; undefined for a name
 * that is none of them (a free lock, or not ours).
 */
export async function kindOf(redis: Redis | Cluster, keyPrefix: string, key: string): Promise<NameKind | undefined> {
  const replies = await inDatabase(redis, (reads) => reads.get(kindKeyOf(keyPrefix, key)).hexists(key, 'mode').exists(queueKeyOf(keyPrefix, key)).exists(key));
  if (replies.length !== 4) throw new Error('pipeline gave no replies');
  const [[markerError, marker], [modeError, mode], [queueError, queued], [keyError, present]] = replies as [[Error | null, unknown], [Error | null, unknown], [Error | null, unknown], [Error | null, unknown]];
  if (markerError) throw markerError;
  if (queueError) throw queueError;
  if (keyError) throw keyError;
  // A latch's marker outlives its count (open: for good; deleted: a while), and a lock may take
  // the name since: a hash there is the lock, not the latch.
  const lockOverLatch = (marker === 'latch' || marker === 'deleted') && !modeError && present === 1;
  if (marker === 'deleted' && !lockOverLatch) return 'latch';
  if (typeof marker === 'string' && MARKED_KINDS.includes(marker) && !lockOverLatch) return marker as PrimitiveKind;
  // WRONGTYPE: a string no primitive marked, not ours.
  if (modeError && !/^WRONGTYPE /.test(modeError.message)) throw modeError;
  if (modeError) return undefined;
  if (mode === 1) return 'rw';
  if (queued === 1) return 'fair';
  return present === 1 ? 'lock' : undefined;
}

/** Each hash key with its kind when it has a lock's layout ('rw' with a mode), else undefined. */
async function lockKinds(node: Redis, keys: string[]): Promise<[string, PrimitiveKind | undefined][]> {
  if (keys.length === 0) return [];
  const hashes = await inDatabase(node, (reads) => {
    for (const key of keys) reads.hgetall(key);
  });
  return keys.map((key, i) => {
    const [error, hash] = hashes[i] ?? [];
    // A key that changed type since SCAN is not a lock; a refusal (NOPERM: SCAN shows every
    // key, an ACL may forbid reading them) must not pass for "no locks".
    if (error && !/^WRONGTYPE /.test(error.message)) throw error;
    if (error || !hash || !isLockHash(hash as Record<string, string>)) return [key, undefined];
    return [key, 'mode' in (hash as Record<string, string>) ? 'rw' : 'lock'];
  });
}

/** The keys of `type` under `keyPrefix` matching `match`, batch by batch, by SCAN on every master. */
async function* scanBatches(redis: Redis | Cluster, keyPrefix: string, match: string, count: number, type: 'hash' | 'string'): AsyncGenerator<{ node: Redis; keys: string[] }> {
  const pattern = escapeGlob(keyPrefix) + match;
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = (await readOne(node, (reads) => reads.scan(cursor, 'MATCH', pattern, 'COUNT', count, 'TYPE', type))) as [string, string[]];
      cursor = next;
      if (keys.length > 0) yield { node, keys };
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
