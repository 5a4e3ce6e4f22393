export { LockClient } from './LockClient';
export type { LockClientEvents, LockLostEvent } from './clientEvents';
export { RLock } from './primitives/lock/RLock';
export { FairLock } from './primitives/FairLock';
export { Semaphore } from './primitives/semaphore/Semaphore';
export { PermitExpirableSemaphore } from './primitives/permitSemaphore/PermitExpirableSemaphore';
export { CountDownLatch } from './primitives/CountDownLatch';
export { MAX_PERMITS } from './primitives/permitOptions';
export type { AwaitOptions, CountDownOptions, ExpirablePermitOptions, OperationOptions, PermitOptions, ReleaseOptions, TryExpirablePermitOptions, TryPermitOptions } from './primitives/permitOptions';
export { FencedLock } from './primitives/FencedLock';
export { MultiLock } from './primitives/composite/MultiLock';
export { RedLock, type RedLockOptions } from './primitives/composite/RedLock';
export type { CompositeLock, CompositeLockEvents } from './primitives/composite/CompositeLock';
export type { LockHandle } from './core/LockHandle';
export type { ForceUnlockResult } from './core/ExclusiveLock';
export { ReadWriteLock } from './primitives/readWriteLock/ReadWriteLock';
export { ReadLock } from './primitives/readWriteLock/ReadLock';
export { WriteLock } from './primitives/readWriteLock/WriteLock';
export {
  ClientClosedError,
  CompositeUnlockError,
  InvalidArgumentError,
  LatchDeletedError,
  LockError,
  LockLostError,
  LockTimeoutError,
  LockUsageError,
  NotLockOwnerError,
  PermitNotHeldError,
  QuorumUnavailableError,
  RedisCommandError,
  RedisUnreachableError,
  WrongKindError,
} from './errors';
export type { MemberFailure } from './errors';
export { DEFAULT_OFFLINE_TIMEOUT_MS, MAX_NAME_BYTES, MAX_TIME_MS, MIN_QUEUE_TIMEOUT_MS, MIN_WATCHDOG_TIMEOUT_MS } from './options';
export type { LockClientOptions, LockOptions, TryLockOptions, WithLockOptions } from './options';
export { diagnostics, type DiagnosticsChannelName } from './diagnostics';
export type { LatchInfo, LatchState, LockHolder, LockInfo, PermitSemaphoreInfo, QueuedWaiter, SemaphoreInfo } from './introspection';
export type { HeldLock } from './core/HeldLock';
export type { ClusterConnectionOptions, ListLocksOptions } from './options';
