// The primitives the soak knows: each brings a worker adapter, the invariant to check and the
// faults that apply to it. A new one adds a file here; the harness and the faults stay as they are.
import type { Invariant } from '../checker';
import type { Redis } from 'ioredis';
import type { LockClient } from '../../../src';
import type { SoakOptions } from '../records';
import type { FaultKind } from '../records';
import { countDownLatch } from './countDownLatch';
import { fencedLock } from './fencedLock';
import { multiLock } from './multiLock';
import { permitSemaphore } from './permitSemaphore';
import { readWriteLock } from './readWriteLock';
import { semaphore } from './semaphore';
import { fairLock } from './fairLock';
import { rlock, type LockLike, type PrimitiveAdapter } from './rlock';

export interface Primitive {
  adapter: PrimitiveAdapter;
  invariant: Invariant;
  /** The faults that apply to it (`--faults all`); a primitive without a force-unlock takes no `force`. */
  faults: readonly FaultKind[];
  /** A handle the force-unlocking operator uses (when `faults` has `force`). */
  getLock?(client: LockClient, name: string): Pick<LockLike, 'forceUnlock'>;
  /**
   * The channels its waiters listen on, as a PUBSUB CHANNELS pattern, for the "no subscription
   * left" check (default: RLock's, one per client under its wake channel prefix).
   */
  channels?(keyPrefix: string, key: string): string;
  /** false: its keys outlive the run (a semaphore's count), so "no key left" is not checked. */
  keysGone?: boolean;
  /** Its own checks on Redis once the run is over (a semaphore's permits all back). */
  checkRedis?(admin: Redis, keyPrefix: string, locks: string[], options: SoakOptions): Promise<string[]>;
}

export const PRIMITIVES: Record<string, Primitive> = { rlock, fairLock, readWriteLock, fencedLock, semaphore, permitSemaphore, countDownLatch, multiLock };

