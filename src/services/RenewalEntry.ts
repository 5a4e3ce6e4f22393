import type { RenewalTarget } from './RenewalTarget';
import type { LockOwner } from './LockOwner';

/** The renew script of a target that names none (lock/renew.lua). */
export const DEFAULT_RENEW = 'rlock_renew';

/** One hold the watchdog keeps: a copy of its target with a fixed shape (a spread cost more CPU, adding fields to the caller's object more heap). */
export class RenewalEntry implements RenewalTarget {
  readonly name: string;
  readonly key: string;
  readonly field: string;
  readonly owner: LockOwner;
  renewCommand: string | undefined;
  renewKeys: readonly string[] | undefined;
  describe: ((target: RenewalTarget) => string) | undefined;
  /** Aborted with a `LockLostError` on loss; made only when someone asks (withLock does). */
  lost: AbortController | undefined = undefined;

  constructor(
    target: RenewalTarget,
    /**
     * When the owner stops believing it holds the lock (performance.now() ms): the earliest
     * instant Redis can expire it (the send time of the last call that confirmed the lease, plus
     * the lease: Redis set the TTL after that send) minus a margin, see `lostAt`.
     */
    public lostAt: number,
  ) {
    this.name = target.name;
    this.key = target.key;
    this.field = target.field;
    this.owner = target.owner;
    this.renewCommand = target.renewCommand;
    this.renewKeys = target.renewKeys;
    this.describe = target.describe;
  }
}

/**
 * The owner must stop believing before Redis can expire the lock, or a paused or unreachable
 * Redis would let a second owner in while the first still works under its lock. A margin of a
 * tenth of the lease (at most 1 s) absorbs timer and event-loop lag.
 */
export function lostAt(sentAt: number, lease: number): number {
  return sentAt + lease - Math.min(lease / 10, 1000);
}

/**
 * What scopes listen to for the loss of `owner`'s hold on `key` (see `LockOwner.lossWatches`):
 * the watchdog's entry for that hold takes it, and so does the next entry of the same owner and
 * key; a hold the watchdog does not keep (a `leaseTime`) is told through it by its primitive.
 */
export function lossWatch(owner: LockOwner, key: string): AbortController {
  const watches = (owner.lossWatches ??= new Map());
  let controller = watches.get(key);
  // One that aborted told an earlier hold's listeners; this hold gets a fresh one.
  if (!controller || controller.signal.aborted) watches.set(key, (controller = new AbortController()));
  return controller;
}
