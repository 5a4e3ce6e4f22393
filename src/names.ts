import calculateSlot from 'cluster-key-slot';

/**
 * The Redis names of one lock. The lock hash is `<keyPrefix><name>` (the "key"); every other
 * name a lock uses (channel, latch keys, and those of any further primitive) is
 * `<keyPrefix>rlock__<kind>:...` made by `derivedName`, so that:
 * - every key *and channel* starts with `keyPrefix`: one ACL key pattern and one channel
 *   pattern, `~<keyPrefix>* &<keyPrefix>*`, cover them all, whatever the lock name;
 * - every name hashes to the lock key's Cluster slot, so a script may name them all (no CROSSSLOT).
 * They are derived when needed rather than stored: a process may hold 10 000s.
 *
 * Convention for new primitives: one function per Redis name, `xxxOf(keyPrefix, key)`, each a
 * `derivedName(keyPrefix, '<kind>', key)` with a kind no other name uses.
 */

/**
 * The text Redis Cluster hashes `key` by when it has a hash tag: between its first `{` and the
 * first `}` after that, if non-empty. Undefined when the whole key is hashed.
 */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** A short tag per slot, found once: only names holding a stray `}` need one. */
const slotTags = new Map<number, string>();

function tagOfSlot(slot: number): string {
  let tag = slotTags.get(slot);
  if (tag !== undefined) return tag;
  for (let i = 0; ; i++) {
    tag = i.toString(36); // every slot has one within 4 characters
    if (calculateSlot(tag) === slot) break;
  }
  slotTags.set(slot, tag);
  return tag;
}

/** What every key and channel of the library's own starts with after the key prefix. */
export const INTERNAL_KEY_MARK = 'rlock__';

/**
 * `<keyPrefix>rlock__<kind>:` followed by the lock key, arranged to hash to the key's slot.
 * `keyPrefix` has no `{`, or a whole hash tag of its own (checkClientOptions makes sure), so the
 * name's first `{` is one placed here or the key's own:
 * - the key has a hash tag (its own or the prefix's): the key follows bare, its tag is the name's;
 * - it has none and no `}`: the key becomes the tag, `{<key>}` (the usual case);
 * - it has none but a `}` (a name like `a}b` cannot be wrapped): a tag that hashes to the key's
 *   slot, then the key, which keeps the name unique.
 */
export function derivedName(keyPrefix: string, kind: string, key: string): string {
  const head = `${keyPrefix}${INTERNAL_KEY_MARK}${kind}:`;
  if (hashTagOf(key) !== undefined) return head + key;
  if (!key.includes('}')) return `${head}{${key}}`;
  return `${head}{${tagOfSlot(calculateSlot(key))}}${key}`;
}

/**
 * Where a release of lock `key` wakes a waiting client: the prefix `<keyPrefix>rlock__channel:{<key>}:`
 * plus the clientId, one channel per client and lock, in the lock's slot (only that client hears it).
 */
export function wakeChannelPrefixOf(keyPrefix: string, key: string): string {
  return `${derivedName(keyPrefix, 'channel', key)}:`;
}

/** A plain lock's queue of waiting clients, clientId → arrival order: `<keyPrefix>rlock__clients:{<key>}`. */
export function clientQueueKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'clients', key);
}

/** Its deadlines, clientId → Redis ms: `<keyPrefix>rlock__clients_timeout:{<key>}`. */
export function clientQueueExpiryKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'clients_timeout', key);
}

/**
 * How long a release latch outlives its call, in ms. It only matters when ioredis resends a
 * release whose reply was lost, which happens on reconnect; a successful reply deletes it.
 */
export const RELEASE_LATCH_TTL_MS = 60_000;

/** Prefix of the per-request release latch keys of lock `key`: `<keyPrefix>rlock__unlock_latch:{<key>}:`. */
export function latchPrefixOf(keyPrefix: string, key: string): string {
  return `${derivedName(keyPrefix, 'unlock_latch', key)}:`;
}

/** What a force-unlock publishes (Redisson's UNLOCK_MESSAGE); a release publishes the releasing client's id. */
export const UNLOCK_MESSAGE = '0';

/** A fair lock's queue, zset member → arrival order: `<keyPrefix>rlock__queue:{<key>}`. */
export function queueKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'queue', key);
}

/** A fair lock's queue deadlines, zset member → Redis ms: `<keyPrefix>rlock__queue_expiry:{<key>}`. */
export function queueExpiryKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'queue_expiry', key);
}

/**
 * Where a fair lock's release hands the lock to a waiter of client `clientId`: the prefix
 * `<keyPrefix>rlock__grant:{<key>}:` plus the clientId, one channel per client and lock, in the lock's slot.
 */
export function grantChannelPrefixOf(keyPrefix: string, key: string): string {
  return `${derivedName(keyPrefix, 'grant', key)}:`;
}

/** Where a semaphore's releases wake its waiters (counted messages): `<keyPrefix>rlock__semaphore:{<key>}`. */
export function semaphoreChannelOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'semaphore', key);
}

/**
 * A semaphore's reservation, hash `{ field, permits }` with a TTL: the one multi-permit waiter
 * that smaller requests may not overtake (see docs/design.md, "Semaphores"): `<keyPrefix>rlock__semaphore_reservation:{<key>}`.
 */
export function reservationKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'semaphore_reservation', key);
}

/** A permit-expirable semaphore's permits, zset permit id → expiry (Redis ms): `<keyPrefix>rlock__permits:{<key>}`. */
export function permitsKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'permits', key);
}

/** The clientId a permit-expirable semaphore keeps its next free permit for (see permitSemaphore/acquire-5.lua): `<keyPrefix>rlock__permits_claim:{<key>}`. */
export function permitClaimKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'permits_claim', key);
}

/** Where a permit-expirable semaphore's releases wake its waiters: `<keyPrefix>rlock__permits_channel:{<key>}`. */
export function permitChannelOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'permits_channel', key);
}

/** Where a count-down latch says it opened: `<keyPrefix>rlock__latch:{<key>}`. */
export function latchChannelOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'latch', key);
}

/**
 * A fenced lock's last minted token, a string of digits with the lock's TTL (see
 * fencedLock/acquire-4.lua: once it is gone, Redis's clock keeps tokens increasing):
 * `<keyPrefix>rlock__fence:{<key>}`.
 */
export function fenceKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'fence', key);
}

/** The newest fencing token a `fencedSet` of data key `dataKey` was accepted with: `<keyPrefix>rlock__fenced_by:{<dataKey>}`. */
export function fencedByKeyOf(keyPrefix: string, dataKey: string): string {
  return derivedName(keyPrefix, 'fenced_by', dataKey);
}

/** What a read-write lock's releases publish to wake every parked reader of a process (a counted message, see LockPubSub). */
export const WAKE_ALL_MESSAGE = 'wake:all';

/** What a negative addPermits publishes on a semaphore's channel: every client stops handing permits on in-process (see LocalHandoff.suspended). */
export const PERMITS_CUT_MESSAGE = 'cut';

/** A read-write lock's leases, zset holder field → Redis ms its lease ends: `<keyPrefix>rlock__rw_leases:{<key>}`. */
export function rwLeasesKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'rw_leases', key);
}

/** A read-write lock's waiting writers, zset writer field → Redis ms its entry ends: `<keyPrefix>rlock__rw_writers:{<key>}`. */
export function rwWritersKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'rw_writers', key);
}

/**
 * The client whose writer just passed a read-write lock on to writers of other clients that
 * waited, for a moment (see acquireWrite-4.lua): `<keyPrefix>rlock__rw_turn:{<key>}`.
 */
export function rwTurnKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'rw_turn', key);
}

/** Where a read-write lock wakes its readers: `<keyPrefix>rlock__rw_read:{<key>}`. */
export function rwReadChannelOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'rw_read', key);
}

/** Where a read-write lock wakes its writers: `<keyPrefix>rlock__rw_write:{<key>}`. */
export function rwWriteChannelOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'rw_write', key);
}

/**
 * What a semaphore's, permit-expirable semaphore's or latch's bare integer key is: "semaphore",
 * "permits", "latch" (or "deleted", for a while after a latch's delete()), so that the CLI can
 * list and inspect them: `<keyPrefix>rlock__kind:{<key>}`.
 */
export function kindKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'kind', key);
}

/** A latch's rounds (the current one, how the last ones ended), a hash: `<keyPrefix>rlock__latch_rounds:{<key>}` (see lua/includes/latchRounds.lua). */
export function latchRoundsKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'latch_rounds', key);
}

/** The operation ids of a latch's recent count downs, a set with a TTL (a resent countDown counts once): `<keyPrefix>rlock__latch_ops:{<key>}`. */
export function latchOpsKeyOf(keyPrefix: string, key: string): string {
  return derivedName(keyPrefix, 'latch_ops', key);
}
