import { LockLostError, LockTimeoutError, NotLockOwnerError } from '../errors';
import { checkLockOptions, type WithLockOptions } from '../options';
import { lossWatch } from '../services/RenewalEntry';
import type { LockContext } from '../services/LockContext';
import { LockOwner, newScopeCall, runAsOwner, scopedOwner } from '../services/LockOwner';
import { HeldLock } from './HeldLock';
import type { LockAcquisition } from './LockAcquisition';
import type { LockRelease } from './LockRelease';
import { outcomeOf, watchHold } from './holdScope';

/**
 * What a lock's owner scopes ask of its handle: the handle's own steps, bound to it
 * (`LockHandle` makes this once, on its first scope), so that they stay its private business.
 */
export interface ScopedLock {
  readonly context: LockContext;
  readonly name: string;
  readonly key: string;
  /** One lock of one client (`LockHandle.identity`): what the scope owners are kept under. */
  readonly identity: string;
  /** How the handle takes the lock (`acquire`: takes it for an owner and books the hold; `refuseInsideComposite`: throws inside a MultiLock/RedLock scope that holds it, as it would wait for itself). */
  readonly acquisition: Pick<LockAcquisition<unknown>, 'acquire' | 'refuseInsideComposite'>;
  /** How the handle gives holds back (`release`: one hold; `releaseAll`: every hold Redis counts). */
  readonly releases: Pick<LockRelease, 'release' | 'releaseAll'>;
  /** Ends an outermost scope whose holds were booked on `owner` (see `LockHandle.endScope`). */
  endScope(scopeOwner: LockOwner, owner: LockOwner): Promise<void>;
  /** The owner that books this handle's holds for `owner` (see `LockHandle.holder`). */
  holder(owner: LockOwner): LockOwner;
  field(owner: LockOwner): string;
}

/**
 * The owner scopes of one lock handle: `withLock` and `hold()`. An outermost scope is a fresh
 * owner; code running inside it (see `ScopeCall`) acts as that owner on the same lock, so nested
 * scopes re-enter and count up, and the scope's end gives back what it holds. Scopes started
 * inside one and not awaited keep the lock until the last of them ends.
 */
export class LockScopes {
  constructor(private readonly lock: ScopedLock) {}

  /** `LockHandle.withLock`: `fn` runs as the scope's owner; its end gives back the scope's hold. */
  async withLock<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: WithLockOptions): Promise<T> {
    const { outer, scopeOwner, owner, scope, stopWatching } = await this.enterScope(options);
    // Code `fn` runs acts as the owner while this call (or one it is nested in) runs, also after
    // the outermost call ended (see ScopeCall).
    const call = newScopeCall(this.lock.identity, scopeOwner);
    const run = (): T | Promise<T> => fn(scope.signal);
    const outcome = await outcomeOf(() => runAsOwner(this.lock.identity, call, run), stopWatching);
    // Code `fn` started that runs on no longer acts as this scope's owner (see ScopeCall).
    call.over = true;
    if (!outer) scopeOwner.scopeOver = true;
    const lost = scope.signal.reason instanceof LockLostError ? scope.signal.reason : undefined;
    const heldAtEnd = owner.holds > 0;
    let releaseError: unknown;
    try {
      if (outer) {
        await this.leaveNested(scopeOwner, owner);
      } else if (scopeOwner.scopesInside > 0) {
        // A withLock `fn` started and did not await (a forEach with an async callback) is still
        // inside: it keeps the lock, only this scope's own hold goes now. Before, every hold went
        // and the lock was free under it (another owner took it while it ran, untold). While one
        // of them still waits for its re-entry's reply (pending), its hold is not booked yet: a
        // release now would take it for this owner's last (the watchdog stopped, the count
        // wrong); the last of them gives this hold back with the rest.
        if (owner.pending === 0) await this.lock.releases.release(owner);
      } else {
        await this.lock.endScope(scopeOwner, owner);
      }
    } catch (error) {
      // After a loss, "not the owner" is the expected answer, not news.
      if (!(lost && error instanceof NotLockOwnerError)) releaseError = this.lostAtRelease(error, heldAtEnd);
    }
    if ('error' in outcome) throw outcome.error;
    if (lost) throw lost;
    if (releaseError !== undefined) throw releaseError;
    return outcome.value;
  }

  /** `LockHandle.hold`: the scope ends when the returned hold is released. */
  async hold(options?: WithLockOptions): Promise<HeldLock> {
    const { outer, scopeOwner, owner, scope, stopWatching } = await this.enterScope(options);
    return new HeldLock(this.lock.name, scope.signal, async () => {
      stopWatching();
      const lost = scope.signal.reason instanceof LockLostError ? scope.signal.reason : undefined;
      const heldAtEnd = owner.holds > 0;
      try {
        // Inside a scope, it is inside until given back, as a nested withLock is: a hold() in a task
        // the scope's callback did not await keeps the lock past the scope's end.
        await (outer ? this.leaveNested(scopeOwner, owner) : this.lock.releases.releaseAll(owner));
      } catch (error) {
        // After a loss, "not the owner" is the expected answer, not news.
        if (!(lost && error instanceof NotLockOwnerError)) throw this.lostAtRelease(error, heldAtEnd);
      }
      if (lost) throw lost;
    });
  }

  /**
   * A scope nested in `scopeOwner`'s (a `withLock`, a `hold()`) ends: gives back its hold, then
   * leaves. The last scope inside one that has ended ends it: what is left goes, also when its
   * own release failed (or the watchdog would keep the rest for good).
   */
  async leaveNested(scopeOwner: LockOwner, owner: LockOwner): Promise<void> {
    try {
      await this.lock.releases.release(owner);
    } finally {
      await this.leaveScope(scopeOwner, owner);
    }
  }

  /**
   * A `withLock` (or `hold()`) nested in `scopeOwner`'s scope is no longer inside (it ended, or
   * its re-entry failed): the last one out of a scope whose outermost call has ended gives back
   * what is left (the outermost call's hold, a `lock()` left behind). Nothing left ("not the
   * owner") is no news.
   */
  async leaveScope(scopeOwner: LockOwner, owner: LockOwner): Promise<void> {
    if (--scopeOwner.scopesInside === 0 && scopeOwner.scopeOver) {
      await this.lock.endScope(scopeOwner, owner).catch((error: unknown) => {
        if (!(error instanceof NotLockOwnerError)) throw error;
      });
    }
  }

  /**
   * What a scope (`withLock`, `hold()`) reports for `error`, its release's: "not the owner" for a
   * hold the owner still believed it had means the hold was taken away while the scope ran (a
   * force-unlock, an expiry, Redis losing it in a failover) before anything noticed: a loss, as
   * `withPermit` reports it, not a usage error. A scope that gave its own hold back (`unlock()`
   * inside it) still gets `NotLockOwnerError`.
   */
  private lostAtRelease(error: unknown, heldAtEnd: boolean): unknown {
    return heldAtEnd && error instanceof NotLockOwnerError ? new LockLostError(this.lock.name, 'its release found it no longer held (taken away while the scope ran)') : error;
  }

  /**
   * Takes the lock for a scope (`withLock`, `hold`): as the enclosing `withLock`'s owner on this
   * lock (`outer`, re-entering), else as a fresh `scopeOwner`; `owner` books the holds (the
   * owner's facet for this handle's kind, see `holder`). `scope` aborts when the hold is lost or
   * the caller's signal aborts. Throws `LockTimeoutError` when `waitTime` runs out.
   */
  private async enterScope(options: WithLockOptions | undefined): Promise<{ outer: LockOwner | undefined; scopeOwner: LockOwner; owner: LockOwner; scope: AbortController; stopWatching: () => void }> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    this.lock.context.assertOpen();
    const outer = scopedOwner(this.lock.identity);
    if (!outer) this.lock.acquisition.refuseInsideComposite();
    const scopeOwner = outer ?? new LockOwner();
    // A read-write lock's kinds count apart: a hold() inside a withLock of the same kind must
    // book on the scope's facet, or giving it back (its owner's "last" hold) would stop the
    // watchdog of the scope's own hold.
    const owner = this.lock.holder(scopeOwner);
    const maxWait = waitTime ?? Infinity;
    // A nested withLock (or hold()) counts as inside from its call on, not once its re-entry is
    // booked: the outermost scope may end while that re-entry is on its way (a forEach with an
    // async callback), and its end must not give back every hold under it.
    if (outer) outer.scopesInside++;
    let sentAt: number | undefined;
    try {
      sentAt = await this.lock.acquisition.acquire(owner, leaseTime, maxWait, signal);
      if (sentAt === undefined) throw new LockTimeoutError(this.lock.name, maxWait);
    } catch (error) {
      // Not inside after all: the last one out of an ended scope still ends it.
      if (outer) await this.leaveScope(outer, owner).catch(() => undefined);
      throw error;
    }
    const scope = new AbortController();
    const stopWatching = this.watchScope(owner, leaseTime, signal, scope, sentAt);
    return { outer, scopeOwner, owner, scope, stopWatching };
  }

  /** Aborts `scope` when the lock is lost or `signal` aborts; returns the undo. */
  private watchScope(owner: LockOwner, leaseTime: number | undefined, signal: AbortSignal | undefined, scope: AbortController, sentAt: number): () => void {
    const field = this.lock.field(owner);
    const timed = leaseTime !== undefined && !this.lock.context.renewal.has(this.lock.key, field);
    const watchdog = (): AbortSignal | undefined => this.lock.context.renewal.lostSignal(this.lock.key, field);
    // A hold the watchdog does not keep is still watched: its primitive may learn of its loss (a
    // fair re-entry that found it gone, see LockRelease.holdsLost).
    const lost = watchdog() ?? lossWatch(owner, this.lock.key).signal;
    return watchHold(scope, [signal, lost], timed ? { name: this.lock.name, leaseTime, sentAt, watchdog } : undefined);
  }
}
