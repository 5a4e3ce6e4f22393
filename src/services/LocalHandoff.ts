import type { Hold } from './Hold';
import { OUTCOME_UNKNOWN } from './bounds';

/** What a release tells a waiter it claimed but could not hand the lock to: its client's turn is later, sleep on. */
export const PARK_AGAIN = Symbol('park again');

export { OUTCOME_UNKNOWN };

/** What a claimed waiter is told: the hold handed over, undefined to try again, PARK_AGAIN or OUTCOME_UNKNOWN. */
export type Handover = Hold | undefined | typeof PARK_AGAIN | typeof OUTCOME_UNKNOWN;

/** A parked waiter of this client that a release of the same client may hand the lock to. */
export interface Candidate {
  /** The waiter's owner field `<clientId>:<ownerId>` and the lease it asked for. */
  readonly field: string;
  readonly lease: number;
  /** A semaphore's waiter: the permits it waits for (handed over in-process, see Semaphore.release). */
  readonly permits?: number;
  /**
   * Gives back a hold handed over to the waiter after it stopped waiting (its caller's signal
   * or close() came while the release that claimed it was still out). Without it (the plain
   * semaphore, whose handoff makes no Redis call and tells a claimed waiter at once) a claimed
   * waiter waits for its outcome.
   */
  readonly giveBack?: () => Promise<unknown>;
  /**
   * The same for an outcome that is unknown (OUTCOME_UNKNOWN), by a waiter still waiting or one
   * that stopped: gives back only what can only be that handover (its owner holds nothing of its
   * own, and acquires nothing else); without it, nothing is given back.
   */
  readonly giveBackIfUnknown?: (stillWaiting: boolean) => Promise<unknown>;
  /**
   * Takes the waiter out of its sleep for a handoff; returns how to tell it the outcome (the
   * hold, or undefined to try again), or undefined when it stopped waiting meanwhile.
   */
  claim(): ((outcome: Handover) => void) | undefined;
}

/** A candidate as its client's LocalHandoff keeps it: `parked` while it is in the line, at its `arrival`. */
export interface ParkedCandidate extends Candidate {
  parked: boolean;
  arrival: number;
}

/**
 * A client's run of local handoffs: at most this many in a row, and for at most this long (ms
 * from the run's first handoff), whichever ends first; then the lock (or permit) goes back
 * through Redis so that the other processes get their turn. Every run's end costs a wake-up
 * round trip or more to another process (bench: with runs of 8 that was 17 % of RLock's time at
 * 4 processes × 8 tasks, and a third of the semaphore's Redis calls); the time bound keeps a
 * long run from keeping the others out: holders that keep the lock ≥ 20 ms pass it on through
 * Redis every time, as Redisson's would.
 */
export const MAX_LOCAL_HANDOFFS = 32;
export const MAX_LOCAL_RUN_MS = 20;

/** How long a client that passed the lock on keeps its own new callers from taking it back. */
const YIELD_MS = 50;

/**
 * Cohorting, per client and lock (RLock, the semaphores): a release whose client has waiters
 * parked on the same lock hands it to the first of them in the release script itself (no
 * message, no attempt), for a run bounded by MAX_LOCAL_HANDOFFS and MAX_LOCAL_RUN_MS. Waiters of one client are
 * served in the order they parked. What follows a full run differs: RLock's release script
 * passes the lock to the next client in its queue of waiting clients (see WaitingClient); the
 * semaphores release for real and yield: until another client's release message arrives (or
 * YIELD_MS pass, in case nobody else took it), their own release message wakes none of their
 * waiters and their new callers do not barge in, so the other processes get their turn.
 */
export class LocalHandoff {
  /** In order of arrival. */
  private readonly candidates: ParkedCandidate[] = [];
  private arrivals = 0;
  /** Local handoffs since the lock last came from (or went to) another client. */
  private streak = 0;
  /** When the first handoff of the current streak was made (performance.now()). */
  private streakStartedAt = 0;
  private yieldTimer: NodeJS.Timeout | undefined;
  /** Wake-ups of this client's own release messages held back while it yields. */
  private heldBack = 0;
  /**
   * A semaphore's permits were cut below those held (a negative addPermits): a release must go
   * back to Redis, where it pays off the cut, instead of to a waiter here, until a reply of Redis
   * says permits are free again (the semaphore calls suspend/resume; the lock never does).
   */
  suspended = false;
  /** When it was last suspended (performance.now()): only a reply to a call sent later may resume it. */
  private suspendedAt = -Infinity;

  constructor(
    /** The release message of this client: its own clientId. */
    private readonly clientId: string,
    /** Wakes up to `count` of the entry's parked waiters. */
    private readonly wake: (count: number) => void,
  ) {}

  get yielding(): boolean {
    return this.yieldTimer !== undefined;
  }

  /** A number for a waiter's first park: its place in the line for the whole wait. */
  nextArrival(): number {
    return ++this.arrivals;
  }

  /**
   * Parks a candidate at its place: after every waiter that arrived before it. A waiter parked
   * again (claimed and sent back to sleep, or back from an attempt when its bound ran out) keeps
   * the place of its first park; at the back, a line longer than the bound starved the same
   * waiters for good (one client, 20 tasks of 100 ms holds on a 1 s lease: half got no hold).
   */
  park(candidate: ParkedCandidate): void {
    candidate.parked = true;
    let i = this.candidates.length;
    while (i > 0 && this.candidates[i - 1]!.arrival > candidate.arrival) i--;
    this.candidates.splice(i, 0, candidate);
  }

  /** Takes out a candidate that is still parked: a claimed one is out already, and costs no scan. */
  unpark(candidate: ParkedCandidate): void {
    if (!candidate.parked) return;
    candidate.parked = false;
    const i = this.candidates.indexOf(candidate);
    if (i >= 0) this.candidates.splice(i, 1);
  }

  /** Waiters parked as candidates now (for tests and introspection). */
  get parkedCount(): number {
    return this.candidates.length;
  }

  get hasCandidates(): boolean {
    return this.candidates.length > 0;
  }

  /** Whether a waiter for at most `permits` permits is parked (a semaphore's; any waiter for a lock). */
  hasCandidateFor(permits: number): boolean {
    return this.candidates.some((candidate) => (candidate.permits ?? 1) <= permits);
  }

  /**
   * The first parked waiter that is still waiting (and that `fits`, if given: the others keep
   * their place), taken out of its sleep.
   */
  claimFirst(fits?: (candidate: Candidate) => boolean): { candidate: Candidate; deliver: (outcome: Handover) => void } | undefined {
    for (let i = 0; i < this.candidates.length; ) {
      const candidate = this.candidates[i]!;
      if (fits && !fits(candidate)) {
        i++;
        continue;
      }
      this.candidates.splice(i, 1);
      candidate.parked = false;
      const deliver = candidate.claim();
      if (deliver) return { candidate, deliver };
    }
    return undefined;
  }

  /** Counts one more local handoff in the current run. */
  handedOver(): void {
    if (this.streak === 0) this.streakStartedAt = performance.now();
    this.streak++;
  }

  /** The run is over: MAX_LOCAL_HANDOFFS handoffs, or MAX_LOCAL_RUN_MS since its first. */
  get runIsOver(): boolean {
    return this.streak >= MAX_LOCAL_HANDOFFS || (this.streak > 0 && performance.now() - this.streakStartedAt >= MAX_LOCAL_RUN_MS);
  }

  /** No local handoff until `resume()`: the permits were cut below those held (see `suspended`). */
  suspend(): void {
    this.suspended = true;
    this.suspendedAt = performance.now();
    this.endRun();
  }

  /**
   * Redis answered a call sent at `sentAt` with permits free (none owed): handoffs may go on. A
   * call sent before the suspension may have run before the cut (its reply and the cut's message
   * come on different connections, in either order): its answer says nothing.
   */
  resume(sentAt: number): void {
    if (sentAt > this.suspendedAt) this.suspended = false;
  }

  /** The lock (or permit) went back through Redis: the next local handoff starts a new run. */
  endRun(): void {
    this.streak = 0;
  }

  /**
   * A release message arrived (`count`: the waiters it may serve); false when it must not wake
   * anyone: our own while yielding, whose wake-ups are held back until the yield ends.
   */
  heard(message: string, count = 1): boolean {
    if (message === this.clientId) {
      if (!this.yielding) return true;
      this.heldBack += count;
      return false;
    }
    // The lock went through another client (or an admin's force-unlock): our turn may come, and
    // what our own releases gave back meanwhile may still be free.
    const heldBack = this.heldBack;
    this.endRun();
    this.stopYielding();
    if (heldBack > 0) this.wake(heldBack);
    return true;
  }

  /** Called with a real release after a run of local handoffs. */
  yieldTurn(): void {
    this.endRun();
    this.stopYielding();
    this.yieldTimer = setTimeout(() => {
      this.yieldTimer = undefined;
      // Nobody else took it: our waiters try again, as many as our releases meanwhile may serve
      // (one woke when 3 permits had come back, and the others slept on with permits free).
      const heldBack = this.heldBack;
      this.heldBack = 0;
      this.wake(Math.max(1, heldBack));
    }, YIELD_MS).unref();
  }

  stopYielding(): void {
    if (this.yieldTimer !== undefined) clearTimeout(this.yieldTimer);
    this.yieldTimer = undefined;
    this.heldBack = 0;
  }
}
