import { InvalidArgumentError, LockUsageError } from '../errors';
import { diagnostics, type LockEvent, waitReports } from '../diagnostics';
import type { LockInfo } from '../introspection';
import { checkLockOptions, checkName, type LockOptions, type TryLockOptions, type WithLockOptions } from '../options';
import type { RenewalTarget } from '../services/ExpirationRenewal';
import { IDEMPOTENT, type LockContext } from '../services/LockContext';
import { OUTCOME_UNKNOWN, settledWithinGrace } from '../services/bounds';
import { readOne } from '../services/database';
import { heldByCompositeScope, LockOwner, scopedOwner } from '../services/LockOwner';
import { endTurn, takeTurn } from '../services/ownerTurns';
import type { ScriptedRedis } from '../services/scripts';
import type { HeldLock } from './HeldLock';
import { LockRelease } from './LockRelease';
import { LockScopes } from './LockScopes';
import type { Hold } from '../services/Hold';
import { endsAsTimedOut, stopsOf, type WaitProtocol } from './waitLoop';

/**
 * The life cycle every exclusive lock shares (RLock, FairLock): owners and `withLock` scopes,
 * the hold bookkeeping, the watchdog registration, lost-lock signals, idempotent releases and
 * the read-only calls on the lock hash `<clientId>:<ownerId> → holds`. A primitive supplies its
 * protocol: how to acquire (usually through `waitFor`), the release script, and force-unlock.
 *
 * Outside `withLock` a handle is its own owner and not reentrant; inside `withLock(fn)`, every
 * handle of the same client and name acts as the scope's owner, so nested holds count up.
 */
export abstract class LockHandle {
  readonly name: string;
  /** The Redis key of the lock hash: `<keyPrefix><name>`. */
  readonly key: string;
  private ownOwner: LockOwner | undefined;
  /**
   * A composite's member (a fork) whose acquire re-entered an enclosing `withLock`'s hold: that
   * scope's owner. The hold is inside the scope (`scopesInside`) until the fork's `unlock()` gives
   * it back, and the fork acts as that owner meanwhile, also once the scope's call has ended.
   */
  private enteredScope: LockOwner | undefined;

  protected constructor(
    protected readonly context: LockContext,
    name: unknown,
  ) {
    this.name = checkName(name, context.keyPrefix);
    this.key = context.keyPrefix + this.name;
  }

  /**
   * Takes the lock for `owner` within `waitTime` (0: one attempt), booking nothing; resolves with
   * the hold, or undefined when the time ran out. Usually `waitFor` with the primitive's protocol.
   */
  /** `attemptDeadline`: see `waitFor`. */
  protected abstract acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined>;

  /**
   * One release script call: nil not the owner, 0 holds remain, 1 the owner's last hold went.
   * `last`: the owner believes this is its last hold. `retry`: a retry of a release whose
   * outcome was unknown, under its latch: Redis may answer what the first call did.
   */
  protected abstract releaseCall(redis: ScriptedRedis, field: string, latch: string, last: boolean, retry?: boolean): Promise<0 | 1 | null>;

  /** Deletes the lock whoever holds it and wakes (or hands it to) waiters; true when there was one. */
  abstract forceUnlock(): Promise<boolean>;

  /** Who holds the lock, its TTL, and who waits (see `LockInfo`). */
  abstract inspect(): Promise<LockInfo>;

  /** Waits as long as it takes (or until `signal` aborts) and takes the lock. */
  async lock(options?: LockOptions): Promise<void> {
    const { leaseTime, signal } = checkLockOptions(options, false);
    this.context.assertOpen();
    await this.acquire(this.ownerToAcquire(), leaseTime, Infinity, signal);
  }

  /** Takes the lock if it can within `waitTime` (default: one attempt); true when it did. */
  async tryLock(options?: TryLockOptions): Promise<boolean> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    this.context.assertOpen();
    return (await this.acquire(this.ownerToAcquire(), leaseTime, waitTime ?? 0, signal)) !== undefined;
  }

  /** Gives back one hold; throws `NotLockOwnerError` when the current owner holds none. */
  async unlock(): Promise<void> {
    this.context.assertOpen();
    return this.giveBack();
  }

  /**
   * @internal `unlock()` for a composite giving back a member it took (a round that failed, an
   * attempt abandoned, the composite's own release), also once the member's client is closing:
   * that release goes out as a lone lock's give-back of a hold taken as `close()` came does.
   * Refused by the closing client, the member stayed taken by nobody for its lease (a helper audit).
   */
  async giveBack(): Promise<void> {
    const entered = this.enteredScope;
    if (entered) {
      this.enteredScope = undefined;
      return this.scopes.leaveNested(entered, this.holder(entered));
    }
    const owner = this.currentOwner();
    if (owner !== this.handleOwner) return void (await this.releases.release(owner));
    // Another task sharing the handle is still acquiring: a release sent beside that acquire
    // could free the lock it is taking, whose hold would then be booked, and kept by the
    // watchdog, for a lock nobody holds.
    if (owner.holds === 0 && owner.pending > 0) {
      throw new LockUsageError(
        `this handle of lock "${this.name}" is still acquiring it; unlock() once its lock() has resolved. ` +
          'A handle is not reentrant outside withLock, so two tasks sharing one cannot both use it.',
      );
    }
    // A handle's own owner never holds more than once, so any further hold Redis counts comes
    // from an acquire that ioredis resent after a reconnect: give it back too.
    await this.releases.releaseAll(owner);
  }

  /**
   * Runs `fn` holding the lock and unlocks in `finally`. `fn`'s signal aborts when the lock is
   * lost (watchdog finds it gone, or its `leaseTime` runs out) or when `options.signal` aborts;
   * a lock lost while `fn` ran makes `withLock` reject with `LockLostError` even if `fn` resolved.
   */
  async withLock<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: WithLockOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    return this.scopes.withLock(fn, options);
  }

  /**
   * Takes the lock as `withLock` does (a fresh owner, or the enclosing `withLock`'s, so it
   * re-enters there; waits as long as it takes unless `waitTime`, then `LockTimeoutError`) and
   * returns the hold: `await using held = await lock.hold()` gives it back at the end of the
   * scope. `held.signal` aborts when the lock is lost or `options.signal` aborts.
   */
  async hold(options?: WithLockOptions): Promise<HeldLock> {
    return this.scopes.hold(options);
  }

  /** This handle's owner scopes, over its own steps (made on its first scope: most handles never open one). */
  private get scopes(): LockScopes {
    return (this.scopesMade ??= new LockScopes({
      context: this.context,
      name: this.name,
      key: this.key,
      identity: this.identity,
      acquire: (owner, leaseTime, waitTime, signal) => this.acquire(owner, leaseTime, waitTime, signal),
      releases: this.releases,
      endScope: (scopeOwner, owner) => this.endScope(scopeOwner, owner),
      holder: (owner) => this.holder(owner),
      field: (owner) => this.field(owner),
      refuseInsideComposite: () => this.refuseInsideComposite(),
    }));
  }

  private scopesMade: LockScopes | undefined;

  /** How this handle gives its owners' holds back, and reports what a release finds lost (over its own steps, made on first use). */
  protected get releases(): LockRelease {
    return (this.releasesMade ??= new LockRelease({
      context: this.context,
      name: this.name,
      key: this.key,
      field: (owner) => this.field(owner),
      event: (owner) => this.event(owner),
      releaseCall: (redis, field, latch, last, retry) => this.releaseCall(redis, field, latch, last, retry),
    }));
  }

  private releasesMade: LockRelease | undefined;

  /**
   * @internal A new handle on the same lock with an owner of its own: MultiLock and RedLock take
   * one per member and acquisition, so that a late reply to an abandoned attempt can be given
   * back without touching a newer hold.
   */
  fork(): this {
    return LockHandle.singleUse(new (this.constructor as new (context: LockContext, name: string) => this)(this.context, this.name));
  }

  /** Marks `handle`'s own owner single-use (see `LockOwner.singleUse`): a fork for one composite round. */
  protected static singleUse<T extends LockHandle>(handle: T): T {
    handle.handleOwner.singleUse = true;
    return handle;
  }

  /**
   * @internal `tryLock` that resolves with the send time (performance.now()) of the acquire that
   * took the lock, or undefined when `waitTime` ran out: a composite lock times its validity from it.
   */
  async acquireHold(leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<number | undefined> {
    this.context.assertOpen();
    const owner = this.ownerToAcquire();
    const scope = scopedOwner(this.identity);
    if (!scope) return this.acquire(owner, leaseTime, waitTime, signal, attemptDeadline);
    // Re-entering an enclosing withLock's hold: inside that scope from the call on, as a nested
    // withLock is (see LockScopes.enterScope). A composite withLock its callback did not await
    // keeps the member past the scope's end; before, that end gave it back under the composite.
    scope.scopesInside++;
    try {
      const sentAt = await this.acquire(owner, leaseTime, waitTime, signal, attemptDeadline);
      if (sentAt !== undefined) this.enteredScope = scope;
      return sentAt;
    } finally {
      // Not inside after all: the last one out of an ended scope still ends it.
      if (this.enteredScope !== scope) await this.scopes.leaveScope(scope, owner).catch(() => undefined);
    }
  }

  /**
   * @internal Which members a composite may take together in one script call (`acquireTogether`):
   * plain locks of one client and one Redis slot. Undefined for this kind (its acquire does more
   * than the shared script: a queue, a token, a WAIT) and for a member entered again for an
   * enclosing scope.
   */
  togetherKey(): string | undefined {
    return undefined;
  }

  /**
   * @internal Takes `forks` (fresh handles whose `togetherKey` is the same) in one call, all or
   * none, as one round's single attempts (a MultiLock's): `{ sentAt }` with every hold booked as
   * its own acquire would book it; `{ refused }`, the index among `forks` of one held by someone
   * else (nothing taken); undefined when Redis did not answer by `attemptDeadline` (what it took
   * then is given back when it answers, as a lone attempt's is). Rejects as a lone attempt would
   * (the caller's abort, `ClientClosedError`, Redis's errors).
   */
  static async acquireTogether(forks: readonly LockHandle[], leaseTime: number | undefined, signal: AbortSignal | undefined, attemptDeadline: number | undefined): Promise<{ sentAt: number } | { refused: number } | undefined> {
    const { context } = forks[0]!;
    context.assertOpen();
    const owners = forks.map((fork) => fork.ownerToAcquire());
    const lease = leaseTime ?? context.watchdogTimeout;
    const keys = forks.map((fork) => fork.key);
    const fields = forks.map((fork, i) => fork.field(owners[i]!));
    // Given back as a lone attempt's would be: taken for a caller that is gone, or maybe taken
    // (no answer): each fork's owner is single-use and books nothing, so nothing of its own can come between.
    const giveBack = (): Promise<unknown> => Promise.all(forks.map((fork, i) => fork.releases.giveBackUnbooked(owners[i]!)));
    for (const owner of owners) {
      owner.pending++;
      owner.asked++;
    }
    try {
      const sentAt = performance.now();
      // A refusal of a resend (the connection dropped under the call) may follow a first run that
      // took every key: what that run took is given back.
      const epoch = context.connectionEpoch();
      const resent = (): boolean => context.connectionEpoch() !== epoch;
      const stops = stopsOf(context, signal);
      let reply: [number, number] | null;
      try {
        reply = await context.command('acquire', (redis) => redis.rlock_acquireAll(keys.length, ...keys, lease, ...fields), {
          deadline: attemptDeadline,
          signals: stops,
          lateReply: (late) => (late === null || late === OUTCOME_UNKNOWN || resent() ? giveBack() : undefined),
        });
      } catch (error) {
        if (endsAsTimedOut(error, stops)) return undefined;
        throw error;
      }
      if (reply !== null) {
        if (resent()) await settledWithinGrace(giveBack());
        return { refused: reply[0] - 1 };
      }
      const booked = await Promise.allSettled(forks.map((fork, i) => fork.acquired(owners[i]!, leaseTime, { sentAt }, signal)));
      const failed = booked.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      return { sentAt };
    } finally {
      for (const owner of owners) owner.pending--;
    }
  }

  /**
   * @internal Whether this client's own release just woke another client's waiter for this lock,
   * which its new callers then let ask first (RLock's turn): a composite's single attempts,
   * which would take the lock back before it, wait instead.
   */
  yieldsTurn(): boolean {
    return false;
  }

  /** @internal Aborts when the watchdog finds the current owner's hold lost; undefined when the watchdog does not keep it. */
  lostSignal(): AbortSignal | undefined {
    return this.context.renewal.lostSignal(this.key, this.field(this.currentOwner()));
  }

  /**
   * @internal What stops the watchdog renewing the current owner's hold (a RedLock's
   * `maxHoldTime`): it runs out with the lease it has. It answers until when it may be taken for held at most
   * (performance.now() ms), undefined when the watchdog did not keep it (lost already). A hold
   * this handle entered again for an enclosing scope (its owner is not the fork's own) is that
   * scope's: still renewed, and its end as of now is answered.
   */
  renewalStopper(): () => number | undefined {
    // The owner as of now: the stop comes from a timer, whose context need not be the caller's.
    const owner = this.currentOwner();
    const field = this.field(owner);
    return () => (!owner.singleUse || owner.holds > 1 ? this.context.renewal.lostAt(this.key, field) : this.context.renewal.remove(this.key, field)?.lostAt);
  }

  /**
   * @internal Whether this handle's current owner holds `other`'s key on `other`'s Redis: then
   * both are one lock reached through two clients (a composite's members must be different locks).
   */
  async holdsThrough(other: LockHandle): Promise<boolean> {
    const field = this.field(this.currentOwner());
    return (await other.context.command('isHeldByCurrentOwner', (redis) => readOne(redis, (reads) => reads.hexists(other.key, field)))) === 1;
  }

  /** @internal The lease the watchdog keeps a hold taken without `leaseTime` alive with, in ms. */
  get watchdogTimeout(): number {
    return this.context.watchdogTimeout;
  }

  /** Holds of the current owner (0 when none). */
  async getHoldCount(): Promise<number> {
    this.context.assertOpen();
    const field = this.field(this.currentOwner());
    const count = await this.context.command('getHoldCount', (redis) => readOne(redis, (reads) => reads.hget(this.key, field)), IDEMPOTENT);
    return count === null ? 0 : Number(count);
  }

  /** Whether anyone holds the lock. */
  async isLocked(): Promise<boolean> {
    this.context.assertOpen();
    return (await this.context.command('isLocked', (redis) => readOne(redis, (reads) => reads.exists(this.key)), IDEMPOTENT)) === 1;
  }

  async isHeldByCurrentOwner(): Promise<boolean> {
    this.context.assertOpen();
    const field = this.field(this.currentOwner());
    return (await this.context.command('isHeldByCurrentOwner', (redis) => readOne(redis, (reads) => reads.hexists(this.key, field)), IDEMPOTENT)) === 1;
  }

  /** Remaining lease in ms; -2 when there is no lock, -1 when it never expires (as PTTL). */
  async remainTimeToLive(): Promise<number> {
    this.context.assertOpen();
    return this.context.command('remainTimeToLive', (redis) => readOne<number>(redis, (reads) => reads.pttl(this.key)), IDEMPOTENT);
  }

  /** @internal One lock of one client, for the owner scopes (and MultiLock's duplicate check): `<clientId>\n<key>`. */
  get identity(): string {
    return (this.identityMade ??= `${this.context.clientId}\n${this.key}`);
  }

  private identityMade: string | undefined;

  /** @internal Aborted by its client's close(): a composite's pause between rounds ends with it. */
  get closedSignal(): AbortSignal {
    return this.context.closedSignal;
  }

  protected event(owner: LockOwner): LockEvent {
    return { name: this.name, key: this.key, clientId: this.context.clientId, ownerId: owner.id };
  }

  /** Publishes a `forceUnlock()` that removed `holders` (owner fields); answers whether there were any. */
  protected forced(holders: string[]): boolean {
    if (diagnostics.forceUnlocked.hasSubscribers) {
      diagnostics.forceUnlocked.publish({ name: this.name, key: this.key, clientId: this.context.clientId, removed: holders.length > 0, holders });
    }
    return holders.length > 0;
  }

  /** The wait diagnostics of `owner`, for a `WaitProtocol`. */
  protected waitEvents(owner: LockOwner): Pick<WaitProtocol, 'waitStarted' | 'waitEnded'> {
    return waitReports(() => this.event(owner));
  }

  /** The handle's own owner, as it books holds. */
  private get handleOwner(): LockOwner {
    return this.holder(this.unscopedOwner());
  }

  /**
   * Who the handle acts as outside `withLock`: an owner of its own, made on first use (a process
   * may keep many handles). Handles of one family (a read-write lock's two) share one.
   */
  protected unscopedOwner(): LockOwner {
    return (this.ownOwner ??= new LockOwner());
  }

  /**
   * The owner whose holds this handle books for `owner` (a scope's or the handle's): `owner`
   * itself, or, for handles that share owners but count their holds apart (a read-write lock's
   * reads and writes), a facet of it with the same id.
   */
  protected holder(owner: LockOwner): LockOwner {
    return owner;
  }

  /** What the watchdog renews for a hold of `owner` (a primitive with its own renew script says so here). */
  protected renewalTarget(owner: LockOwner): RenewalTarget {
    return { name: this.name, key: this.key, field: this.field(owner), owner };
  }

  /**
   * Whether one owner's acquires of this lock are made one at a time (`takeTurn`), each after the
   * hold of the one before is booked, instead of side by side: a primitive whose acquires of one
   * owner would otherwise share what Redis gives once (the fair lock's queue entry and grant).
   */
  protected get acquiresInTurn(): boolean {
    return false;
  }

  /** Ends an outermost `withLock` scope whose holds this handle booked on `owner`. */
  protected async endScope(scopeOwner: LockOwner, owner: LockOwner): Promise<void> {
    await this.releases.releaseAll(owner);
  }

  protected field(owner: LockOwner): string {
    return owner.fieldFor(this.context.clientId);
  }

  protected currentOwner(): LockOwner {
    const scoped = this.enteredScope ?? scopedOwner(this.identity);
    return scoped ? this.holder(scoped) : this.handleOwner;
  }

  /**
   * A handle outside `withLock` refuses to enter twice: a second `lock()` could as well come from
   * another task sharing the handle, and letting it in would put two tasks in the critical section.
   */
  private ownerToAcquire(): LockOwner {
    const scoped = scopedOwner(this.identity);
    if (scoped) return this.holder(scoped);
    this.refuseInsideComposite();
    const owner = this.handleOwner;
    const beside = this.acquiringBeside(owner);
    if (owner.holds > 0 || owner.pending > 0 || beside !== undefined) {
      throw new LockUsageError(
        `this handle of lock "${this.name}" ${owner.holds > 0 ? this.stillBooked(owner) : owner.pending > 0 ? 'already is acquiring it' : `shares its owner with ${beside}, which is still acquiring it`}; ` +
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
   * The handle sharing `owner` (the handle's own, outside withLock) whose acquire for it is
   * pending, if any: a read-write lock's other half. Another task is then taking the lock as the
   * same owner, and Redis would let this one in beside it.
   */
  protected acquiringBeside(_owner: LockOwner): string | undefined {
    return undefined;
  }

  /**
   * Inside a MultiLock/RedLock `withLock` that holds this lock, taking it again would wait for
   * itself (for good without a waitTime): the composite's members are not reentrant for the code
   * it runs.
   */
  private refuseInsideComposite(): void {
    if (heldByCompositeScope(this.identity)) {
      throw new LockUsageError(`lock "${this.name}": called inside the withLock of a MultiLock or RedLock that holds it; its members are not reentrant, it would wait for itself`);
    }
  }

  /** Takes the lock for `owner` and books the hold; resolves with the send time, or undefined on timeout. */
  private async acquire(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<number | undefined> {
    owner.pending++;
    owner.asked++;
    // A fenced acquire marks the owner fenced as it takes the hold (`held`): a hold given back
    // unbooked (the caller stopped meanwhile) leaves the mark as it was.
    const fenced = owner.fenced;
    let inTurn = false;
    try {
      if (this.acquiresInTurn) {
        // After the owner's acquires under way, their holds booked (see ownerTurns): a waitTime
        // counts from the call.
        const from = performance.now();
        const deadline = waitTime > 0 ? from + waitTime : (attemptDeadline ?? Infinity);
        const taking = takeTurn(owner, deadline, waitTime <= 0, stopsOf(this.context, signal));
        inTurn = taking instanceof Promise ? await taking : taking;
        if (!inTurn) return undefined;
        if (waitTime > 0) waitTime = Math.max(0, waitTime - (performance.now() - from));
      }
      const hold = await this.acquireFor(owner, leaseTime, waitTime, signal, attemptDeadline);
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
  private async acquired(owner: LockOwner, leaseTime: number | undefined, { sentAt, expiresAt }: Hold, signal: AbortSignal | undefined): Promise<number> {
    // The caller's signal first, then close() (no array and closure per acquisition).
    const closed = this.context.closedSignal;
    const stopped = signal?.aborted ? signal : closed.aborted ? closed : undefined;
    if (stopped) {
      // Taken as the caller's signal aborted (or close() came): the caller never holds it, so it
      // is not booked (a retry of the same owner must not find a hold that is on its way back),
      // and it is given back unbooked, waited for at most as long as an attempt would be (Redis
      // frozen: it is given back when Redis answers).
      await settledWithinGrace(this.releases.giveBackUnbooked(owner, 1));
      throw stopped.reason;
    }
    owner.holds++;
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...this.event(owner), holds: owner.holds, leaseTime });
    if (leaseTime === undefined) {
      this.context.renewal.add(this.renewalTarget(owner), sentAt, expiresAt);
    } else if (owner === this.handleOwner) {
      owner.leasedUntil = Math.min(sentAt + leaseTime, expiresAt ?? Infinity);
    }
    return sentAt;
  }


}
