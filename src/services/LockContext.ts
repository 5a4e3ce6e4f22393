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
 * whatever the call took: the caller has gone, nobody else would.
 */
export interface CommandBound {
  deadline?: number;
  signals?: readonly AbortSignal[];
  lateReply?: (reply: unknown) => void;
  /** Told when a call was cut while Redis had not answered it (either way). */
  cutShort?: () => void;
}

/**
 * The least time an unanswered call is given before its deadline or an abort may end it: a reply
 * that a loaded machine delays past a short `waitTime` is still taken, not cut off and given back.
 */
export const IN_FLIGHT_GRACE_MS = 1000;

/** A call ended at its deadline while Redis had not answered it (see `CommandBound.lateReply`). */
export class CallCutShort extends Error {
  constructor(name: string) {
    super(`${name}: Redis did not answer before the deadline`);
    this.name = 'CallCutShort';
  }
}

/** What a lock handle needs from its client. */
export interface LockContext {
  readonly clientId: string;
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  /** Opt-in WAIT for replicas after each acquire. */
  readonly syncReplicas: { replicas: number; timeout: number } | undefined;
  /** How long a fair-lock queue entry lives without its client refreshing it (option `queueTimeout`). */
  readonly queueTimeout: number;
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
export async function queuePublishing(context: Pick<LockContext, 'publishCommand' | 'isCluster'>): Promise<{ publish: PublishCommand; trust: 0 | 1 }> {
  return { publish: await context.publishCommand(), trust: context.isCluster ? 0 : 1 };
}
