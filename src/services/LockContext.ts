import type { ExpirationRenewal } from './ExpirationRenewal';
import type { LockPubSub } from './LockPubSub';
import type { QueueHeartbeat } from './QueueHeartbeat';
import type { PublishCommand, ScriptedRedis } from './scripts';

/**
 * How long a call may wait for a connection that is down: until `deadline` (performance.now() ms)
 * or a signal aborts. With `lateReply`, the same bounds also end a call that Redis has not
 * answered (frozen, or a connection that went silent), each no sooner than `IN_FLIGHT_GRACE_MS`
 * after the call was sent or the signal aborted. The call then rejects (`CallCutShort`, or the
 * signal's reason) and its reply, if it still comes, goes to `lateReply`, which gives back
 * whatever the call took: the caller has gone, nobody else would. A command that fails instead
 * without Redis's answer (its connection dropped) may have run: `lateReply` gets
 * `OUTCOME_UNKNOWN`, and gives back what it may have taken only where nothing of the caller's
 * own can come between (a composite member's single-use owner, a permit id of its own). A give-back it starts is
 * returned, not awaited: nobody is left to tell of its failure (the lease or the queue timeout
 * then clears what it would have), so the client swallows that.
 */
export interface CommandBound {
  deadline?: number;
  signals?: readonly AbortSignal[];
  lateReply?: (reply: unknown) => Promise<unknown> | void;
  /** Told when a call was cut while Redis had not answered it (either way). */
  cutShort?: () => void;
  /**
   * The call may run late, or twice, and still do what it did once (a release under its latch, a
   * read): when its connection drops before the reply, its caller is told (`RedisUnreachableError`,
   * outcome unknown) `offlineTimeout` after the drop instead of waiting for ioredis, which keeps
   * it to resend. Not for a call a retry would repeat (a semaphore's release: permits twice).
   */
  idempotent?: boolean;
}

/** The bound of a call that is safe to abandon while ioredis may still resend it (see `CommandBound.idempotent`). */
export const IDEMPOTENT: CommandBound = { idempotent: true };

/** What a lock handle needs from its client. */
export interface LockContext {
  readonly clientId: string;
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  /** Opt-in WAIT for replicas after each acquire. */
  readonly syncReplicas: { replicas: number; timeout: number } | undefined;
  /** How long a fair-lock queue entry lives without its client refreshing it (option `queueTimeout`). */
  readonly queueTimeout: number;
  /** How long a call waits out Redis being away (option `offlineTimeout`); also how long a give-back rides out a transient refusal. */
  readonly offlineTimeout: number;
  readonly redis: ScriptedRedis;
  /** On a Cluster with classic pub/sub, PUBLISH counts one node's subscribers only. */
  readonly isCluster: boolean;
  readonly pubsub: LockPubSub;
  readonly renewal: ExpirationRenewal;
  readonly heartbeat: QueueHeartbeat;
  /** Throws `ClientClosedError` once `close()` was called. */
  assertOpen(): void;
  /** Runs one Redis call; its failure becomes a `RedisCommandError`, or `ClientClosedError` after close. */
  command<T>(name: string, call: (redis: ScriptedRedis) => Promise<T>, bound?: CommandBound): Promise<T>;
  /** `spublish` (sharded, Cluster on Redis >= 7) or `publish`: what the release scripts publish with. */
  publishCommand(): Promise<PublishCommand>;
  /** The same, once known (at once off a Cluster): callers on the hot path need not wait a turn. */
  knownPublishCommand(): PublishCommand | undefined;
  /**
   * Redis's time `ms` from now (ms since the epoch) on the server that holds `key`, 0 when not
   * known yet: the deadline a counting call carries so that a resend later than its latch lasts
   * is refused (see RedisClock).
   */
  redisTimeAfter(ms: number, key: string): number;
  /** A call sent once was refused as late: the estimate of `key`'s server's clock is dropped and measured again (settles when measured, at most ~1 s). */
  remeasureRedisClock(key: string): Promise<void>;
  /** Goes up each time the command connection drops; a call that spans a change may have been resent. */
  connectionEpoch(): number;
  /** Aborts (with `ClientClosedError`) when the client closes: every parked waiter listens to it. */
  readonly closedSignal: AbortSignal;
  /** Counts a parked waiter for `stats`; returns the undo. */
  trackWaiter(): () => void;
}

/**
 * How a queue's scripts publish wake-ups and grants (the fair lock's, RLock's queue of waiting
 * clients), and whether PUBLISH's receiver count tells a client that is gone: on a Cluster it
 * counts the subscribers of one node only, so there a gone client is only found when its queue
 * entry runs out.
 */
export function queuePublishing(context: Pick<LockContext, 'publishCommand' | 'knownPublishCommand' | 'isCluster'>): QueuePublishing | Promise<QueuePublishing> {
  const known = context.knownPublishCommand();
  // Known (always, off a Cluster): answered without a promise, as every release asks.
  if (known) return publishingOf(known, context.isCluster);
  return context.publishCommand().then((publish) => publishingOf(publish, context.isCluster));
}

export interface QueuePublishing {
  readonly publish: PublishCommand;
  readonly trust: 0 | 1;
}

const PUBLISHINGS: Record<PublishCommand, readonly [QueuePublishing, QueuePublishing]> = {
  publish: [{ publish: 'publish', trust: 0 }, { publish: 'publish', trust: 1 }],
  spublish: [{ publish: 'spublish', trust: 0 }, { publish: 'spublish', trust: 1 }],
};

function publishingOf(publish: PublishCommand, isCluster: boolean): QueuePublishing {
  return PUBLISHINGS[publish][isCluster ? 0 : 1];
}
