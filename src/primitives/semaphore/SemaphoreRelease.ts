import { diagnostics } from '../../diagnostics';
import type { PrimitiveSteps } from '../Primitive';

/** What a semaphore's release asks of it: its channel and its own steps, bound to it. */
export interface ReleasedSemaphore extends Pick<PrimitiveSteps, 'context' | 'event'> {
  readonly channel: string;
  /** Adds permits once (see `Semaphore.add`): the free permits after, the clients the wake-up reached, 1 when replayed. */
  add(call: string, delta: number, operationId: string | undefined): Promise<[number, number, 1?]>;
}

/**
 * How a semaphore's permits are given back: handed in-process to this client's parked waiters
 * they suffice for, the rest added in Redis, and this client's turn given to the other clients'
 * waiters after a full run of handoffs.
 */
export class SemaphoreRelease {
  constructor(private readonly semaphore: ReleasedSemaphore) {}

  /** Gives back and says so on `rlock:released` (`withPermits` too: its takes are announced). */
  async giveBackTold(permits: number, operationId?: string): Promise<void> {
    await this.giveBack(permits, operationId);
    if (diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.semaphore.event(''), permits, released: true });
  }

  private async giveBack(permits: number, operationId: string | undefined): Promise<void> {
    // A release with the caller's id is not handed over in-process: no record of the id would
    // stop its retry, by this process or another, from giving the permits back again.
    const { left, yielded } = operationId === undefined ? this.handOver(permits) : this.notHandedOver(permits);
    if (left === 0) return;
    const sentAt = performance.now();
    const [free, reached, replayed] = await this.semaphore.add('release', left, operationId);
    // Below 0: permits are owed after a cut whose message this client may have missed (its
    // subscriber was reconnecting); its next releases must pay them off, not go to its waiters.
    // An answer replayed from an earlier run (a retry's) is older than this call: it may not resume.
    const entry = this.semaphore.context.pubsub.peek(this.semaphore.channel);
    if (free < 0) entry?.local?.suspend();
    else if (replayed !== 1) entry?.local?.resume(sentAt);
    if (!yielded || reached > 1) return;
    // No other client waits (the message reached ours alone, or no one): no turn to give; our
    // waiters, which the message may have found still standing back, try again now.
    entry?.local?.stopYielding();
    entry?.wake(free);
  }

  /** A release that goes back through Redis whole: the next in-process handoff starts a new run. */
  private notHandedOver(permits: number): { left: number; yielded: boolean } {
    this.semaphore.context.pubsub.peek(this.semaphore.channel)?.local?.endRun();
    return { left: permits, yielded: false };
  }

  /** Hands released permits to this client's parked waiters that they suffice for; returns the rest, and whether this client yields its turn. */
  private handOver(permits: number): { left: number; yielded: boolean } {
    const local = this.semaphore.context.pubsub.peek(this.semaphore.channel)?.local;
    if (!local) return { left: permits, yielded: false };
    let left = permits;
    const fits = (candidate: { permits?: number }): boolean => (candidate.permits ?? Infinity) <= left;
    // Permits cut below those held (a negative addPermits): they go back to Redis, which owes them.
    while (left > 0 && !local.runIsOver && !local.suspended) {
      const next = local.claimFirst(fits);
      if (!next) break;
      left -= next.candidate.permits!;
      local.handedOver();
      next.deliver({ sentAt: performance.now() });
    }
    if (left === 0) return { left, yielded: false };
    // A full run of handoffs while waiters here could use these permits: they go back to Redis
    // and this client yields its turn (its waiters and new callers stand back for a moment), so
    // that the other processes' waiters get them. Otherwise a new run may start after them.
    const yielded = local.runIsOver;
    if (yielded) local.yieldTurn();
    else local.endRun();
    return { left, yielded };
  }
}
