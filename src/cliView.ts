// What the `rlock` CLI shows of a name: its kind, recognised from its keys, and the view of it
// that `inspect` and `watch` print (text or JSON).
import type { Redis } from 'ioredis';
import { kindOf, type LatchInfo, type LockInfo, type NameKind, type PermitSemaphoreInfo, type SemaphoreInfo } from './introspection';
import type { LockClient } from './LockClient';
import { clientQueueExpiryKeyOf, clientQueueKeyOf, fenceKeyOf } from './names';

/** What `--kind` takes on inspect, watch and force-unlock (`list` has no `fair`: a fair lock lists as a lock). */
export const NAME_KINDS: readonly NameKind[] = ['lock', 'fair', 'rw', 'semaphore', 'permits', 'latch'];

/** The kind of `name`: the one the operator said, else recognised from its keys; a name with no keys is a free lock. */
export async function resolveKind(client: LockClient, redis: Redis, keyPrefix: string, name: string, said: NameKind | undefined): Promise<NameKind> {
  return said ?? (await kindOf(redis, keyPrefix, client.getLock(name).key)) ?? 'lock';
}

/**
 * A name or key as a terminal shows it: JSON-quoted when it holds a control character, so that
 * a name with a newline cannot print as two entries, nor an escape sequence rewrite the screen.
 */
export function shown(text: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f\u007f-\u009f]/.test(text) ? JSON.stringify(text) : text;
}

export function describeTtl(ttl: number): string {
  if (ttl === -1) return 'no expiry';
  if (ttl < 0) return 'no TTL';
  return `ttl ${(ttl / 1000).toFixed(1)} s`;
}

function clientLabel(clientName: string | undefined): string {
  return clientName === undefined ? '(unknown: not connected, or CLIENT LIST refused)' : JSON.stringify(clientName);
}

/** A lock's holders, and a fair lock's queue when it has one. */
export function formatInfo(info: LockInfo): string {
  const head = `${shown(info.name)} (key ${shown(info.key)}): ${info.locked ? 'locked' : 'free'}, ${describeTtl(info.ttl)}, ${info.waitingClients} client(s) waiting`;
  const holders = info.holders.map((h) => `  held by ${h.clientId}:${h.ownerId} × ${h.holdCount}${h.mode ? ` (${h.mode})` : ''}, client ${clientLabel(h.clientName)}`);
  const queue = (info.queue ?? []).map((w, i) => `  ${i + 1}. ${w.clientId}:${w.ownerId} waits (lease ${w.leaseMs} ms, entry ${describeTtl(w.expiresInMs)}), client ${clientLabel(w.clientName)}`);
  return [head, ...holders, ...queue].join('\n');
}

const LATCH_STATES: Partial<Record<LatchInfo['state'], string>> = { open: 'open', unset: 'never set', deleted: 'deleted' };

export function formatOther(info: SemaphoreInfo | PermitSemaphoreInfo | LatchInfo): string {
  const waiting = `${info.waitingClients} client(s) waiting`;
  const head = `${shown(info.name)} (key ${shown(info.key)})`;
  if ('count' in info) return `${head}: latch ${LATCH_STATES[info.state] ?? `count ${info.count}`}, ${waiting}`;
  if ('reservation' in info) {
    const free = info.availablePermits === null ? 'never set' : `${info.availablePermits} permit(s) free`;
    const reserved = info.reservation
      ? [`  reserved for ${info.reservation.clientId}:${info.reservation.waiterId}: ${info.reservation.permits} permits, ${describeTtl(info.reservation.expiresInMs)}`]
      : [];
    return [`${head}: semaphore, ${free}, ${waiting}`, ...reserved].join('\n');
  }
  const total = info.totalPermits === null ? 'never set' : `${info.availablePermits} of ${info.totalPermits} permit(s) free`;
  const permits = info.permits.map((permit) => `  permit ${permit.id}, lease left ${(permit.expiresInMs / 1000).toFixed(1)} s`);
  const claimed = info.claim ? [`  next free permit kept for ${info.claim.clientId}, ${describeTtl(info.claim.expiresInMs)}`] : [];
  return [`${head}: permit-expirable semaphore, ${total}, ${waiting}`, ...permits, ...claimed].join('\n');
}

/** Where `view` looks for a name's keys: the CLI's connection, `--prefix`, and whether it was given. */
export interface KeysPlace {
  redis: Redis;
  keyPrefix: string;
  prefixGiven: boolean;
}

/**
 * Whether a lock's name has any key: its hash, its queue of waiting clients or a fenced lock's
 * token (a free lock has none; a name mistyped, or given without its prefix, has none either).
 */
async function hasLockKeys(place: KeysPlace, key: string): Promise<boolean> {
  const { redis, keyPrefix } = place;
  return (await redis.exists(key, clientQueueKeyOf(keyPrefix, key), clientQueueExpiryKeyOf(keyPrefix, key), fenceKeyOf(keyPrefix, key))) > 0;
}

/** A lock's name with no keys: said so, since "free, no TTL" read as a lock that is there. */
function formatNoKeys(info: LockInfo, prefixGiven: boolean): string {
  const head = `${shown(info.name)} (key ${shown(info.key)}): no keys under this name (free if it is a lock's; or not in use)`;
  return prefixGiven ? head : `${head}
  no --prefix given: \`rlock list\` shows the names in use, with their prefixes`;
}

/** What `inspect` and `watch` print of `name` of kind `kind`: one text block, or one JSON value. */
export async function view(client: LockClient, name: string, kind: NameKind, place: KeysPlace): Promise<{ text: string; json: object }> {
  if (kind === 'semaphore' || kind === 'permits' || kind === 'latch') {
    const other = kind === 'semaphore' ? await client.getSemaphore(name).inspect() : kind === 'permits' ? await client.getPermitExpirableSemaphore(name).inspect() : await client.getCountDownLatch(name).inspect();
    return { text: formatOther(other), json: other };
  }
  const info = await client.inspectAs(name, kind);
  if (kind === 'rw') return { text: `${formatInfo(info)}\n  mode ${info.mode ?? 'free'}, ${info.waitingWriters ?? 0} writer(s) waiting`, json: info };
  if (kind === 'fair') return { text: formatInfo(info), json: info };
  // A fenced lock's holder also has a token (the plain lock's answer is null).
  const token = await client.getFencedLock(name).getToken();
  if (token !== null) return { text: `${formatInfo(info)}\n  fencing token ${token}`, json: { ...info, fencingToken: token.toString(), exists: true } };
  // `exists` (JSON): false when the name has no keys at all.
  if (!info.locked && info.ttl === -2 && info.waitingClients === 0 && !(await hasLockKeys(place, info.key))) {
    return { text: formatNoKeys(info, place.prefixGiven), json: { ...info, exists: false } };
  }
  return { text: formatInfo(info), json: { ...info, exists: true } };
}
