import { InvalidArgumentError, LockUsageError } from '../errors';
import { diagnostics, type LockEvent, waitReports } from '../diagnostics';
import type { LockInfo } from '../introspection';
import { checkLockOptions, checkName, type LockOptions, type TryLockOptions, type WithLockOptions } from '../options';
import type { RenewalTarget } from '../services/RenewalTarget';
import { IDEMPOTENT, type LockContext } from '../services/LockContext';
import { readOne } from '../services/database';
import { LockOwner, scopedOwner } from '../services/LockOwner';
import type { ScriptedRedis } from '../services/scripts';
import { CompositeMember } from './CompositeMember';
import type { HeldLock } from './HeldLock';
import { type AcquiringSteps, LockAcquisition } from './LockAcquisition';
import { LockRelease } from './LockRelease';
import { LockScopes } from './LockScopes';
import type { Hold } from '../services/Hold';
import type { WaitProtocol } from './waitLoop';

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
   * `attemptDeadline`: see `waitFor`.
   */
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
    const { acquisition } = this;
    await acquisition.acquire(acquisition.ownerToAcquire(), leaseTime, Infinity, signal);
  }

  /** Takes the lock if it can within `waitTime` (default: one attempt); true when it did. */
  async tryLock(options?: TryLockOptions): Promise<boolean> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    this.context.assertOpen();
    const { acquisition } = this;
    return (await acquisition.acquire(acquisition.ownerToAcquire(), leaseTime, waitTime ?? 0, signal)) !== undefined;
  }

  /** Gives back one hold; throws `NotLockOwnerError` when the current owner holds none. */
  async unlock(): Promise<void> {
    this.context.assertOpen();
    // A composite's member may hold an enclosing scope's hold it entered (see CompositeMember.giveBack).
    return this.memberMade ? this.memberMade.giveBack() : this.giveBackOwn();
  }

  /** `unlock()` of the handle's own hold, or of its scope's. */
  private async giveBackOwn(): Promise<void> {
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
      acquisition: this.acquisition,
      releases: this.releases,
      endScope: (scopeOwner, owner) => this.endScope(scopeOwner, owner),
      holder: (owner) => this.holder(owner),
      field: (owner) => this.field(owner),
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

  /** How this handle takes the lock and books its holds (made on the first acquire). */
  private get acquisition(): LockAcquisition<LockHandle> {
    return (this.acquisitionMade ??= new LockAcquisition(this, LockHandle.acquiring));
  }

  /** The steps taking the lock asks of a handle: one table for every handle (see `AcquiringSteps`). */
  private static readonly acquiring: AcquiringSteps<LockHandle> = {
    context: (handle) => handle.context,
    name: (handle) => handle.name,
    identity: (handle) => handle.identity,
    releases: (handle) => handle.releases,
    acquireFor: (handle, owner, leaseTime, waitTime, signal, attemptDeadline) => handle.acquireFor(owner, leaseTime, waitTime, signal, attemptDeadline),
    acquiresInTurn: (handle) => handle.acquiresInTurn,
    handleOwner: (handle) => handle.handleOwner,
    holder: (handle, owner) => handle.holder(owner),
    acquiringBeside: (handle, owner) => handle.acquiringBeside(owner),
    renewalTarget: (handle, owner) => handle.renewalTarget(owner),
    event: (handle, owner) => handle.event(owner),
  };

  private acquisitionMade: LockAcquisition<LockHandle> | undefined;

  /** @internal What a MultiLock/RedLock asks of this handle as its member (made on first use: most handles never are one). */
  get asMember(): CompositeMember {
    return (this.memberMade ??= new CompositeMember({
      context: this.context,
      key: this.key,
      identity: this.identity,
      acquisition: this.acquisition,
      releases: this.releases,
      scopes: this.scopes,
      field: (owner) => this.field(owner),
      holder: (owner) => this.holder(owner),
      currentOwner: () => this.currentOwner(),
      giveBackOwn: () => this.giveBackOwn(),
    }));
  }

  private memberMade: CompositeMember | undefined;

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
   * @internal Which members a composite may take together in one script call (`CompositeMember.acquireTogether`):
   * plain locks of one client and one Redis slot. Undefined for this kind (its acquire does more
   * than the shared script: a queue, a token, a WAIT) and for a member entered again for an
   * enclosing scope.
   */
  togetherKey(): string | undefined {
    return undefined;
  }

  /**
   * @internal Whether this client's own release just woke another client's waiter for this lock,
   * which its new callers then let ask first (RLock's turn): a composite's single attempts,
   * which would take the lock back before it, wait instead.
   */
  yieldsTurn(): boolean {
    return false;
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
    const scoped = this.memberMade?.enteredScope ?? scopedOwner(this.identity);
    return scoped ? this.holder(scoped) : this.handleOwner;
  }

  /**
   * The handle sharing `owner` (the handle's own, outside withLock) whose acquire for it is
   * pending, if any: a read-write lock's other half. Another task is then taking the lock as the
   * same owner, and Redis would let this one in beside it.
   */
  protected acquiringBeside(_owner: LockOwner): string | undefined {
    return undefined;
  }
}
