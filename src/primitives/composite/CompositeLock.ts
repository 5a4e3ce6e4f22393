import { EventEmitter } from 'node:events';
import { nanoid } from 'nanoid';
import { outcomeOf, watchHold } from '../../core/holdScope';
import { LockHandle } from '../../core/LockHandle';
import { ClientClosedError, InvalidArgumentError, LockLostError, LockTimeoutError, LockUsageError, NotLockOwnerError } from '../../errors';
import { checkLockOptions, type LockOptions, type TryLockOptions, type WithLockOptions } from '../../options';
import { type CompositeScope, heldByCompositeScope, runHoldingMembers } from '../../services/LockOwner';
import { type CompositeHold, within } from './CompositeHold';

/** How long the same-lock-twice check may ask past a waitTime: an answering Redis needs far less; a frozen one is not waited for. */
export const SAME_LOCK_CHECK_MS = 100;

export interface CompositeLockEvents {
  /** The lock, held through `lock()`/`tryLock()` or `withLock`, was lost (see each class for when). */
  lost: [LockLostError];
}

/**
 * What MultiLock and RedLock share: one lock made of member locks (RLock or FairLock handles, on
 * one or several Redis servers), the public calls, and the life of a hold. Each acquisition takes
 * every member through a fresh handle of its own (`fork()`), so a late answer to an abandoned
 * attempt is given back without touching a newer hold, and two `withLock` calls on one instance
 * are two owners, as with `RLock`.
 *
 * Not reentrant: a `withLock`, `lock()` or `tryLock()` inside a `withLock` of a composite that
 * shares a member lock with it would wait for itself, so it is refused with `LockUsageError`.
 */
export abstract class CompositeLock extends EventEmitter<CompositeLockEvents> {
  /**
   * The members' names, each once, joined by `+`: `a+b` for a MultiLock over locks a and b, `a`
   * for a RedLock over lock a on several servers (errors name the resource, not a+a+a+a+a).
   */
  readonly name: string;
  protected readonly members: readonly LockHandle[];
  /** Names this instance in NotLockOwnerError. */
  private readonly id = nanoid();
  /** The hold of `lock()`/`tryLock()` (one at a time; `withLock` holds its own). */
  protected current: CompositeHold | undefined;
  private acquiring = false;

  protected constructor(locks: unknown, argument = 'locks') {
    super();
    if (!Array.isArray(locks) || locks.length === 0) {
      throw new InvalidArgumentError(argument, `must be a non-empty array of lock handles (client.getLock(name)), got ${Array.isArray(locks) ? 'an empty array' : typeof locks}`);
    }
    const seen = new Set<string>();
    // A plain loop, not forEach: forEach skips the holes of a sparse array (`[a, , b]`).
    for (let i = 0; i < locks.length; i++) {
      const lock: unknown = locks[i];
      if (!(lock instanceof LockHandle)) throw new InvalidArgumentError(`${argument}[${i}]`, 'must be a lock handle: client.getLock(), getFairLock(), or readLock() or writeLock() of a read-write lock');
      // The same lock of the same client twice would be one hold counted as two.
      if (seen.has(lock.identity)) throw new InvalidArgumentError(`${argument}[${i}]`, `is lock "${lock.name}" of a client already in the list`);
      seen.add(lock.identity);
    }
    this.members = [...(locks as LockHandle[])];
    this.name = [...new Set(this.members.map((member) => member.name))].join('+');
  }

  /**
   * Takes enough members within `waitTime` (0: one round); resolves with the hold, or undefined
   * when the time ran out having given back whatever it took.
   */
  protected abstract acquireMembers(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined>;

  /** Gives back what a hold took (MultiLock: every member must answer; RedLock: bounded, best effort); how many members were no longer held. */
  protected abstract releaseHold(hold: CompositeHold): Promise<number>;

  /** Whether someone holds the whole lock now (each class says what that means). */
  abstract isLocked(): Promise<boolean>;

  /** Waits as long as it takes (or until `signal` aborts) and takes the lock. */
  async lock(options?: LockOptions): Promise<void> {
    const { leaseTime, signal } = checkLockOptions(options, false);
    await this.take(leaseTime, Infinity, signal);
  }

  /** Takes the lock if it can within `waitTime` (default: one round); true when it did. */
  async tryLock(options?: TryLockOptions): Promise<boolean> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    return this.take(leaseTime, waitTime ?? 0, signal);
  }

  /** Gives back the hold of `lock()`/`tryLock()`; throws `NotLockOwnerError` when there is none. */
  async unlock(): Promise<void> {
    const hold = this.current;
    // As a lone handle answers: the lock() under way would hold the members after this returned.
    if (!hold && this.acquiring) throw new LockUsageError(`this ${this.constructor.name} "${this.name}" is still acquiring it; unlock() once its lock() has resolved`);
    if (!hold) throw new NotLockOwnerError(this.name, this.id);
    this.current = undefined;
    await this.releaseHold(hold);
  }

  /**
   * Runs `fn` holding the lock and gives it back in `finally`. `fn`'s signal aborts when the lock
   * is lost or `options.signal` aborts; a loss while `fn` ran makes `withLock` reject with
   * `LockLostError` even if `fn` resolved.
   */
  async withLock<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: WithLockOptions): Promise<T> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    const maxWait = waitTime ?? Infinity;
    this.refuseNested();
    this.assertMembersOpen();
    const hold = await this.acquireMembers(leaseTime, maxWait, signal);
    if (!hold) throw new LockTimeoutError(this.name, maxWait);
    const scope = new AbortController();
    const identities = this.members.map((member) => member.identity);
    const call: CompositeScope = { over: false };
    const outcome = await outcomeOf(() => runHoldingMembers(identities, call, () => fn(scope.signal)), watchHold(scope, [signal, hold.lostSignal]));
    // Code `fn` started that runs on no longer counts as inside this call (see ScopeCall in LockOwner).
    call.over = true;
    // Asked now, not only told by timers: a callback that blocked the event loop past the
    // validity and returned without awaiting anything ran before any of them could fire.
    let lost = hold.lostNow();
    let releaseError: unknown;
    try {
      const gone = await this.releaseHold(hold);
      // Under the watchdog, the same block kept the renewals from running: members Redis no
      // longer held when they were given back are a loss the watchdog had no chance to tell.
      // (Not with a leaseTime: the validity is the authority there, and a member whose lease
      // ran out just after a callback that returned in time is no loss: a second reader's repro.)
      if (!lost && hold.validUntil === undefined && hold.members.length - gone < hold.needed) {
        const error = new LockLostError(this.name, `${gone} of its ${hold.members.length} members were no longer held when it was released (the event loop blocked past their lease?)`);
        this.reportLost(error);
        lost = error;
      }
    } catch (error) {
      releaseError = error;
    }
    if ('error' in outcome) throw outcome.error;
    if (lost) throw lost;
    if (releaseError !== undefined) throw releaseError;
    return outcome.value;
  }

  /**
   * A `LockUsageError` when the member `refused` was refused by a member this round took
   * (`taken`): the same lock on one Redis through two clients (the same name on two servers is
   * two locks, so only Redis can tell). Without it the composite would wait for itself for good.
   * Asked of the refusing member's Redis until `until` (performance.now() ms; no answer: not the
   * same lock, as far as we know), and once per pair of members: the answer is the
   * configuration's, not the moment's.
   */
  protected async sameLockTwice(handles: LockHandle[], taken: (i: number) => boolean, refused: number, until: number | undefined): Promise<{ error: unknown } | undefined> {
    const other = handles[refused]!;
    for (const [i, handle] of handles.entries()) {
      if (i === refused || !taken(i) || handle.key !== other.key || this.distinctPairs.has(`${i}:${refused}`)) continue;
      const asking = handle.asMember.holdsThrough(other.asMember).catch(() => undefined);
      const answer = until === undefined ? await asking : await within(asking, Math.max(until - performance.now(), 0));
      if (answer === false) this.distinctPairs.add(`${i}:${refused}`);
      if (answer === true) {
        return { error: new LockUsageError(`${this.constructor.name} "${this.name}": members ${Math.min(i, refused)} and ${Math.max(i, refused)} are the same lock "${other.name}" on one Redis through two clients; it would wait for itself`) };
      }
    }
    return undefined;
  }

  /** Pairs of members (`taken:refused`) whose Redis said they are two locks (see sameLockTwice). */
  private readonly distinctPairs = new Set<string>();

  /** Reports a loss of a hold: the `lost` event. */
  protected readonly reportLost = (error: LockLostError): void => {
    this.emit('lost', error);
  };

  /**
   * A member whose client is closed fails every round: refused before the open members are taken
   * (and given back) for nothing.
   */
  protected assertMembersOpen(): void {
    if (this.members.some((member) => member.asMember.closedSignal.aborted)) throw new ClientClosedError();
  }

  /** Inside a `withLock` of a composite sharing a member with this one, taking it would wait for that member forever. */
  private refuseNested(): void {
    const shared = this.members.find((member) => heldByCompositeScope(member.identity));
    if (shared) {
      throw new LockUsageError(`${this.constructor.name} "${this.name}": called inside a withLock that holds its member lock "${shared.name}"; a composite is not reentrant, it would wait for itself`);
    }
  }

  private async take(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<boolean> {
    this.refuseNested();
    if (this.current || this.acquiring) {
      throw new LockUsageError(`this ${this.constructor.name} "${this.name}" already ${this.current ? 'holds it' : 'is acquiring it'}; it is not reentrant. Use withLock() for concurrent sections.`);
    }
    this.assertMembersOpen();
    this.acquiring = true;
    try {
      const hold = await this.acquireMembers(leaseTime, waitTime, signal);
      this.current = hold;
      return hold !== undefined;
    } finally {
      this.acquiring = false;
    }
  }
}
