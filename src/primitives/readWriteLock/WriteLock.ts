import { leaveWhileRefused } from '../../core/waitLoop';
import type { Hold } from '../../services/Hold';
import { LockUsageError } from '../../errors';
import { rwLeasesKeyOf, rwReadChannelOf, rwTurnKeyOf, rwWriteChannelOf, rwWritersKeyOf, WAKE_ALL_MESSAGE } from '../../names';
import type { CommandBound, LockContext } from '../../services/LockContext';
import type { LockOwner } from '../../services/LockOwner';
import type { Link } from '../../services/LinkedList';
import type { QueuedEntry } from '../../services/QueueHeartbeat';
import { ReadWriteHandle, type ReadWriteFamily } from './ReadWriteHandle';
import { facetOf } from './readWriteOwners';
import { READ_WRITE_HEARTBEAT, readWriteScripts } from './readWriteScripts';

/**
 * The write half of a `ReadWriteLock`: one owner, no readers but its own. A waiting writer keeps
 * new readers out (its entry among the waiting writers, kept alive by the client's heartbeat
 * while it waits), so a stream of readers cannot starve it.
 */
export class WriteLock extends ReadWriteHandle {
  readonly mode = 'write';

  /** @internal Use `client.getReadWriteLock(name).writeLock()`. */
  constructor(context: LockContext, name: unknown, family: ReadWriteFamily) {
    super(context, name, family);
  }

  /** The write holds of an owner have a field of their own beside its reads. */
  protected override field(owner: LockOwner): string {
    return `${super.field(owner)}:write`;
  }

  protected async acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
    // It would wait for its own reads to end, forever (Redisson #4796): refused before anything is sent.
    if (owner.holds === 0 && facetOf(owner, 'read').holds > 0) throw this.upgradeRefused();
    const { key, context } = this;
    const lease = leaseTime ?? context.watchdogTimeout;
    const field = this.field(owner);
    const channel = rwWriteChannelOf(this.context.keyPrefix, key);
    // The entry that keeps new readers out, kept alive by the client's heartbeat while this writer waits.
    let beat: Link<QueuedEntry> | undefined;
    const leave = async (): Promise<void> => {
      // No await when known: queued in the order asked (see RLock's releaseCall).
      const publish = context.knownPublishCommand() ?? (await context.publishCommand());
      const clientInLine = await leaveWhileRefused(this.context, owner, (redis) => readWriteScripts(redis).rlock_readWriteLock_leave(key, rwLeasesKeyOf(this.context.keyPrefix, key), rwWritersKeyOf(this.context.keyPrefix, key), rwReadChannelOf(this.context.keyPrefix, key), field, publish, WAKE_ALL_MESSAGE));
      // This may have been the writer a release woke for its client: the others parked here may
      // have had their entries cleared by it, and without a wake-up would sleep out their bound
      // while new readers keep the lock held (see leave-4.lua).
      if (clientInLine === 0) context.pubsub.peek(channel)?.wakeOne();
    };
    const attempt = async (listening: boolean, bound: CommandBound): Promise<number | null> => {
      const reply = await context.command(
        'acquire',
        (redis) =>
          readWriteScripts(redis).rlock_readWriteLock_acquireWrite(key, rwLeasesKeyOf(this.context.keyPrefix, key), rwWritersKeyOf(this.context.keyPrefix, key), rwTurnKeyOf(this.context.keyPrefix, key), lease, field, listening ? 1 : 0, context.queueTimeout, owner.holds > 0 ? 1 : 0),
        // A refusal answered after the wait ended may have queued the writer, which keeps new
        // readers out: it leaves (or its entry would, after queueTimeout).
        { ...bound, lateReply: (late) => this.lateAttempt(owner, late, listening ? leave : undefined) },
      );
      if (reply === 'reading') {
        // Its own read holds the lock and its write does not: its write lease ran out under its
        // reads (a leaseTime; a watchdog kept it, but a stalled process let it go). The count
        // here still said it held the write, so the check above let it through; Redis tells.
        if (owner.holds > 0) this.releases.holdsLost(owner, 'its write lease ran out while its reads went on');
        throw this.upgradeRefused();
      }
      // A re-entry whose hold was taken away (forced, expired, a restart): its scope is told now,
      // as RLock's is, whether the lock was free (taken afresh) or another owner's.
      if (reply === 'afresh') this.releases.reentryFoundHoldGone(owner, 'free');
      else if (typeof reply === 'number') this.releases.reentryFoundHoldGone(owner, 'taken');
      const ttl = reply === 'afresh' ? null : reply;
      if (ttl !== null && listening && !beat) {
        beat = context.heartbeat.add({
          lockKey: key,
          queueKey: rwWritersKeyOf(this.context.keyPrefix, key),
          expiryKey: rwLeasesKeyOf(this.context.keyPrefix, key),
          member: field,
          heartbeatCommand: READ_WRITE_HEARTBEAT,
          // Free, yet no message came (lost, or the holds ran out): a writer of this client tries now.
          refreshed: (_sentAt, held) => {
            if (!held) context.pubsub.peek(channel)?.wakeOne();
          },
        });
      }
      return ttl;
    };
    const giveUp = async (): Promise<void> => {
      if (!beat) return;
      await leave().catch(() => undefined); // the entry then runs out after the queue timeout
    };
    try {
      return await this.waitOn(owner, channel, attempt, waitTime, signal, giveUp, attemptDeadline);
    } finally {
      context.heartbeat.remove(beat);
    }
  }

  private upgradeRefused(): LockUsageError {
    return new LockUsageError(
      `an owner holding the read lock of "${this.name}" asked for its write lock, which would wait for its own reads forever; ` +
        'release the reads first (taking the read lock while holding the write lock is fine)',
    );
  }
}
