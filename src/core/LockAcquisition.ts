import { LockUsageError } from '../errors';
import { diagnostics, type LockEvent } from '../diagnostics';
import type { RenewalTarget } from '../services/RenewalTarget';
import type { Hold } from '../services/Hold';
import type { LockContext } from '../services/LockContext';
import { heldByCompositeScope, type LockOwner, scopedOwner } from '../services/LockOwner';
import { endTurn, takeTurn } from '../services/ownerTurns';
import { settledWithinGrace } from '../services/bounds';
import type { LockRelease } from './LockRelease';
import { stopsOf } from './waitLoop';

/**
 * What taking a lock asks of a handle `H`: its own steps, in one table for every handle
 * (`LockHandle.acquiring`), each given the handle it acts for. Not closures bound to each handle,
 * as `LockRelease`'s are: a handle takes this part on its first acquire, so every held lock and
 * parked waiter would carry them (scenario 6's heap per held lock went from 1.1 to 2.3 KiB).
 */
export interface AcquiringSteps<H> {
  context(handle: H): LockContext;
  name(handle: H): string;
  /** One lock of one client (`LockHandle.identity`): what the scope owners are kept under. */
  identity(handle: H): string;
  /** Made on first use: most acquires never give anything back unbooked. */
  releases(handle: H): Pick<LockRelease, 'giveBackUnbooked'>;
  /** The primitive's acquire (see `LockHandle.acquireFor`). */
  acquireFor(handle: H, owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined>;
  /** See `LockHandle.acquiresInTurn`. */
  acquiresInTurn(handle: H): boolean;
  /** The handle's own owner, as it books holds. */
  handleOwner(handle: H): LockOwner;
  /** The owner that books this handle's holds for `owner` (see `LockHandle.holder`). */
  holder(handle: H, owner: LockOwner): LockOwner;
  /** See `LockHandle.acquiringBeside`. */
  acquiringBeside(handle: H, owner: LockOwner): string | undefined;
  /** What the watchdog renews for a hold of `owner` (see `LockHandle.renewalTarget`). */
  renewalTarget(handle: H, owner: LockOwner): RenewalTarget;
  event(handle: H, owner: LockOwner): LockEvent;
}

export class LockAcquisition<H> {
  // Private fields, not properties: logging or JSON.stringify of a handle reaches this part, and
  // the handle back from here would be a circle (JSON.stringify throws on one).
  readonly #handle: H;
  readonly #steps: AcquiringSteps<H>;

  constructor(handle: H, steps: AcquiringSteps<H>) {
    this.#handle = handle;
    this.#steps = steps;
  }

  /**
   * A handle outside `withLock` refuses to enter twice: a second `lock()` could as well come from
   * another task sharing the handle, and letting it in would put two tasks in the critical section.
   */
  ownerToAcquire(): LockOwner {
    const scoped = scopedOwner(this.#steps.identity(this.#handle));
    if (scoped) return this.#steps.holder(this.#handle, scoped);
    this.refuseInsideComposite();
    const owner = this.#steps.handleOwner(this.#handle);
    const beside = this.#steps.acquiringBeside(this.#handle, owner);
    if (owner.holds > 0 || owner.pending > 0 || beside !== undefined) {
      throw new LockUsageError(
        `this handle of lock "${this.#steps.name(this.#handle)}" ${owner.holds > 0 ? this.stillBooked(owner) : owner.pending > 0 ? 'already is acquiring it' : `shares its owner with ${beside}, which is still acquiring it`}; ` +
          'a handle is not reentrant outside withLock, so two tasks sharing one cannot both enter. ' +
          'Use a handle per task, or withLock() for reentrant sections.',
      );
    }
    return owner;
  }

  /**
   * Why a handle's own owner that counts a hold refuses to take the lock again. A hold whose
   * `leaseTime` has run out is gone, yet not taken again by itself: the call may come from
   * another task sharing the handle while the first still runs, whose `unlock()` would then give
   * back the new hold (two owners inside). Its `unlock()`, which rejects, clears it.
   */
  private stillBooked(owner: LockOwner): string {
    const ranOut = owner.leasedUntil !== undefined ? performance.now() - owner.leasedUntil : -1;
    if (ranOut < 0) return 'already holds it';
    return `held it with a leaseTime that ran out ${Math.round(ranOut)} ms ago and was not unlocked: call unlock() first (it rejects with NotLockOwnerError, the hold being gone, and clears it), or take a handle per acquisition`;
  }

  /**
   * Inside a MultiLock/RedLock `withLock` that holds this lock, taking it again would wait for
   * itself (for good without a waitTime): the composite's members are not reentrant for the code
   * it runs.
   */
  refuseInsideComposite(): void {
    if (heldByCompositeScope(this.#steps.identity(this.#handle))) {
      throw new LockUsageError(`lock "${this.#steps.name(this.#handle)}": called inside the withLock of a MultiLock or RedLock that holds it; its members are not reentrant, it would wait for itself`);
    }
  }

  /** Takes the lock for `owner` and books the hold; resolves with the send time, or undefined on timeout. */
  async acquire(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<number | undefined> {
    owner.pending++;
    owner.asked++;
    // A fenced acquire marks the owner fenced as it takes the hold (`held`): a hold given back
    // unbooked (the caller stopped meanwhile) leaves the mark as it was.
    const fenced = owner.fenced;
    let inTurn = false;
    try {
      if (this.#steps.acquiresInTurn(this.#handle)) {
        // After the owner's acquires under way, their holds booked (see ownerTurns): a waitTime
        // counts from the call.
        const from = performance.now();
        const deadline = waitTime > 0 ? from + waitTime : (attemptDeadline ?? Infinity);
        const taking = takeTurn(owner, deadline, waitTime <= 0, stopsOf(this.#steps.context(this.#handle), signal));
        inTurn = taking instanceof Promise ? await taking : taking;
        if (!inTurn) return undefined;
        if (waitTime > 0) waitTime = Math.max(0, waitTime - (performance.now() - from));
      }
      const hold = await this.#steps.acquireFor(this.#handle, owner, leaseTime, waitTime, signal, attemptDeadline);
      if (hold === undefined) return undefined;
      return await this.acquired(owner, leaseTime, hold, signal);
    } catch (error) {
      owner.fenced = fenced;
      throw error;
    } finally {
      if (inTurn) endTurn(owner);
      owner.pending--;
    }
  }

  /** Books a hold; one that raced an abort is given back unbooked, leaving nothing behind. Returns its send time. */
  async acquired(owner: LockOwner, leaseTime: number | undefined, { sentAt, expiresAt }: Hold, signal: AbortSignal | undefined): Promise<number> {
    const context = this.#steps.context(this.#handle);
    // The caller's signal first, then close() (no array and closure per acquisition).
    const closed = context.closedSignal;
    const stopped = signal?.aborted ? signal : closed.aborted ? closed : undefined;
    if (stopped) {
      // Taken as the caller's signal aborted (or close() came): the caller never holds it, so it
      // is not booked (a retry of the same owner must not find a hold that is on its way back),
      // and it is given back unbooked, waited for at most as long as an attempt would be (Redis
      // frozen: it is given back when Redis answers).
      await settledWithinGrace(this.#steps.releases(this.#handle).giveBackUnbooked(owner, 1));
      throw stopped.reason;
    }
    owner.holds++;
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...this.#steps.event(this.#handle, owner), holds: owner.holds, leaseTime });
    if (leaseTime === undefined) {
      context.renewal.add(this.#steps.renewalTarget(this.#handle, owner), sentAt, expiresAt);
    } else if (owner === this.#steps.handleOwner(this.#handle)) {
      owner.leasedUntil = Math.min(sentAt + leaseTime, expiresAt ?? Infinity);
    }
    return sentAt;
  }
}
