import { whileRefused } from '../../core/waitLoop';
import { clientQueueExpiryKeyOf, clientQueueKeyOf, wakeChannelPrefixOf } from '../../names';
import type { ChannelEntry } from '../../services/ChannelEntry';
import { type LockContext, queuePublishing } from '../../services/LockContext';
import { WaitingClient } from '../../services/WaitingClient';

/**
 * An RLock's queue of waiting clients as one handle sees it: its Redis names, and this client's
 * place in it, kept by the client's wake channel entry.
 */
export class ClientQueue {
  constructor(
    private readonly context: LockContext,
    private readonly key: string,
  ) {}

  /**
   * The lock hash, its queue of waiting clients and their deadlines: every script's first keys.
   * Made for each call, not kept: a held lock keeps no copies of its names (scenario 6's heap per
   * held lock); the channel names below are kept once a wait or a release needs them.
   */
  get keys(): [string, string, string] {
    const { key } = this;
    const { keyPrefix } = this.context;
    return [key, clientQueueKeyOf(keyPrefix, key), clientQueueExpiryKeyOf(keyPrefix, key)];
  }

  /** Where releases wake a client's waiters: this prefix and the clientId. */
  get wakePrefix(): string {
    return (this.wakePrefixMade ??= wakeChannelPrefixOf(this.context.keyPrefix, this.key));
  }

  private wakePrefixMade: string | undefined;

  /** Where releases wake this client's waiters: one channel per client and lock. */
  get channel(): string {
    return (this.channelMade ??= this.wakePrefix + this.context.clientId);
  }

  private channelMade: string | undefined;

  /** This client's place in the queue as its channel entry keeps it now, if it has one. */
  here(): WaitingClient | undefined {
    const keeper = this.context.pubsub.peek(this.channel)?.keeper;
    return keeper instanceof WaitingClient ? keeper : undefined;
  }

  /**
   * This client's place in the lock's queue of waiting clients, kept by its channel entry (made
   * by the first waiter to need it).
   */
  waitingClient(entry: ChannelEntry): WaitingClient {
    if (entry.keeper instanceof WaitingClient) return entry.keeper;
    const { context, channel, wakePrefix } = this;
    const [key, queueKey, expiryKey] = this.keys;
    const waiting = new WaitingClient(entry, {
      heartbeat: context.heartbeat,
      entry: { lockKey: key, queueKey, expiryKey, member: context.clientId, heartbeatCommand: 'rlock_heartbeat' },
      leave: async () => {
        const { publish, trust } = await queuePublishing(context);
        // Sent again while Redis refuses it as a give-back is (see whileRefused): left in line, the
        // client was woken for nothing at the next release and the lock stayed free until its
        // entry ran out (queueTimeout). Only while no waiter of this client is on the lock again:
        // one that joined since may have put the client back in line, and a resend would take it out.
        return whileRefused(
          context,
          () => context.command('leave', (redis) => redis.rlock_leave(key, queueKey, expiryKey, context.clientId, publish, wakePrefix, trust)),
          Infinity,
          () => !context.pubsub.peek(channel)?.refCount,
        );
      },
    });
    entry.keeper = waiting;
    return waiting;
  }

  /**
   * The lock left this client (its release went to Redis, or a force took it) while the client
   * is out of line: callers that joined its waiters without asking, the lock being here, are in
   * no queue that a release could wake, and no message comes for them. One asks now (else the
   * heartbeat would, a third of queueTimeout later). The channel's entry is looked up afresh: the
   * one seen before the release's reply may have been dropped and made again meanwhile.
   */
  wakeOneJoined(): void {
    const entry = this.context.pubsub.peek(this.channel);
    if (entry && entry.refCount > 0) entry.wakeOne();
  }
}
