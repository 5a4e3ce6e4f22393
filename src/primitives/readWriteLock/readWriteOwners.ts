import { LockOwner } from '../../services/LockOwner';

/** The two kinds of hold of a read-write lock. */
export type ReadWriteMode = 'read' | 'write';

const pairs = new WeakMap<LockOwner, Record<ReadWriteMode, LockOwner>>();

/**
 * The owner that books `owner`'s holds of one kind. An owner (a scope's, or the one the two
 * handles of a `ReadWriteLock` share) counts its reads and its writes apart, under its own id:
 * one kind released to zero must not stop the watchdog or clear the count of the other (a
 * downgrade keeps its reads, Redisson #4217). Given a facet, answers its sibling of `mode`.
 */
export function facetOf(owner: LockOwner, mode: ReadWriteMode): LockOwner {
  let pair = pairs.get(owner);
  if (!pair) {
    pair = { read: new LockOwner(owner.id), write: new LockOwner(owner.id) };
    pairs.set(owner, pair);
    pairs.set(pair.read, pair);
    pairs.set(pair.write, pair);
  }
  return pair[mode];
}
