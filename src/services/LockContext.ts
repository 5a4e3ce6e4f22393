import type { ExpirationRenewal } from './ExpirationRenewal';
import type { LockPubSub } from './LockPubSub';
import type { QueueHeartbeat } from './QueueHeartbeat';
import type { PublishCommand, ScriptedRedis } from './scripts';

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
  command<T>(name: string, call: (redis: ScriptedRedis) => Promise<T>): Promise<T>;
  /** `spublish` (sharded, Cluster on Redis >= 7) or `publish`: what the release scripts publish with. */
  publishCommand(): Promise<PublishCommand>;
  /** Goes up each time the command connection drops; a call that spans a change may have been resent. */
  connectionEpoch(): number;
  /** Aborts (with `ClientClosedError`) when the client closes: every parked waiter listens to it. */
  readonly closedSignal: AbortSignal;
  /** Counts a parked waiter for `stats`; returns the undo. */
  trackWaiter(): () => void;
}
