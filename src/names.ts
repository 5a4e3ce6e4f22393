/**
 * The Redis names of one lock. The lock hash is `<keyPrefix><name>`. The channel and latch keys
 * carry the lock key as a hash tag so that, on Cluster, every key a script names lives in the
 * lock's slot (no CROSSSLOT). A lock key that already has a hash tag (`{...}`) keeps it: wrapping
 * it again would move the channel to another slot, so there the key is appended bare, as
 * Redisson does. They are derived when needed rather than stored: a process may hold 10 000s.
 */
/** Whether Redis Cluster hashes `key` by a hash tag: a `{` followed later by a non-empty `...}`. */
function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  return open >= 0 && key.indexOf('}', open + 1) > open + 1;
}

function tagged(prefix: string, key: string): string {
  return hasHashTag(key) ? `${prefix}:${key}` : `${prefix}:{${key}}`;
}

/** Where releases of lock `key` are published: `rlock__channel:{<key>}`. */
export function channelOf(key: string): string {
  return tagged('rlock__channel', key);
}

/** Prefix of the per-request release latch keys of lock `key`: `rlock__unlock_latch:{<key>}:`. */
export function latchPrefixOf(key: string): string {
  return `${tagged('rlock__unlock_latch', key)}:`;
}

/** What the release scripts publish; Redisson's UNLOCK_MESSAGE. */
export const UNLOCK_MESSAGE = '0';

/** A fair lock's queue, zset member → arrival order: `rlock__queue:{<key>}`. */
export function queueKeyOf(key: string): string {
  return tagged('rlock__queue', key);
}

/** A fair lock's queue deadlines, zset member → Redis ms: `rlock__queue_expiry:{<key>}`. */
export function queueExpiryKeyOf(key: string): string {
  return tagged('rlock__queue_expiry', key);
}

/**
 * Where a fair lock's release hands the lock to a waiter of client `clientId`: the prefix
 * `rlock__grant:{<key>}:` plus the clientId, one channel per client and lock, in the lock's slot.
 */
export function grantChannelPrefixOf(key: string): string {
  return `${tagged('rlock__grant', key)}:`;
}
