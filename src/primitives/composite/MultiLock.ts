import { CompositeMember } from '../../core/CompositeMember';
import type { LockHandle } from '../../core/LockHandle';
import { refusedForNow } from '../../core/waitLoop';
import { IN_FLIGHT_GRACE_MS } from '../../services/bounds';
import { CompositeHold, mayHaveRun, pause, stillHeld, stopsOfMembers, within } from './CompositeHold';
import { CompositeLock, SAME_LOCK_CHECK_MS } from './CompositeLock';

/** The first random back-off after a round that could not take every member, in ms; it doubles up to MAX. */
const FIRST_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 100;

/**
 * Redisson's RedissonMultiLock: held only while every member lock is held. The members may live
 * on independent Redis servers (one client each), or on one.
 *
 * A round tries every member once, in parallel; if any is taken by someone else, it gives back
 * what it took, sleeps a random back-off (doubling, up to 100 ms), then waits for the refusing
 * member of the lowest key (pub/sub, as `tryLock` waits), holding nothing else, and tries the
 * others once more. It never waits while it holds a member, so it cannot deadlock with anyone,
 * MultiLock or lone lock, whatever order they take the locks in; the random back-off breaks the
 * symmetry that would otherwise let two of them take one member each and give back forever.
 *
 * A round right after this client's release woke another client's waiter for a member (RLock's
 * turn, see `LockHandle.yieldsTurn`) waits for that member first instead of trying it at once: a
 * single attempt would take it back before the woken waiter could ask, and two MultiLocks over
 * locks listed in opposite orders lost round after round to each other.
 *
 * `leaseTime` applies to each member; the whole is valid until the first member's lease ends.
 * Without it each member is kept by its own client's watchdog, and the loss of any member is the
 * loss of the whole: the `lost` event, and `withLock`'s signal aborts.
 */
export class MultiLock extends CompositeLock {
  /** Member indexes by key (the lowest first; one name on several servers in listed order): the same in every process. */
  private readonly keyOrder: readonly number[];

  constructor(locks: readonly LockHandle[]) {
    super(locks);
    this.keyOrder = this.members.map((_, i) => i).sort((a, b) => compareKeys(this.members[a]!.key, this.members[b]!.key) || a - b);
  }

  /** Whether every member is locked (by anyone): then no MultiLock over them can be taken. */
  async isLocked(): Promise<boolean> {
    const locked = await Promise.all(this.members.map((member) => member.isLocked()));
    return locked.every(Boolean);
  }

  protected async acquireMembers(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<CompositeHold | undefined> {
    const deadline = performance.now() + waitTime;
    const bounded = Number.isFinite(deadline) && waitTime > 0;
    // Each member's single attempt of a round ends with the caller's waitTime (see waitFor).
    const attemptDeadline = bounded ? deadline : undefined;
    let backoff = FIRST_BACKOFF_MS;
    // A member this client just passed to another client's waiter: waited for, not tried at once.
    let blocker = waitTime > 0 ? this.keyOrder.find((i) => this.members[i]!.yieldsTurn()) : undefined;
    for (;;) {
      const handles = this.members.map((member) => member.fork());
      const sentAt: (number | undefined)[] = [];
      if (blocker !== undefined) {
        // Holding nothing, wait for the member that refused us last round (or whose turn this
        // client just passed).
        const waited = handles[blocker]!;
        const stops = stopsOfMembers(signal, this.members, waited);
        try {
          sentAt[blocker] = await waited.asMember.acquireHold(leaseTime, Math.max(0, deadline - performance.now()), stops.signal).catch((error: unknown) => {
            if (mayHaveRun(waited, error, stops.signal)) waited.asMember.giveBack().catch(() => undefined);
            throw error;
          });
        } finally {
          stops.undo();
        }
        if (sentAt[blocker] === undefined) return undefined;
      }
      const round = await this.tryEach(handles, sentAt, leaseTime, waitTime, signal, attemptDeadline, blocker);
      let { failure } = round;
      // The refusing member of the lowest key: the one every process in its place waits for first
      // (not one left untried by its group's refusal: it may be free).
      const refused = this.keyOrder.find((i) => sentAt[i] === undefined && !round.notTried.has(i)) ?? this.keyOrder.find((i) => sentAt[i] === undefined);
      if (!failure && refused === undefined) {
        const hold = this.holdIfFresh(handles, sentAt, leaseTime);
        if (hold) return hold;
      }
      // One lock listed twice through two clients of one Redis refuses itself in every round.
      if (!failure && refused !== undefined) failure = await this.sameLockTwice(handles, (i) => sentAt[i] !== undefined, refused, bounded ? Math.max(deadline, performance.now() + SAME_LOCK_CHECK_MS) : undefined);
      // All or nothing: give back what this round took before anything else.
      await this.giveBack(handles, sentAt, round.undo, bounded, deadline);
      if (failure) throw failure.error;
      const left = deadline - performance.now();
      if (left <= 0) return undefined;
      blocker = refused;
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
  private async tryEach(handles: LockHandle[], sentAt: (number | undefined)[], leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined, attemptDeadline: number | undefined, skip?: number): Promise<{ undo: boolean[]; failure: { error: unknown } | undefined; notTried: Set<number> }> {
    // Plain members of one client and slot go in one all-or-nothing call (family.md, MultiLock
    // "cluster"); a refusal there leaves the group's other members untried.
    const notTried = new Set<number>();
    const together = new Map<number, Promise<number | undefined>>();
    for (const group of groupsOf(handles, skip, this.keyOrder)) {
      const taking = CompositeMember.acquireTogether(
        group.map((i) => handles[i]!.asMember),
        leaseTime,
        signal,
        attemptDeadline,
      ).then((outcome) => {
        if (outcome && 'sentAt' in outcome) return outcome.sentAt;
        // Unanswered by the deadline: each counts as refused, as a lone attempt cut so does.
        if (outcome) group.forEach((i, at) => at !== outcome.refused && notTried.add(i));
        return undefined;
      });
      for (const i of group) together.set(i, taking);
    }
    const results = await Promise.allSettled(handles.map((handle, i) => (i === skip ? Promise.resolve(sentAt[i]) : (together.get(i) ?? handle.asMember.acquireHold(leaseTime, 0, signal, attemptDeadline)))));
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
    return { undo, failure, notTried };
  }

  /**
   * The round's members, every one taken (`sentAt` set for each), as a hold; but not if a
   * member's lease ran out (or its watchdog found it gone) while a slower one answered: another
   * owner may hold it already.
   */
  private holdIfFresh(handles: LockHandle[], sentAt: (number | undefined)[], leaseTime: number | undefined): CompositeHold | undefined {
    const members = handles.map((handle, i) => ({ handle, sentAt: sentAt[i]!, member: i }));
    const validUntil = leaseTime === undefined ? undefined : Math.min(...members.map((member) => member.sentAt)) + leaseTime;
    const fresh = validUntil === undefined ? stillHeld(members, true) === members.length : performance.now() < validUntil;
    return fresh ? new CompositeHold(this.name, members, members.length, members.length, validUntil, this.reportLost) : undefined;
  }

  /**
   * Gives back the members taken, within the waitTime: a member frozen since it granted is given
   * back when it answers, not waited for. A member whose acquire failed (`undo`: its reply lost
   * past ioredis's retries) may have run: it is given back too, once its server answers, without
   * holding up the caller (its connection may be down for offlineTimeout).
   */
  private async giveBack(handles: LockHandle[], sentAt: (number | undefined)[], undo: boolean[], bounded: boolean, deadline: number): Promise<void> {
    const givingBack = Promise.all(handles.map((handle, i) => (sentAt[i] === undefined ? undefined : handle.asMember.giveBack().catch(() => undefined))));
    await (bounded ? within(givingBack, Math.max(deadline - performance.now(), IN_FLIGHT_GRACE_MS)) : givingBack);
    handles.forEach((handle, i) => {
      if (undo[i]) handle.asMember.giveBack().catch(() => undefined);
    });
  }

  protected releaseHold(hold: CompositeHold): Promise<number> {
    return hold.release(undefined, 0);
  }
}

/** Indexes of the members (but `skip`) that can be taken in one call, by their `togetherKey`: groups of two or more. */
function groupsOf(handles: readonly LockHandle[], skip: number | undefined, keyOrder: readonly number[]): number[][] {
  const groups = new Map<string, number[]>();
  // In key order: the script's refusal is then the group's refused member of the lowest key.
  keyOrder.forEach((i) => {
    const handle = handles[i]!;
    const key = i === skip ? undefined : handle.togetherKey();
    if (key === undefined) return;
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return [...groups.values()].filter((group) => group.length > 1);
}

/** Keys compared as strings, alike in every process (code units, not the locale). */
function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
