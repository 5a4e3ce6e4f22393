import { PERMITS_CUT_MESSAGE } from '../names';
import { boundedWait, TRANSIENT_RETRY_MS } from './bounds';
import { ChannelGrants } from './ChannelGrants';
import { LinkedList } from './LinkedList';
import { LocalHandoff } from './LocalHandoff';
import { WakeQueue } from './WakeQueue';

/**
 * A counted message, published by the semaphore and latch scripts: `wake:<count>` or `wake:all`,
 * optionally followed by `:<releaser>` (the releasing client's id, possibly empty) and then by
 * `:<field>` (a grant for the waiter that expects that field).
 */
const COUNTED_MESSAGE = /^wake:(\d+|all)(?::([\w-]*))?(?::(.+))?$/s;

/**
 * Keeps a channel entry past its last waiter, for a primitive whose state outlives its waiters
 * (RLock's WaitingClient: the lock is with this client, its waiters come back soon).
 */
export interface EntryKeeper {
  /** The last waiter left: true keeps the entry subscribed; the keeper calls `drop` itself later. */
  lingers(drop: () => void): boolean;
  /** A waiter joined the entry again. */
  joined(): void;
  /** A message came (before it wakes anyone). */
  heard(): void;
  /** A message came while no waiter is there. */
  unheard(): void;
  /** The entry is gone (unsubscribed); `closing`: the client is closing. */
  dropped(closing: boolean): void;
}

/** How much sooner a fresher answer's bound must end than the last one's to re-arm the sleepers under it. */
const SHORTENED_MS = 50;

/**
 * A waiter's wake-up it has not acted on yet: set when a message woke it, cleared when Redis
 * answers its next attempt. A release's message wakes one waiter per client (or as many as it
 * freed); a waiter that stops in between (an abort while the connection is down, so its attempt
 * was never sent) passes the wake-up on to another waiter of its client (waitFor), or that one
 * would sleep beside a free lock or permit until its own bound.
 */
export interface WakeDebt {
  owed: boolean;
}

/**
 * The waiters of one channel. Each release message is one wake-up (`wakeups`), so it wakes one
 * parked waiter. A message that comes while no waiter is parked leaves one wake-up (never more)
 * for the next to park, which then retries at once instead of sleeping through a free lock;
 * more stored wake-ups would send every waiter back to Redis in a burst that only one of them
 * can win.
 */
export class ChannelEntry {
  refCount = 0;
  /** On a Cluster: the node(s) serving the channel's slot when last looked, to notice it moving. */
  slotOwner: string | undefined;
  readonly wakeups = new WakeQueue();
  /** Settles true once SUBSCRIBE is confirmed, false when it failed (waiters then fall back to pttl sleeps). */
  subscribed: Promise<boolean> = Promise.resolve(false);
  /** True once SUBSCRIBE is confirmed: from then on every release of the lock reaches this entry. */
  confirmed = false;
  /** SUBSCRIBE failed; retried on the next reconnect or slot refresh. */
  failed = false;
  /** When the last SUBSCRIBE was sent (performance.now()). */
  subscribeSentAt = 0;
  /** Told when a SUBSCRIBE of this entry is answered (confirmed or failed). */
  readonly onSubscribeSettled = new LinkedList<() => void>();
  /** Targeted wake-ups (a fair lock's grants), for the waiters that registered for one. */
  readonly grants = new ChannelGrants();
  /** RLock's handoffs between waiters of this client, made by the first RLock waiter to need it. */
  local: LocalHandoff | undefined;
  /**
   * When the bound that the latest refused attempt through this entry answered runs out
   * (performance.now(); Infinity: it answered none, a message must come); undefined: none yet.
   */
  private refusedUntil: number | undefined;
  /**
   * The permits the attempt behind `refusedUntil` asked for: its answer covers requests for as
   * many or more, not fewer (a 3-permit request refused says nothing of 1 permit).
   */
  private refusedPermits = 1;
  /** Parked waiters sleeping under `refusedUntil`, told when it shortens. */
  private readonly boundListeners = new Set<() => void>();
  /** Set by a primitive whose entry may outlive its waiters. */
  keeper: EntryKeeper | undefined;

  /** The entry's LocalHandoff, made on first need. */
  localHandoff(clientId: string): LocalHandoff {
    return (this.local ??= new LocalHandoff(clientId, (count) => this.wake(count)));
  }

  /**
   * A message arrived on the channel. A counted message (`COUNTED_MESSAGE`) wakes that many
   * waiters (a semaphore's release of k permits) and may also grant one named waiter; a message
   * naming an expected field is that waiter's grant; any other wakes one waiter.
   */
  deliver(message: string): void {
    this.keeper?.heard();
    if (this.refCount === 0 && this.keeper) {
      this.keeper.unheard();
      return;
    }
    if (message === PERMITS_CUT_MESSAGE) {
      this.local?.suspend();
      return;
    }
    const counted = COUNTED_MESSAGE.exec(message);
    if (counted) {
      if (counted[3] !== undefined) this.grants.grant(counted[3]);
      // A release of this client while it yields its turn wakes none of its waiters; another
      // client's release ends the yield (LocalHandoff.heard), and so does a message no client
      // released (a reservation left, a new total): the waiters it wakes would otherwise stand
      // back for the yield, and its end wakes only as many as this client's own releases.
      if (counted[2] !== undefined && this.local && !this.local.heard(counted[2], counted[1] === 'all' ? Infinity : Number(counted[1]))) return;
      if (counted[1] === 'all') this.wakeAll();
      else this.wake(Number(counted[1]));
      return;
    }
    if (this.local && !this.local.heard(message)) return;
    if (!this.grants.grant(message)) this.wakeOne();
  }

  /**
   * Wakes up to `count` parked waiters: as many as could now succeed, not one and not all.
   * Wake-ups for waiters not parked yet are kept, but never more than there are waiters.
   */
  wake(count: number): void {
    const missing = Math.min(count, this.refCount) - this.wakeups.value;
    if (missing > 0) this.wakeups.release(missing);
  }

  /** Wakes one parked waiter, or stores one permit when none is parked and none is stored. */
  wakeOne(): void {
    if (this.wakeups.value < 1) this.wakeups.release();
  }

  /** Every waiter tries again (a reconnect or a moved slot may have lost messages). */
  wakeAll(): void {
    const missing = this.refCount - this.wakeups.value;
    if (missing > 0) this.wakeups.release(missing);
    this.grants.wakeAll();
  }

  /**
   * An attempt through this entry was refused with `ttl` (ms; negative: no bound), for want of
   * `permits` (a semaphore's; 1 when any request would have been refused, as behind a lock).
   */
  refused(ttl: number, permits = 1): void {
    const until = ttl < 0 ? Infinity : performance.now() + ttl;
    this.refusedPermits = permits;
    // Waiters sleeping under the longer bound (see `coveredBySiblings`) sleep to the new one; not
    // for every few ms a reservation's PTTL went down since the last answer (each re-parks them).
    const shortened = this.refusedUntil !== undefined && until < this.refusedUntil - SHORTENED_MS;
    this.refusedUntil = until;
    if (shortened) for (const listener of [...this.boundListeners]) listener();
  }

  /**
   * An attempt through this entry goes out now (a semaphore's): until its answer says the real
   * bound (`refused`, also for a success), the waiters parked here whose own bound runs out sleep
   * on for `ms` instead of asking too (see `coveredBySiblings`), so a client asks once per bound,
   * not once per parked waiter.
   */
  asking(ms: number, permits = 1): void {
    this.refusedUntil = performance.now() + ms;
    this.refusedPermits = permits;
  }

  /**
   * An attempt that marked the entry (`asking`) failed or was cut short, with no answer: the
   * waiters it covered ask in its stead after a transient refusal's pause (the asker itself, if
   * it waits on, asks again then too).
   */
  askFailed(): void {
    this.refused(TRANSIENT_RETRY_MS);
  }

  /** Calls `listener` whenever the bound shortens (a fresher answer); returns the undo. */
  onBoundShortened(listener: () => void): () => void {
    this.boundListeners.add(listener);
    return () => this.boundListeners.delete(listener);
  }

  /**
   * The sleep bound of a waiter that joins this client's parked waiters without asking Redis (a
   * semaphore's): what is left of the latest refusal's (-1: none). Undefined when no refusal is
   * known or its bound ran out: the waiter must ask. Without it such a waiter slept with no bound
   * while a permit that came back by a lease's or a reservation's end (no message) sat free.
   * Undefined too for a request of fewer `permits` than the refused one: it may be served now.
   */
  joinBound(permits = 1): number | undefined {
    if (permits < this.refusedPermits) return undefined;
    if (this.refusedUntil === Infinity) return -1;
    const left = this.refusedUntil === undefined ? 0 : this.refusedUntil - performance.now();
    return left > 0 ? left : undefined;
  }

  /** Resolves once subscribed or after `ms`, whichever is first; rejects with the reason of the first of `stops` to abort. */
  untilSubscribed(ms: number, stops: AbortSignal[]): Promise<void> {
    return boundedWait(ms, stops, (done) => {
      // The latest SUBSCRIBE's outcome: one may be sent again while waiters wait (see followSlots).
      const settled = (): void => done();
      const link = this.onSubscribeSettled.push(settled);
      void this.subscribed.then(settled);
      return () => void this.onSubscribeSettled.remove(link);
    });
  }

  /**
   * Resolves on a release message (consuming its permit) or after `ms`; rejects like
   * `untilSubscribed` on abort. `parked`, when given, is told how to end the wait early (a
   * local handoff claims the waiter) and, through the function it returns, when the wait ended.
   * A wake-up sets `debt.owed`: the waiter owes an attempt for it (see `WakeDebt`).
   */
  untilReleased(ms: number, stops: AbortSignal[], parked?: (interrupt: () => void) => () => void, debt?: WakeDebt): Promise<void> {
    return boundedWait(ms, stops, (done) => {
      // A wait that ends otherwise leaves the queue, so a later wake-up goes to a waiter still there.
      const leave = this.wakeups.park(() => {
        if (debt) debt.owed = true;
        done();
      });
      const ended = parked?.(() => done());
      return () => {
        leave();
        ended?.();
      };
    });
  }
}
