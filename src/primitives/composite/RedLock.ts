import type { LockHandle } from '../../core/LockHandle';
import { scopedOwner } from '../../services/LockOwner';
import { checkPlainObject, MAX_TIME_MS } from '../../options';
import { InvalidArgumentError, QuorumUnavailableError, RedisCommandError } from '../../errors';
import { CompositeHold, mayHaveRun, pause, stillHeld, within } from './CompositeHold';
import { CompositeLock } from './CompositeLock';

export interface RedLockOptions {
  /** How long one member's acquire may take before it counts as failed, in ms. Default 100. */
  attemptTimeout?: number;
  /** Mean pause between rounds, in ms; each pause is random in [0.5, 1.5) × this. Default 100. */
  retryDelay?: number;
  /** Clock drift allowed per ms of lease (redis.io: 0.01), plus 2 ms. Default 0.01. */
  driftFactor?: number;
  /**
   * Caps the extensions of a hold kept by the watchdogs (no `leaseTime`), as the Redlock
   * algorithm asks for liveness: each member is renewed only while the hold is younger than
   * `maxHoldTime −` its own lease, so the hold ends at most `maxHoldTime` ms after its
   * acquisition began (then `lost`, and `withLock`'s signal aborts). At least the members'
   * longest `watchdogTimeout`; a `leaseTime` may not exceed it. Default: no cap.
   */
  maxHoldTime?: number;
}

const OPTION_KEYS = ['attemptTimeout', 'retryDelay', 'driftFactor', 'maxHoldTime'];

/** What one member's attempt in a round came to: taken, refused (held by someone else: it answered), or failed (an error, or no answer within attemptTimeout). */
type AttemptOutcome = { sentAt: number } | { refused: true } | { failed: unknown };

const NO_ANSWER = Symbol('no answer');

/**
 * The Redlock algorithm (redis.io, "Distributed locks with Redis"; Redisson's RedissonRedLock)
 * over N member locks on N independent Redis masters. A round tries every member in parallel,
 * each bounded by `attemptTimeout`; it holds when a majority (N/2 + 1) was taken and the time
 * spent is below the lease minus the drift allowance (`lease × driftFactor + 2 ms`). The validity
 * is what remains: `start + lease − drift`. Otherwise it gives back every member it took (a late
 * answer from a member that timed out is given back when it comes), pauses a random delay and
 * tries again within `waitTime`. When the time is up and in the last round fewer than a
 * majority of the servers answered at all, `tryLock` and `withLock` reject with
 * `QuorumUnavailableError` (an outage) instead of answering false / `LockTimeoutError` (contention).
 *
 * With `leaseTime`, the whole is lost when the validity ends. Without it, each member is kept by
 * its own client's watchdog (the validity check uses the shortest `watchdogTimeout`), and the
 * whole is lost once fewer than a majority of the members taken are still held.
 *
 * Its safety rests on timing assumptions (bounded network delay, process pauses and clock
 * drift) and on servers that do not restart empty within a lease; see docs/topologies.md.
 */
export class RedLock extends CompositeLock {
  /** The majority: N/2 + 1 members. */
  readonly quorum: number;
  private readonly attemptTimeout: number;
  private readonly retryDelay: number;
  private readonly driftFactor: number;
  private readonly maxHoldTime: number | undefined;

  constructor(locks: readonly LockHandle[], options?: RedLockOptions) {
    super(locks);
    const checked = checkRedLockOptions(options);
    this.attemptTimeout = checked.attemptTimeout;
    this.retryDelay = checked.retryDelay;
    this.driftFactor = checked.driftFactor;
    this.maxHoldTime = checked.maxHoldTime;
    this.quorum = Math.floor(this.members.length / 2) + 1;
    // Each member is renewed until maxHoldTime less its own lease: no lease may be longer.
    const longest = Math.max(...this.members.map((member) => member.asMember.watchdogTimeout));
    if (this.maxHoldTime !== undefined && this.maxHoldTime < longest) {
      throw new InvalidArgumentError('options.maxHoldTime', `must be at least the members' watchdog lease (their longest watchdogTimeout, ${longest} ms), got ${this.maxHoldTime}`);
    }
  }

  /** Whether a majority of the members answer (within `attemptTimeout`) that they are locked. */
  async isLocked(): Promise<boolean> {
    // A closed client's member would read as "not locked" (its failure counts as no answer).
    this.assertMembersOpen();
    const answers = await Promise.all(this.members.map((member) => within(member.isLocked(), this.attemptTimeout).catch(() => false)));
    return answers.filter(Boolean).length >= this.quorum;
  }

  /**
   * Ms left of the validity of the hold of `lock()`/`tryLock()` taken with a `leaseTime`, or of
   * one whose extensions stopped at its `maxHoldTime`; undefined otherwise. Whole ms, rounded
   * down (never more than is left), as every other time of the API.
   */
  remainingValidity(): number | undefined {
    const until = this.current?.validityEnd;
    return until === undefined ? undefined : Math.max(0, Math.floor(until - performance.now()));
  }

  protected async acquireMembers(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined> {
    const deadline = performance.now() + waitTime;
    const lease = leaseTime ?? this.watchdogLease();
    const drift = Math.floor(lease * this.driftFactor) + 2;
    // Never valid: every round would be given back, and lock() would go on for good.
    if (lease <= drift) throw new InvalidArgumentError('options.leaseTime', `must be longer than the clock drift allowed for it (${drift} ms), got ${lease}`);
    if (leaseTime !== undefined && this.maxHoldTime !== undefined && leaseTime > this.maxHoldTime) {
      throw new InvalidArgumentError('options.leaseTime', `must not exceed the RedLock's maxHoldTime (${this.maxHoldTime} ms), got ${leaseTime}`);
    }
    for (;;) {
      signal?.throwIfAborted();
      const start = performance.now();
      const handles = this.members.map((member) => member.fork());
      // One timer bounds the whole round: every attempt was sent at its start.
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<typeof NO_ANSWER>((resolve) => {
        timer = setTimeout(() => resolve(NO_ANSWER), this.attemptTimeout);
      });
      let outcomes: AttemptOutcome[];
      try {
        outcomes = await Promise.all(handles.map((handle) => this.attempt(handle, leaseTime, signal, expired)));
      } finally {
        clearTimeout(timer);
      }
      const taken = handles.flatMap((handle, i) => {
        const outcome = outcomes[i]!;
        return 'sentAt' in outcome ? [{ handle, sentAt: outcome.sentAt, member: i }] : [];
      });
      const failures = outcomes.flatMap((outcome) => ('failed' in outcome ? [outcome.failed] : []));
      // Only Redis's failures (a server down, slow or refusing) are faults a quorum rides out. Any
      // other (a member's client closed, a usage error, a bug) fails every round the same way.
      const fatal = failures.find((failure) => failure !== undefined && !(failure instanceof RedisCommandError));
      const validUntil = start + lease - drift;
      if (!signal?.aborted && fatal === undefined && stillHeld(taken, leaseTime === undefined) >= this.quorum && performance.now() < validUntil) {
        const cap = leaseTime === undefined && this.maxHoldTime !== undefined ? { start, maxHoldTime: this.maxHoldTime, drift } : undefined;
        return new CompositeHold(this.name, taken, this.members.length, this.quorum, leaseTime === undefined ? undefined : validUntil, this.reportLost, cap);
      }
      // One lock listed twice through two clients of one Redis refuses itself in every round.
      const refusedAt = outcomes.findIndex((outcome) => 'refused' in outcome);
      const misuse = fatal === undefined && refusedAt >= 0 ? await this.sameLockTwice(handles, (i) => 'sentAt' in outcomes[i]!, refusedAt, performance.now() + this.attemptTimeout) : undefined;
      await this.giveBack(taken.map((member) => member.handle));
      signal?.throwIfAborted();
      if (fatal !== undefined) throw fatal;
      if (misuse) throw misuse.error;
      const left = deadline - performance.now();
      if (left <= 0) {
        const answered = outcomes.length - failures.length;
        if (answered < this.quorum) {
          throw new QuorumUnavailableError(this.name, waitTime, answered, this.members.length, this.quorum, failures.filter((failure) => failure !== undefined));
        }
        return undefined;
      }
      await pause(Math.min(left, this.retryDelay * (0.5 + Math.random())), signal, this.members);
    }
  }

  /** The lease the watchdogs keep the members for: the shortest of their clients' `watchdogTimeout`. */
  private watchdogLease(): number {
    return Math.min(...this.members.map((member) => member.asMember.watchdogTimeout));
  }

  protected releaseHold(hold: CompositeHold): Promise<number> {
    // A minority of members down or paused does not make unlock fail: their holds expire.
    return hold.release(this.attemptTimeout, this.members.length - this.quorum);
  }

  /**
   * One member's acquire, bounded by the round's `expired`. An attempt abandoned by the timeout
   * may still take the member later; it is given back then.
   */
  private async attempt(handle: LockHandle, leaseTime: number | undefined, signal: AbortSignal | undefined, expired: Promise<typeof NO_ANSWER>): Promise<AttemptOutcome> {
    let abandoned = false;
    // A member entered again inside a withLock of its own (the caller holds it already).
    const reenters = scopedOwner(handle.identity) !== undefined;
    const acquiring = handle.asMember.acquireHold(leaseTime, 0, signal);
    acquiring.then(
      (sentAt) => {
        if (abandoned && sentAt !== undefined) handle.asMember.giveBack().catch(() => undefined);
      },
      (error: unknown) => {
        // Failed (connection lost mid-call, client closed): it may have run; make sure it is
        // undone. Not for a member entered again: if it never ran, the unlock would give back
        // the enclosing scope's own hold (another owner could then take the lock while that
        // scope runs); a hold it may have added goes back when that scope ends.
        // Whether the failure is the abort, not whether the signal is aborted by now: a failure
        // before a later abort still leaves the member taken for its lease (a helper audit).
        if (mayHaveRun(handle, error, signal, reenters)) handle.asMember.giveBack().catch(() => undefined);
      },
    );
    try {
      const sentAt = await Promise.race([acquiring, expired]);
      // From here on a success is too late to count: a call still pending is abandoned.
      abandoned = true;
      if (sentAt === NO_ANSWER) return { failed: undefined };
      return sentAt === undefined ? { refused: true } : { sentAt };
    } catch (error) {
      return { failed: error };
    }
  }

  private async giveBack(handles: LockHandle[]): Promise<void> {
    await Promise.all(handles.map((handle) => within(handle.asMember.giveBack(), this.attemptTimeout).catch(() => undefined)));
  }
}

function checkRedLockOptions(options: unknown): Required<Omit<RedLockOptions, 'maxHoldTime'>> & Pick<RedLockOptions, 'maxHoldTime'> {
  if (options === undefined) return { attemptTimeout: 100, retryDelay: 100, driftFactor: 0.01 };
  const raw = checkPlainObject('options', options, OPTION_KEYS);
  const whole = (name: string, value: unknown, fallback: number, min: number): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 600_000) {
      throw new InvalidArgumentError(`options.${name}`, `must be a whole number of ms from ${min} to 600000, got ${String(value)}`);
    }
    return value;
  };
  const driftFactor = raw.driftFactor ?? 0.01;
  if (typeof driftFactor !== 'number' || !(driftFactor >= 0 && driftFactor < 0.5)) {
    throw new InvalidArgumentError('options.driftFactor', `must be a number from 0 to below 0.5, got ${String(driftFactor)}`);
  }
  const maxHoldTime = raw.maxHoldTime;
  if (maxHoldTime !== undefined && (typeof maxHoldTime !== 'number' || !Number.isInteger(maxHoldTime) || maxHoldTime < 1 || maxHoldTime > MAX_TIME_MS)) {
    throw new InvalidArgumentError('options.maxHoldTime', `must be a whole number of ms from 1 to ${MAX_TIME_MS}, got ${String(maxHoldTime)}`);
  }
  return { attemptTimeout: whole('attemptTimeout', raw.attemptTimeout, 100, 1), retryDelay: whole('retryDelay', raw.retryDelay, 100, 0), driftFactor, maxHoldTime };
}
