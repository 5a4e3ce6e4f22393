import { LinkedList } from './LinkedList';

/**
 * The wake-ups of one channel's waiters: each release message is one wake-up, and it goes to the
 * waiter parked longest. A wake-up that comes while nobody is parked is stored for the next to
 * park (ChannelEntry decides how many may be stored).
 *
 * A waiter that stops waiting for another reason (a local handoff claimed it, its sleep ran out,
 * its signal aborted) leaves the queue at once. async-mutex's Semaphore served here before, but
 * it cannot take one waiter out of its queue: every wait that ended without a message left its
 * acquire queued, holding the wait's closures (and through them its lock handle and owner), until
 * the next message. A client whose waiters took turns by local handoff hears no message at all,
 * so it grew by ~3.7 KiB per acquisition for as long as the lock stayed contended
 * (`rlock.test.ts` "waits that end without a wake-up leave nothing parked"; `leaks.test.ts`).
 */
export class WakeQueue {
  /** Wake-ups that came while nobody was parked. */
  private stored = 0;
  /** Parked waiters, in the order they parked (a list, not a Set: see LinkedList). */
  private readonly parked = new LinkedList<() => void>();

  /** Wake-ups stored for waiters to come. */
  get value(): number {
    return this.stored;
  }

  /** Waiters parked now (tests and introspection). */
  get size(): number {
    return this.parked.size;
  }

  /** `count` wake-ups: to the waiters parked longest, the rest stored. */
  release(count = 1): void {
    for (let left = count; left > 0; left--) {
      const first = this.parked.shift();
      if (!first) {
        this.stored += left;
        return;
      }
      first();
    }
  }

  /**
   * Parks `wake` (a function of its own: the queue tells waiters apart by it) until a wake-up,
   * which calls it; at once when one is stored. Returns how to leave without one.
   */
  park(wake: () => void): () => void {
    if (this.stored > 0) {
      this.stored--;
      wake();
      return () => undefined;
    }
    const link = this.parked.push(wake);
    return () => void this.parked.remove(link);
  }

  /** The channel is dropped: every parked waiter is woken (to ask Redis again) and the queue emptied. */
  cancel(): void {
    for (const wake of this.parked.drain()) wake();
  }
}
