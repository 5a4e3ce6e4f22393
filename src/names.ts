/**
 * The Redis names of one lock. The channel and latch keys carry the lock key as a hash tag so
 * that, on Cluster, every key a script names lives in the lock's slot (no CROSSSLOT). A lock key
 * that already has a hash tag (`{...}`) keeps it: wrapping it again would move the channel to
 * another slot, so there the name is appended bare, as Redisson does.
 */
export interface LockNames {
  /** The lock hash: `<keyPrefix><name>`. */
  key: string;
  /** Where releases are published: `rlock__channel:{<key>}`. */
  channel: string;
  /** Prefix of the per-request release latch keys: `rlock__unlock_latch:{<key>}:`. */
  latchPrefix: string;
}

/** Whether Redis Cluster hashes `key` by a hash tag: a `{` followed later by a non-empty `...}`. */
function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  return open >= 0 && key.indexOf('}', open + 1) > open + 1;
}

function tagged(prefix: string, key: string): string {
  return hasHashTag(key) ? `${prefix}:${key}` : `${prefix}:{${key}}`;
}

export function lockNames(keyPrefix: string, name: string): LockNames {
  const key = keyPrefix + name;
  return {
    key,
    channel: tagged('rlock__channel', key),
    latchPrefix: `${tagged('rlock__unlock_latch', key)}:`,
  };
}

/** What the release scripts publish; Redisson's UNLOCK_MESSAGE. */
export const UNLOCK_MESSAGE = '0';
