// The primitives the soak knows: each brings a worker adapter and the invariant to check.
// A new one (semaphore, read-write lock, fenced lock, latch) adds a file here; the harness,
// the faults and the exclusion checker stay as they are.
import type { Invariant } from '../checker';
import type { LockClient } from '../../../src';
import { fairLock } from './fairLock';
import { rlock, type LockLike, type PrimitiveAdapter } from './rlock';

export interface Primitive {
  adapter: PrimitiveAdapter;
  invariant: Invariant;
  /** A handle the force-unlocking operator uses. */
  getLock(client: LockClient, name: string): Pick<LockLike, 'forceUnlock'>;
}

export const PRIMITIVES: Record<string, Primitive> = { rlock, fairLock };
