import { refusedUntilFailover, whileRefused } from '../../core/waitLoop';
import { diagnostics } from '../../diagnostics';
import { RedisCommandError } from '../../errors';
import { RELEASE_LATCH_TTL_MS } from '../../names';
import { permitScripts as scripts } from './permitSemaphoreScripts';
import type { PrimitiveSteps } from '../Primitive';

/** Ids of the permits being waited for that the watchdog will keep (taken without `leaseTime`): a handoff to them may be pipelined (see handOver). */
export const keptByWatchdog = new Set<string>();

/** What giving a permit back asks of its semaphore: its keys and its own steps, bound to it. */
export interface ReleasedPermits extends Pick<PrimitiveSteps, 'context' | 'key' | 'event' | 'publishCommand' | 'requestLatch'> {
  readonly permitsKey: string;
  readonly channel: string;
}

/**
 * How a permit-expirable semaphore's permits are given back: each under a latch of its own, the
 * watchdog stopped first, a permit found gone reported lost, and a permit handed in one script
 * call to a waiter of this client parked on the semaphore (pipelined when it safely can be).
 */
export class PermitRelease {
  constructor(private readonly semaphore: ReleasedPermits) {}

  /**
   * Gives back each of `ids` at once, each as `tryRelease(id)` would; whether each was held. A
   * failure (Redis's) is thrown once every release has settled, so that none is left running.
   */
  async releaseEach(ids: readonly string[]): Promise<boolean[]> {
    const results = await Promise.allSettled(ids.map((id) => this.releaseOne(id)));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    return results.map((result) => (result as PromiseFulfilledResult<boolean>).value);
  }

  /** tryRelease(id), checked. */
  async releaseOne(id: string): Promise<boolean> {
    const released = await this.releasePermit(id);
    // A permit not held is not a release: one the watchdog kept was reported lost instead (one
    // `acquired`, then one `released` or one `lost`, so that a holds gauge adds up).
    if (released && diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.semaphore.event(id), released });
    return released;
  }

  /**
   * Gives permit `id` back and says whether it was held, telling no diagnostics subscriber: what
   * `tryRelease` does, and what gives back a permit its caller never had (handed to a waiter that
   * had stopped, or taken as its signal aborted), of which no `acquired` was published either.
   */
  async releasePermit(id: string): Promise<boolean> {
    const { semaphore } = this;
    const { context } = semaphore;
    // Stop renewing first, or a renewal racing the release would report the permit lost. Until
    // `kept.lostAt` the permit is certainly still in Redis.
    const kept = context.renewal.remove(semaphore.key, id);
    // One latch per release request (see release-4.lua): a resend answers what the first run did.
    const latch = semaphore.requestLatch();
    const handed = await this.handOver(id, kept?.lostAt, latch);
    let result = handed?.result;
    if (result === undefined) {
      const publish = await semaphore.publishCommand();
      // Sent again under its latch while a slot in flux refuses it (see whileRefused).
      const [released, reached] = await whileRefused(context, () =>
        context.command('release', (redis) => scripts(redis).rlock_permitSemaphore_release(semaphore.key, semaphore.permitsKey, semaphore.channel, latch, id, publish, context.clientId, RELEASE_LATCH_TTL_MS)),
      );
      result = released;
      if (handed?.yielded && reached <= 1) {
        // No other client waits: no turn to give; our waiters, which the message may have found
        // still standing back, try again now.
        const entry = context.pubsub.peek(semaphore.channel);
        entry?.local?.stopYielding();
        entry?.wakeOne();
      }
    }
    // The latch answers a resend, so 0 means taken away before the release ran: a permit the
    // watchdog kept is reported lost, as a renewal would have. 2: released, not handed over (a
    // cut); 3: handed over beyond a cut.
    const released = result !== undefined && result !== 0;
    if (!released && kept) context.renewal.reportLost(semaphore.key, id, 'its release found it no longer held', kept);
    return released;
  }

  /**
   * A waiter of this client parked on this semaphore takes the permit over in one script call
   * (no release message, no attempt), at most MAX_LOCAL_HANDOFFS in a row and for at most
   * MAX_LOCAL_RUN_MS; then the permit goes back to Redis and this client yields its turn (see
   * Semaphore.release). Undefined result: no handoff, release as usual.
   *
   * Pipelined when the released permit is kept by the watchdog with more than half a lease
   * certainly left (`deadline`) and the waiter's will be too: the waiter holds from the send of
   * the script, without waiting for its reply. The script cannot then find the permit gone
   * unless Redis lost it; if it does, the waiter's permit is reported lost at once. Its own
   * commands go after the script on the same connection, and should the script never run (a
   * dropped connection), the released permit still fills the slot in Redis for over half a
   * lease, longer than the watchdog takes (a third of one) to find the waiter's permit missing.
   */
  private async handOver(id: string, deadline: number | undefined, latch: string): Promise<{ result?: 0 | 1 | 2 | 3; yielded: boolean } | undefined> {
    const { semaphore } = this;
    const { context } = semaphore;
    const local = context.pubsub.peek(semaphore.channel)?.local;
    if (!local?.hasCandidates) {
      local?.endRun();
      return undefined;
    }
    if (local.runIsOver) {
      local.yieldTurn();
      return { yielded: true };
    }
    const next = local.claimFirst();
    if (!next) return undefined;
    const sentAt = performance.now();
    const waiter = next.candidate.field;
    // Not after a cut of the total (a negative addPermits), which the script may answer by
    // refusing the handoff: the waiter would have started on a permit it never got.
    const pipelined = !local.suspended && deadline !== undefined && deadline - sentAt > context.watchdogTimeout / 2 && keptByWatchdog.has(waiter);
    // Told from the script's own reply, not the call's: close() settles the call at once, and a
    // waiter that close() woke must still learn that the permit went to it, to give it back.
    let sent = false;
    // Sent again under its latch while Redis refuses it as a release is (see whileRefused: before,
    // the release failed, the permit stayed held until its lease ran out, and the claimed waiter
    // tried again for nothing). A refusal is not an outcome: the waiter is told the last one.
    let refused: unknown;
    const call = whileRefused(context, () =>
      context.command('release', async (redis) => {
        sent = true;
        refused = undefined;
        let reply: 0 | 1 | 2 | 3 | undefined;
        try {
          reply = await scripts(redis).rlock_permitSemaphore_handoff(semaphore.key, semaphore.permitsKey, latch, id, waiter, next.candidate.lease, RELEASE_LATCH_TTL_MS, pipelined ? 1 : 0);
        } catch (error) {
          refused = error;
          throw error;
        } finally {
          // The waiter holds the permit from the send of this call on; otherwise it tries again.
          if (!pipelined && !refusedAsRelease(refused)) next.deliver(reply === 1 ? { sentAt } : undefined);
        }
        return reply;
      }),
    );
    // Until the script runs, only the released permit fills the slot in Redis, and only until
    // `deadline` for certain (its last renewal's): should the script never run (the link went
    // silent), the waiter must stop by then, not a full lease after the handoff.
    if (pipelined) next.deliver({ sentAt, expiresAt: deadline });
    let result: 0 | 1 | 2 | 3 | undefined;
    try {
      result = await call;
    } catch (error) {
      // Never sent (no connection, closed), or refused to the end: it tries again.
      if (!pipelined && (!sent || refusedAsRelease(refused))) next.deliver(undefined);
      throw error;
    }
    if (pipelined && result === 0) context.renewal.reportLost(semaphore.key, waiter, 'the permit handed over to it was no longer in Redis');
    if (result === 1 || result === 3) local.handedOver();
    // 2 (refused) or 3 (handed over, pipelined, beyond the total): the total was cut and this
    // client missed the cut's message (it subscribed later, or it came during a reconnect).
    if (result === 2 || result === 3) local.suspend();
    else if (result === 1) local.resume(sentAt); // the total has room for every permit held
    return { result, yielded: false };
  }
}

/** Whether ioredis's `error` for a handoff is a refusal that `whileRefused` sends it again after (what it says of the call's RedisCommandError). */
function refusedAsRelease(error: unknown): boolean {
  return error !== undefined && refusedUntilFailover(new RedisCommandError('release', error));
}
