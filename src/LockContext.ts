import type { Cluster, Redis } from 'ioredis';
import type { ExpirationRenewal } from './ExpirationRenewal';
import type { LockPubSub } from './LockPubSub';
import type { PublishCommand } from './scripts';

/** What a lock handle needs from its client. */
export interface LockContext {
  readonly clientId: string;
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  /** Opt-in WAIT for replicas after each acquire. */
  readonly syncReplicas: { replicas: number; timeout: number } | undefined;
  readonly redis: Redis | Cluster;
  readonly pubsub: LockPubSub;
  readonly renewal: ExpirationRenewal;
  /** Throws `ClientClosedError` once `close()` was called. */
  assertOpen(): void;
  /** Runs one Redis call; its failure becomes a `RedisCommandError`, or `ClientClosedError` after close. */
  command<T>(name: string, call: (redis: Redis | Cluster) => Promise<T>): Promise<T>;
  /** `spublish` (sharded, Cluster on Redis >= 7) or `publish`: what the release scripts publish with. */
  publishCommand(): Promise<PublishCommand>;
  /** Goes up each time the command connection drops; a call that spans a change may have been resent. */
  connectionEpoch(): number;
  /** Aborts (with `ClientClosedError`) when the client closes: every parked waiter listens to it. */
  readonly closedSignal: AbortSignal;
  /** Counts a parked waiter for `stats`; returns the undo. */
  trackWaiter(): () => void;
}
