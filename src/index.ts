export { LockClient, type LockClientEvents, type LockLostEvent } from './LockClient';
export { RLock } from './primitives/RLock';
export { FairLock } from './primitives/FairLock';
export {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockLostError,
  LockTimeoutError,
  LockUsageError,
  NotLockOwnerError,
  RedisCommandError,
} from './errors';
export { MAX_NAME_BYTES, MAX_TIME_MS, MIN_QUEUE_TIMEOUT_MS, MIN_WATCHDOG_TIMEOUT_MS } from './options';
export type { LockClientOptions, LockOptions, TryLockOptions, WithLockOptions } from './options';
export { diagnostics, type DiagnosticsChannelName } from './diagnostics';
export type { LockHolder, LockInfo, QueuedWaiter } from './introspection';
export type { ClusterConnectionOptions, ListLocksOptions } from './options';
