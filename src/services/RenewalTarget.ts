import type { LockOwner } from './LockOwner';

/** One lock kept alive for one owner. */
export interface RenewalTarget {
  name: string;
  key: string;
  /** `<clientId>:<ownerId>` (or whatever names the hold in the key, e.g. a permit id) */
  field: string;
  owner: LockOwner;
  /**
   * The script that renews this kind of hold, default `rlock_renew` (lock/renew.lua). Every
   * renew script takes KEYS = the keys (see `renewKeys`), ARGV[1] = the lease, ARGV[2..] = the fields, and answers
   * 1 (renewed) or 0 (lost) per key; holds of one kind and slot share a call.
   */
  renewCommand?: string;
  /**
   * The keys its renew script takes for this hold, default `[key]` (a primitive whose state
   * spans keys of one slot names them all); holds of one kind name as many keys each.
   */
  renewKeys?: readonly string[];
  /** How a loss's `LockLostError` names the hold, default `lock "<name>"` (a permit names its semaphore). */
  describe?: (target: RenewalTarget) => string;
}
