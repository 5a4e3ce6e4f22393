import type { ChannelEntry, EntryKeeper } from './ChannelEntry';
import type { Link } from './LinkedList';
import type { QueuedEntry, QueueHeartbeat } from './QueueHeartbeat';

/** What a WaitingClient needs of its lock: the Redis names of its queue entry and the leave script. */
export interface ClientQueueEntry {
  readonly heartbeat: QueueHeartbeat;
  readonly entry: Omit<QueuedEntry, 'refreshed'>;
  /** Takes the client out of the lock's queue (and passes a wake-up on when the lock is free). */
  leave(): Promise<unknown>;
}

/**
 * This client's place in a plain lock's queue of waiting clients (see includes/clientQueue.lua):
 * one per lock and client, kept by the lock's channel entry. It knows when the lock is with this
 * client (a waiter of it took the lock, or a release handed it from one waiter to the next), so
 * that a new caller joins the parked waiters instead of asking Redis for a lock it cannot get,
 * and it keeps the channel subscribed while the lock is here, so that the waiters' back-and-forth
 * costs no SUBSCRIBE/UNSUBSCRIBE. Its heartbeat keeps the client's queue entry alive, and tells
 * it when its turn went missing (a wake-up sent to a process that stopped; Redis lost the queue).
 */
export class WaitingClient implements EntryKeeper {
  /** One of this client's owners holds the lock, got through waiting or handed over; until a release of it goes to Redis. */
  heldHere = false;
  /** performance.now() until which the lock is known to be taken: the PTTL an attempt saw, the lease of a hold handed over. */
  busyUntil = 0;
  /** The client may be in the Redis queue (a queued attempt or release was its last word there). */
  queued = false;
  /** A wake-up came (the waking script took the client out of line) and no attempt answered it yet. */
  private turn = false;
  private beat: Link<QueuedEntry> | undefined;
  private lingering: { timer: NodeJS.Timeout; drop: () => void } | undefined;

  constructor(
    private readonly entry: ChannelEntry,
    private readonly queue: ClientQueueEntry,
  ) {}

  /**
   * How long a new caller that may wait sleeps without asking Redis: the lock is with this
   * client or its waiters are in line, so an attempt could only fail. Undefined: ask.
   */
  skipAttemptFor(): number | undefined {
    // In line: other waiters of this client joined the channel (the caller is one of the
    // joined), parked or not. Not only the parked ones: after a release that ended a run and
    // woke another client, the waiter it had claimed is on its way back to sleep, and a caller
    // that asked now would take the free lock back before the woken client could (that
    // starved whole processes at 2 tasks each: rlock.test.ts "6 processes × 2 tasks ...").
    const inLine = this.queued && this.entry.refCount > 1;
    if (!this.heldHere && !inLine && !this.entry.local?.hasCandidates) return undefined;
    const ms = this.busyUntil - performance.now();
    if (ms <= 0) return undefined;
    // The caller parks without an attempt: the heartbeat must watch for a turn that goes missing
    // (the hold here forced away or run out, the client's queue entry lost) even when no waiter
    // of this client was ever refused.
    this.beat ??= this.startBeat();
    return ms;
  }

  /** An attempt of a waiter failed; Redis put the client in line. */
  refused(ttl: number): void {
    this.queued = true;
    this.turn = false;
    if (ttl > 0) this.busyUntil = Math.max(this.busyUntil, performance.now() + ttl);
    this.beat ??= this.startBeat();
  }

  /** A waiter of this client took the lock (Redis took the client out of line), or was handed it. */
  took(lease: number, byAttempt: boolean): void {
    if (byAttempt) {
      this.queued = false;
      this.turn = false;
    }
    this.heldHere = true;
    this.busyUntil = performance.now() + lease;
  }

  /** A release of this client went to Redis; `queued`: the client is in line again. */
  released(queued: boolean): void {
    this.heldHere = false;
    this.queued = queued;
    // Put back in line by the release script: the entry there lives only as long as it is refreshed.
    if (queued) this.beat ??= this.startBeat();
    const lingering = this.lingering;
    if (lingering && this.entry.refCount === 0) {
      this.stopLingering();
      lingering.drop();
    }
  }

  lingers(drop: () => void): boolean {
    const ms = this.busyUntil - performance.now();
    if (!this.heldHere || ms <= 0) return false;
    this.stopLingering();
    // A hold that is never released (its lease ran out) lets go of the channel by then.
    this.lingering = { timer: setTimeout(() => this.entry.refCount === 0 && this.lingering?.drop(), ms).unref(), drop };
    return true;
  }

  joined(): void {
    this.stopLingering();
  }

  heard(): void {
    // Only a release or force by someone else wakes this client: the lock is not here, and the
    // client is out of line (the waking script took it out).
    this.heldHere = false;
    this.queued = false;
    this.turn = true;
  }

  /**
   * A waiter ended without the lock: if the client's turn came and no attempt answered it (the
   * woken waiter stopped first), another waiter of the client takes it. With none left,
   * `dropped` passes it on to the next client.
   */
  waiterGaveUp(): void {
    if (this.turn && this.entry.refCount > 0) {
      this.turn = false;
      this.entry.wakeOne();
    }
  }

  unheard(): void {
    // A wake-up for a client with nobody waiting any more: passed on, or the lock stays free.
    void this.queue.leave().catch(() => undefined);
  }

  dropped(): void {
    this.stopLingering();
    this.queue.heartbeat.remove(this.beat);
    this.beat = undefined;
    // A turn that came and was not answered is passed on as well.
    // Also on close(): a client closing with its turn would otherwise keep it until its entry ran
    // out, and every other client waited for its heartbeat (close() sends this before its QUIT).
    if (this.queued || this.turn) void this.queue.leave().catch(() => undefined);
    this.queued = false;
    this.turn = false;
  }

  private stopLingering(): void {
    if (this.lingering) clearTimeout(this.lingering.timer);
    this.lingering = undefined;
  }

  private startBeat(): Link<QueuedEntry> | undefined {
    return this.queue.heartbeat.add({
      ...this.queue.entry,
      refreshed: (_sentAt, inLine) => {
        // The lock is free, or another client's while this one is out of line: ask again.
        if (!inLine) this.entry.wakeOne();
      },
    });
  }
}
