import type { LockHandle } from '../../core/LockHandle';
import { refusedForNow } from '../../core/waitLoop';
import { scopedOwner } from '../../services/LockOwner';
import { IN_FLIGHT_GRACE_MS } from '../../services/bounds';
import { CompositeHold, pause, stillHeld, within } from './CompositeHold';
import { CompositeLock, SAME_LOCK_CHECK_MS } from './CompositeLock';

/** The first random back-off after a round that could not take every member, in ms; it doubles up to MAX. */
const FIRST_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 100;

/**
 * Redisson's RedissonMultiLock: held only while every member lock is held. The members may live
 * on independent Redis servers (one client each), or on one.
 *
 * It takes its members in the order of their keys, and waits for one (pub/sub, as `tryLock`
 * waits) holding only members of lower keys: two MultiLocks cannot wait for each other whatever
 * order their members are listed in, since a cycle of waits would need a key lower than itself.
 * A first round tries every member once, in parallel (one round trip when nothing is contended);
 * if one is taken by someone else, the members of higher keys go back, and the rest are taken one
 * by one, each waited for. A waiter woken by a release so gets the member before the releasing
 * MultiLock takes it back: P1 (A, B) and P2 (B, A) take turns, where random back-offs let one of
 * them lose round after round.
 *
 * With one key among the members twice (the same name on two servers) there is no order of the
 * locks that every process sees alike; such a MultiLock goes by rounds: every member once, in
 * parallel; after a refusal it gives back everything, sleeps a random back-off (doubling up to
 * 100 ms), waits for the member that refused it holding nothing, and tries the others once more.
 *
 * `leaseTime` applies to each member; the whole is valid until the first member's lease ends.
 * Without it each member is kept by its own client's watchdog, and the loss of any member is the
 * loss of the whole: the `lost` event, and `withLock`'s signal aborts.
 */
export class MultiLock extends CompositeLock {
  /** Member indexes by key; undefined when a key repeats (then by rounds). */
  private readonly keyOrder: readonly number[] | undefined;

  constructor(locks: readonly LockHandle[]) {
    super(locks);
    const order = this.members.map((_, i) => i).sort((a, b) => compareKeys(this.members[a]!.key, this.members[b]!.key));
    this.keyOrder = order.every((i, pos) => pos === 0 || this.members[order[pos - 1]!]!.key !== this.members[i]!.key) ? order : undefined;
  }

  /** Whether every member is locked (by anyone): then no MultiLock over them can be taken. */
  async isLocked(): Promise<boolean> {
    const locked = await Promise.all(this.members.map((member) => member.isLocked()));
    return locked.every(Boolean);
  }

  protected acquireMembers(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined> {
    return this.keyOrder ? this.acquireInKeyOrder(this.keyOrder, leaseTime, waitTime, signal) : this.acquireInRounds(leaseTime, waitTime, signal);
  }

  private async acquireInKeyOrder(keyOrder: readonly number[], leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined> {
    const deadline = performance.now() + waitTime;
    const bounded = Number.isFinite(deadline) && waitTime > 0;
    const attemptDeadline = bounded ? deadline : undefined;
    let backoff = FIRST_BACKOFF_MS;
    for (;;) {
      const handles = this.members.map((member) => member.fork());
      const sentAt: (number | undefined)[] = [];
      // Where the one-by-one part starts, in key order.
      let from = 0;
      // Not when a member's client just passed that lock's turn to another client's waiter: a
      // single attempt would take it back first, round after round.
      if (waitTime === 0 || !this.members.some((member) => member.yieldsTurn())) {
        const round = await this.tryEach(handles, sentAt, leaseTime, waitTime, signal, attemptDeadline);
        if (round.failure) {
          await this.giveBack(handles, sentAt, round.undo, bounded, deadline);
          throw round.failure.error;
        }
        from = keyOrder.findIndex((i) => sentAt[i] === undefined);
        if (from === -1) from = keyOrder.length;
        // A wait holds only members of lower keys than the one it waits for.
        if (from < keyOrder.length) await this.giveBack(handles, sentAt, round.undo, bounded, deadline, waitTime === 0 ? undefined : keyOrder.slice(from + 1));
        if (waitTime === 0 && from < keyOrder.length) return undefined;
      }
      for (let pos = from; pos < keyOrder.length; pos++) {
        const i = keyOrder[pos]!;
        const handle = handles[i]!;
        // With a leaseTime, the members held run out: the wait ends before the first of them does.
        const since = Math.min(...sentAt.filter((at): at is number => at !== undefined));
        const until = leaseTime === undefined || since === Infinity ? deadline : Math.min(deadline, since + leaseTime);
        // Nothing left: a wait of 0 would be a single attempt with no deadline (a frozen server's
        // member would hold the call for as long as the freeze).
        const left = until - performance.now();
        if (left <= 0) break;
        try {
          sentAt[i] = await handle.acquireHold(leaseTime, left, signal);
        } catch (error) {
          if (mayHaveRun(handle, error, signal)) handle.unlock().catch(() => undefined);
          await this.giveBack(handles, sentAt, [], bounded, deadline);
          throw error;
        }
        if (sentAt[i] === undefined) break;
      }
      const hold = this.holdIfFresh(handles, sentAt, leaseTime);
      if (hold) return hold;
      await this.giveBack(handles, sentAt, [], bounded, deadline);
      const left = deadline - performance.now();
      if (left <= 0) return undefined;
      // A wait cut short by a lease, or a member lost meanwhile: again, after a short pause.
      await pause(Math.min(left, Math.random() * backoff), signal, this.members);
      if (deadline - performance.now() <= 0) return undefined;
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  private async acquireInRounds(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined> {
    const deadline = performance.now() + waitTime;
    const bounded = Number.isFinite(deadline) && waitTime > 0;
    // Each member's single attempt of a round ends with the caller's waitTime (see waitFor).
    const attemptDeadline = bounded ? deadline : undefined;
    let backoff = FIRST_BACKOFF_MS;
    let blocker: number | undefined;
    for (;;) {
      const handles = this.members.map((member) => member.fork());
      const sentAt: (number | undefined)[] = [];
      if (blocker !== undefined) {
        // Holding nothing, wait for the member that refused us last round.
        const waited = handles[blocker]!;
        sentAt[blocker] = await waited.acquireHold(leaseTime, Math.max(0, deadline - performance.now()), signal).catch((error: unknown) => {
          if (mayHaveRun(waited, error, signal)) waited.unlock().catch(() => undefined);
          throw error;
        });
        if (sentAt[blocker] === undefined) return undefined;
      }
      const round = await this.tryEach(handles, sentAt, leaseTime, waitTime, signal, attemptDeadline, blocker);
      let { failure } = round;
      const refused = handles.findIndex((_, i) => sentAt[i] === undefined);
      if (!failure && refused === -1) {
        const hold = this.holdIfFresh(handles, sentAt, leaseTime);
        if (hold) return hold;
      }
      // One lock listed twice through two clients of one Redis refuses itself in every round.
      if (!failure && refused !== -1) failure = await this.sameLockTwice(handles, (i) => sentAt[i] !== undefined, refused, bounded ? Math.max(deadline, performance.now() + SAME_LOCK_CHECK_MS) : undefined);
      await this.giveBack(handles, sentAt, round.undo, bounded, deadline);
      if (failure) throw failure.error;
      const left = deadline - performance.now();
      if (left <= 0) return undefined;
      blocker = refused === -1 ? undefined : refused;
      await pause(Math.min(left, Math.random() * backoff), signal, this.members);
      // The pause may have taken what was left: the blocker's wait would be a single attempt
      // with no deadline.
      if (deadline - performance.now() <= 0) return undefined;
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  /**
   * Each member once, in parallel (but `skip`, already taken), within the caller's waitTime: a
   * member whose Redis does not answer by then counts as refused (what it took is given back
   * when it answers). Fills `sentAt` for the members taken; `undo` marks the failed acquires that
   * may have run; `failure` is the first error that is not a refusal.
   */
  private async tryEach(handles: LockHandle[], sentAt: (number | undefined)[], leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined, attemptDeadline: number | undefined, skip?: number): Promise<{ undo: boolean[]; failure: { error: unknown } | undefined }> {
    const results = await Promise.allSettled(handles.map((handle, i) => (i === skip ? Promise.resolve(sentAt[i]) : handle.acquireHold(leaseTime, 0, signal, attemptDeadline))));
    // Read now: an abort while a give-back is awaited does not make a failure an abort.
    const undo = results.map((result, i) => result.status === 'rejected' && mayHaveRun(handles[i]!, result.reason, signal));
    let failure: { error: unknown } | undefined;
    results.forEach((result, i) => {
      // A refusal Redis will not repeat for long (a failover, a slot in flux) is a refusal when
      // there is time to wait it out, as a lone lock's wait rides it out. (Given back all the
      // same: "too many Cluster redirections" may follow a write that ran.)
      if (result.status === 'rejected' && !(waitTime > 0 && refusedForNow(result.reason))) failure ??= { error: result.reason };
      else if (result.status === 'fulfilled') sentAt[i] = result.value;
    });
    return { undo, failure };
  }

  /**
   * Every member taken, as a hold; but not if a member's lease ran out (or its watchdog found it
   * gone) while a slower one answered: another owner may hold it already.
   */
  private holdIfFresh(handles: LockHandle[], sentAt: (number | undefined)[], leaseTime: number | undefined): CompositeHold | undefined {
    if (sentAt.length < handles.length || sentAt.some((at) => at === undefined)) return undefined;
    const members = handles.map((handle, i) => ({ handle, sentAt: sentAt[i]! }));
    const validUntil = leaseTime === undefined ? undefined : Math.min(...members.map((member) => member.sentAt)) + leaseTime;
    const fresh = validUntil === undefined ? stillHeld(members, true) === members.length : performance.now() < validUntil;
    return fresh ? new CompositeHold(this.name, members, members.length, validUntil, this.reportLost) : undefined;
  }

  /**
   * Gives back the members taken (`only` those, when given), within the waitTime: a member frozen
   * since it granted is given back when it answers, not waited for. A member whose acquire failed
   * (`undo`: its reply lost past ioredis's retries) may have run: it is given back too, once its
   * server answers, without holding up the caller (its connection may be down for offlineTimeout).
   * Each of them gets a fresh handle in `handles`: a give-back still out must not meet a later
   * acquire of the same owner.
   */
  private async giveBack(handles: LockHandle[], sentAt: (number | undefined)[], undo: boolean[], bounded: boolean, deadline: number, only?: readonly number[]): Promise<void> {
    const back = (only ?? handles.map((_, i) => i)).filter((i) => sentAt[i] !== undefined);
    const givingBack = Promise.all(back.map((i) => handles[i]!.unlock().catch(() => undefined)));
    for (const i of back) {
      sentAt[i] = undefined;
      handles[i] = this.members[i]!.fork();
    }
    await (bounded ? within(givingBack, Math.max(deadline - performance.now(), IN_FLIGHT_GRACE_MS)) : givingBack);
    handles.forEach((handle, i) => {
      if (!undo[i]) return;
      handle.unlock().catch(() => undefined);
      handles[i] = this.members[i]!.fork();
    });
  }

  protected releaseHold(hold: CompositeHold): Promise<void> {
    return hold.release(undefined, 0);
  }
}

/**
 * Whether a member's acquire that rejected with `error` may have taken the member and must be
 * undone: not when the rejection was the caller's abort (the acquire gives back what it took
 * then), nor for a member that entered the caller's own hold again (its unlock would give back
 * that scope's hold; a hold the acquire may have added goes with the scope: see RedLock's attempt).
 */
/** Keys compared as strings, alike in every process (code units, not the locale). */
function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function mayHaveRun(handle: LockHandle, error: unknown, signal: AbortSignal | undefined): boolean {
  if (signal?.aborted && error === signal.reason) return false;
  return scopedOwner(handle.identity) === undefined;
}
