// The primitives the soak knows: each brings a worker adapter and the invariant to check.
// A new one (semaphore, read-write lock, fenced lock, latch) adds a file here; the harness,
// the faults and the exclusion checker stay as they are.
import type { Invariant } from '../checker';
import { rlock, type PrimitiveAdapter } from './rlock';

export interface Primitive {
  adapter: PrimitiveAdapter;
  invariant: Invariant;
}

export const PRIMITIVES: Record<string, Primitive> = { rlock };
