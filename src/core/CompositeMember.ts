import { OUTCOME_UNKNOWN, settledWithinGrace } from '../services/bounds';
import { readOne } from '../services/database';
import type { LockContext } from '../services/LockContext';
import { type LockOwner, scopedOwner } from '../services/LockOwner';
import type { LockAcquisition } from './LockAcquisition';
import type { LockRelease } from './LockRelease';
import type { LockScopes } from './LockScopes';
import { endsAsTimedOut, stopsOf } from './waitLoop';

/**
 * What being a composite's member asks of a lock handle: the handle's own steps, bound to it
 * (`LockHandle` makes this once, when a MultiLock/RedLock first uses it), so that they stay its
 * private business.
 */
export interface MemberLock {
  readonly context: LockContext;
  readonly key: string;
  /** One lock of one client (`LockHandle.identity`): what the scope owners are kept under. */
  readonly identity: string;
  readonly acquisition: Pick<LockAcquisition<unknown>, 'ownerToAcquire' | 'acquire' | 'acquired'>;
  readonly releases: Pick<LockRelease, 'giveBackUnbooked'>;
  readonly scopes: Pick<LockScopes, 'leaveNested' | 'leaveScope'>;
  field(owner: LockOwner): string;
  /** The owner that books this handle's holds for `owner` (see `LockHandle.holder`). */
  holder(owner: LockOwner): LockOwner;
  /** Who the handle acts as now (see `LockHandle.currentOwner`). */
  currentOwner(): LockOwner;
  /** `unlock()` of a hold that is the handle's own or its scope's, not one entered for a composite. */
  giveBackOwn(): Promise<void>;
}

/**
 * A lock handle as a MultiLock/RedLock member (`LockHandle.asMember`, a fork's as a rule): how
 * the composite takes it (alone or with others of its slot in one call), gives it back, watches
 * its loss and stops its renewal.
 */
export class CompositeMember {
  /**
   * A composite's member (a fork) whose acquire re-entered an enclosing `withLock`'s hold: that
   * scope's owner. The hold is inside the scope (`scopesInside`) until the fork's `unlock()` gives
   * it back, and the fork acts as that owner meanwhile, also once the scope's call has ended.
   */
  private entered: LockOwner | undefined;

  constructor(private readonly lock: MemberLock) {}

  /** The enclosing scope's owner this member acts as (see `entered`), if any. */
  get enteredScope(): LockOwner | undefined {
    return this.entered;
  }

  /**
   * `unlock()` for a composite giving back a member it took (a round that failed, an attempt
   * abandoned, the composite's own release), also once the member's client is closing: that
   * release goes out as a lone lock's give-back of a hold taken as `close()` came does. Refused
   * by the closing client, the member stayed taken by nobody for its lease (a helper audit).
   */
  async giveBack(): Promise<void> {
    const entered = this.entered;
    if (!entered) return this.lock.giveBackOwn();
    this.entered = undefined;
    return this.lock.scopes.leaveNested(entered, this.lock.holder(entered));
  }

  /**
   * `tryLock` that resolves with the send time (performance.now()) of the acquire that took the
   * lock, or undefined when `waitTime` ran out: a composite lock times its validity from it.
   */
  async acquireHold(leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<number | undefined> {
    const { context, acquisition } = this.lock;
    context.assertOpen();
    const owner = acquisition.ownerToAcquire();
    const scope = scopedOwner(this.lock.identity);
    if (!scope) return acquisition.acquire(owner, leaseTime, waitTime, signal, attemptDeadline);
    // Re-entering an enclosing withLock's hold: inside that scope from the call on, as a nested
    // withLock is (see LockScopes.enterScope). A composite withLock its callback did not await
    // keeps the member past the scope's end; before, that end gave it back under the composite.
    scope.scopesInside++;
    try {
      const sentAt = await acquisition.acquire(owner, leaseTime, waitTime, signal, attemptDeadline);
      if (sentAt !== undefined) this.entered = scope;
      return sentAt;
    } finally {
      // Not inside after all: the last one out of an ended scope still ends it.
      if (this.entered !== scope) await this.lock.scopes.leaveScope(scope, owner).catch(() => undefined);
    }
  }

  /**
   * Takes `members` (of fresh handles whose `togetherKey` is the same) in one call, all or none,
   * as one round's single attempts (a MultiLock's): `{ sentAt }` with every hold booked as its
   * own acquire would book it; `{ refused }`, the index among `members` of one held by someone
   * else (nothing taken); undefined when Redis did not answer by `attemptDeadline` (what it took
   * then is given back when it answers, as a lone attempt's is). Rejects as a lone attempt would
   * (the caller's abort, `ClientClosedError`, Redis's errors).
   */
  static async acquireTogether(members: readonly CompositeMember[], leaseTime: number | undefined, signal: AbortSignal | undefined, attemptDeadline: number | undefined): Promise<{ sentAt: number } | { refused: number } | undefined> {
    const forks = members.map((member) => member.lock);
    const { context } = forks[0]!;
    context.assertOpen();
    const owners = forks.map((fork) => fork.acquisition.ownerToAcquire());
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
      const booked = await Promise.allSettled(forks.map((fork, i) => fork.acquisition.acquired(owners[i]!, leaseTime, { sentAt }, signal)));
      const failed = booked.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      return { sentAt };
    } finally {
      for (const owner of owners) owner.pending--;
    }
  }

  /** Aborts when the watchdog finds the current owner's hold lost; undefined when the watchdog does not keep it. */
  lostSignal(): AbortSignal | undefined {
    const { context, key } = this.lock;
    return context.renewal.lostSignal(key, this.lock.field(this.lock.currentOwner()));
  }

  /**
   * What stops the watchdog renewing the current owner's hold (a RedLock's `maxHoldTime`): it
   * runs out with the lease it has. It answers until when it may be taken for held at most
   * (performance.now() ms), undefined when the watchdog did not keep it (lost already). A hold
   * this handle entered again for an enclosing scope (its owner is not the fork's own) is that
   * scope's: still renewed, and its end as of now is answered.
   */
  renewalStopper(): () => number | undefined {
    const { context, key } = this.lock;
    // The owner as of now: the stop comes from a timer, whose context need not be the caller's.
    const owner = this.lock.currentOwner();
    const field = this.lock.field(owner);
    return () => (!owner.singleUse || owner.holds > 1 ? context.renewal.lostAt(key, field) : context.renewal.remove(key, field)?.lostAt);
  }

  /**
   * Whether this handle's current owner holds `other`'s key on `other`'s Redis: then both are
   * one lock reached through two clients (a composite's members must be different locks).
   */
  async holdsThrough(other: CompositeMember): Promise<boolean> {
    const field = this.lock.field(this.lock.currentOwner());
    const { context, key } = other.lock;
    return (await context.command('isHeldByCurrentOwner', (redis) => readOne(redis, (reads) => reads.hexists(key, field)))) === 1;
  }

  /** The lease the watchdog keeps a hold taken without `leaseTime` alive with, in ms. */
  get watchdogTimeout(): number {
    return this.lock.context.watchdogTimeout;
  }

  /** Aborted by its client's close(): a composite's pause between rounds ends with it. */
  get closedSignal(): AbortSignal {
    return this.lock.context.closedSignal;
  }
}
