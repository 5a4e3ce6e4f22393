// The read-write lock in the soak: RLock's adapter on a read or a write handle (a third of the
// rounds write), and the invariant "no writer beside anyone": two holds conflict when either
// writes. A write hold re-enters with a read or a write (the downgrade path), a read with a read
// (an upgrade is refused by design).
import type { LockClient } from '../../../src';
import { rwReadChannelOf } from '../../../src/names';
import type { Invariant } from '../checker';
import { oneChannel } from './channels';
import type { Hold } from '../records';
import { FAULT_KINDS } from '../records';
import { lockAdapter, pick } from './rlock';

const writes = (hold: Hold): boolean => hold.field.endsWith(':write');

export const readWriteLock = {
  adapter: lockAdapter((client, name) => {
    const rw = (): ReturnType<LockClient['getReadWriteLock']> => client.getReadWriteLock(name);
    if (Math.random() < 1 / 3) {
      return { handle: rw().writeLock(), inner: () => pick([rw().readLock(), rw().writeLock()]), suffix: ':write' };
    }
    return { handle: rw().readLock(), inner: () => rw().readLock(), writes: false };
  }),
  invariant: { conflicts: (a, b) => writes(a) || writes(b), fifo: false, counters: true } satisfies Invariant,
  faults: FAULT_KINDS,
  // Deletes the whole lock, readers and writer alike; names every holder field it removed.
  getLock: (client: LockClient, name: string) => client.getReadWriteLock(name).writeLock(),
  // Readers wait on this channel; the "no subscription left" check looks at it.
  channels: oneChannel(rwReadChannelOf),
};
