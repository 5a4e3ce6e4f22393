import { LockLostError, NotLockOwnerError } from '../errors';
import { diagnostics, type LockEvent } from '../diagnostics';
import { latchPrefixOf } from '../names';
import type { RenewalTarget } from '../services/RenewalTarget';
import { IDEMPOTENT, type LockContext } from '../services/LockContext';
import { inDatabase } from '../services/database';
import type { LockOwner } from '../services/LockOwner';
import type { ScriptedRedis } from '../services/scripts';
import { whileRefused } from './waitLoop';

/** At most how many holds one give-back of unbooked holds releases (each resend of an acquire counted one). */
const MAX_UNBOOKED_GIVE_BACKS = 4;

/** What giving a lock's holds back asks of its handle: the handle's own steps, bound to it. */
export interface ReleasedLock {
  readonly context: LockContext;
  readonly name: string;
  readonly key: string;
  field(owner: LockOwner): string;
  event(owner: LockOwner): LockEvent;
  /** The primitive's release script call (see `LockHandle.releaseCall`). */
  releaseCall(redis: ScriptedRedis, field: string, latch: string, last: boolean, retry?: boolean): Promise<0 | 1 | null>;
}

/**
 * How a lock handle gives its owners' holds back, and what a release finds: one release script
 * call per request under a latch of its own (a resend after a reconnect answers what the first
 * run did; a retry after an unknown outcome too), the watchdog stopped for the last hold, the
 * holds of an acquire that was never booked given back without touching the owner's count, and
 * a hold found gone reported lost, as the watchdog would have.
 */
export class LockRelease {
  /** Where this lock's release latches live (made on the first release). */
  private latchPrefix: string | undefined;

  constructor(private readonly lock: ReleasedLock) {}

  /** A release request's latch key. */
  private latchFor(owner: LockOwner, field: string): string {
    // Unique per release request without a random id: the owner's field (the facets of a
    // read-write lock's owner share its id, not its field) and its count of releases.
    return `${(this.latchPrefix ??= latchPrefixOf(this.lock.context.keyPrefix, this.lock.key))}${field}.${++owner.releases}`;
  }

  /**
   * Gives back a hold Redis gave `owner` that the owner never booked (a release handed it over
   * to a waiter that had stopped waiting): one release of its field, leaving the owner's count
   * and its watchdog entry alone, as the owner may hold the lock again by now under its own
   * booking (Redis then counts that hold and this one: this release takes one away). An
   * owner that books none and asks for none meanwhile gives back every hold Redis still counts
   * under its field: an acquire that ioredis resent after a reconnect ran twice and counted two
   * (one given back left the lock held for its lease by nobody: a composite's member, and a
   * handle's own `tryLock` whose waitTime ran out or whose signal aborted first; helper audits).
   * Each further release is written only while the owner books no hold and asks for none but
   * `acquiring` (the acquire this give-back ends, if any): one it asks for from then on is
   * written after that release on the same connection, so no release takes its new hold.
   */
  async giveBackUnbooked(owner: LockOwner, acquiring = 0): Promise<void> {
    const field = this.lock.field(owner);
    for (let round = 0; round < MAX_UNBOOKED_GIVE_BACKS; round++) {
      const latch = this.latchFor(owner, field);
      const result = await whileRefused(this.lock.context, (again) => this.lock.context.command('release', (redis) => this.lock.releaseCall(redis, field, latch, owner.holds === 0, again), IDEMPOTENT));
      if (result !== 0) return;
      inDatabase(this.lock.context.redis, (commands) => commands.del(latch)).catch(() => undefined);
      if (owner.holds > 0 || owner.pending > acquiring) return;
    }
  }

  /** Gives back one hold; returns whether the lock was released entirely. */
  async release(owner: LockOwner): Promise<boolean> {
    const { key } = this.lock;
    const field = this.lock.field(owner);
    // A release whose outcome is unknown (it failed after it may have run) is retried under its
    // own latch: Redis answers what it did the first time (or runs it now if it never ran).
    // Under a new latch a retry after the first had run found "not held" and reported the
    // owner's own release as a loss.
    // Taken, not read: two releases of one owner at once must not both replay it (one of them
    // would be lost); put back if this call fails too.
    const unknown = owner.unansweredRelease?.field === field ? owner.unansweredRelease : undefined;
    if (unknown) owner.unansweredRelease = undefined;
    const latch = unknown ? unknown.latch : this.latchFor(owner, field);
    const holdsBefore = owner.holds;
    // A hold Redis counted beyond the booked ones (see `unbookedHolds`): no `released`, and
    // finding it gone is no loss (the booked hold went back, and was announced, before).
    const unbooked = owner.unbookedHolds;
    // The last hold is being given up: stop renewing now, not after the reply, or a renewal
    // racing this release would find the lock gone and report it lost. If the release fails,
    // the lock then expires within its lease.
    const removed = holdsBefore <= 1 ? this.lock.context.renewal.remove(key, field) : undefined;
    // A failure leaves the outcome unknown; a retried unlock() tells the rest.
    let result: 0 | 1 | null;
    try {
      // Sent again under the same latch while a slot in flux refuses it (see whileRefused); as a
      // retry, as the first send may have run (ioredis's redirections followed a dropped connection).
      result = await whileRefused(this.lock.context, (again) => this.lock.context.command('release', (redis) => this.lock.releaseCall(redis, field, latch, holdsBefore <= 1, again || unknown !== undefined), IDEMPOTENT));
    } catch (error) {
      owner.unansweredRelease = { field, latch };
      throw error;
    }
    // 0: the watchdog reported these holds lost while this call was out (lose() zeroed the
    // count), every one of them counted in its `rlock:lost`: none is counted again here.
    const heldStill = owner.holds;
    // Only holds this owner booked (an `acquired` each): a release of one it never booked (an
    // undo of an acquire whose reply was lost) is no news.
    if (result !== null && holdsBefore > 0 && heldStill > 0 && !unbooked && diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.lock.event(owner), released: result === 1 });
    if (result === 0) {
      // The reply came, so ioredis will not resend this call: the latch has done its job.
      inDatabase(this.lock.context.redis, (commands) => commands.del(latch)).catch(() => undefined);
      // Its last booked hold given back and Redis still counts some: those were never booked (the
      // count stays 1 below so that they are given back too). A second `released` for them put a
      // holds gauge at -1 for good.
      if (holdsBefore <= 1 && heldStill > 0) owner.unbookedHolds = true;
      owner.holds = heldStill === 0 && holdsBefore > 0 ? 0 : Math.max(1, owner.holds - 1);
      return false;
    }
    if (result === 1 && holdsBefore > 1 && heldStill > 0) {
      // Redis had fewer holds than the owner believed: the others were taken away (a force, an
      // expiry) and this owner entered again afresh. The lock is free now while an outer scope of
      // the owner still runs: tell it at once, as a renewal would have, not at its own end. The
      // hold just given back is not among the lost (its `released` went above).
      owner.holds = holdsBefore - 1;
      this.loseHolds(owner, key, field, 'its hold count in Redis was below its own: holds were taken away', removed, holdsBefore - 1);
    }
    if (result === null && holdsBefore > 0 && heldStill > 0 && !unbooked) {
      // Every release that gave a hold back left its answer in its latch, where a resend after a
      // reconnect finds it: nil is never "released", it means the hold was taken away (a
      // force-unlock, an expiry, Redis losing its data) before this release ran. An owner that
      // believed it held one under the watchdog is told as a renewal would have told it.
      // (reportLost finds a hold the watchdog still keeps, or takes the one removed above.)
      this.loseHolds(owner, key, field, 'its release found it no longer held by its owner', removed, holdsBefore);
    }
    owner.dropHolds();
    // Removed above when this was to be the last hold; otherwise holds went missing (see above).
    if (holdsBefore > 1) this.lock.context.renewal.remove(key, field);
    if (result === null) throw new NotLockOwnerError(this.lock.name, owner.id);
    return true;
  }

  /**
   * Reports `holds` holds of the owner lost: through the watchdog when it keeps them (its
   * `lockLost` and the scope's signal), else (a `leaseTime`) through the owner's loss signal,
   * which timed scopes watch, and `rlock:lost`, so that every `acquired` is matched by one
   * `released` or counted in one `lost` (a holds gauge adds up).
   */
  private loseHolds(owner: LockOwner, key: string, field: string, reason: string, removed: RenewalTarget | undefined, holds: number): void {
    if (this.lock.context.renewal.reportLost(key, field, reason, removed)) return;
    this.lostUnkept(owner, holds, reason);
  }

  /**
   * Reports the holds of `owner` lost now (a re-entry found them gone): through the watchdog when
   * it keeps them (`renewal.reportLost`); else (a `leaseTime`) the count goes to 0, the scopes
   * watching it are told, and `rlock:lost` says how many went.
   */
  holdsLost(owner: LockOwner, reason: string): void {
    if (this.lock.context.renewal.reportLost(this.lock.key, this.lock.field(owner), reason)) return;
    const holds = owner.holds;
    if (holds === 0) return;
    owner.dropHolds();
    this.lostUnkept(owner, holds, reason);
  }

  /**
   * A re-entry (the owner believed it held the lock) found its hold gone: the lock was `free` (the
   * attempt took it afresh) or `taken` by another owner. Its scope is told now (`holdsLost`), not
   * at the inner release, as the watchdog would have renewed a hold taken afresh as the old one.
   */
  reentryFoundHoldGone(owner: LockOwner, lock: 'free' | 'taken'): void {
    if (owner.holds === 0) return;
    this.holdsLost(owner, lock === 'free' ? 'a re-entry found its hold gone (the lock was free: taken afresh)' : "a re-entry found its hold gone (the lock is another owner's)");
  }

  /** Tells the scopes watching the owner's holds (a timed scope has no watchdog entry) and `rlock:lost`. */
  private lostUnkept(owner: LockOwner, holds: number, reason: string): void {
    const error = new LockLostError(this.lock.name, reason);
    owner.lossWatches?.get(this.lock.key)?.abort(error);
    if (diagnostics.lost.hasSubscribers) diagnostics.lost.publish({ ...this.lock.event(owner), holds, error });
  }

  /**
   * Ends an outermost `withLock`: its owner disappears with it, so holds that `fn` left behind
   * (a `lock()` without `unlock()`), or that Redis counted twice for an acquire resent after a
   * reconnect, are given back too instead of being kept alive by the watchdog forever.
   */
  async releaseAll(owner: LockOwner): Promise<void> {
    while (!(await this.release(owner))) {
      /* keep going until Redis says released (or not held) */
    }
  }
}
