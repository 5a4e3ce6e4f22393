// MultiLock in the soak: RLock's adapter on a MultiLock over the round's lock and two more plain
// locks of the same client and slot (`{<lock>}:b`, `{<lock>}:c`), which a round takes in one
// all-or-nothing script call (lock/acquireAll.lua); a round that waits takes the member that
// refused alone first. The checker judges the round's lock (the first member): one holder at a
// time. A composite takes and gives back members while it acquires, so its hold is recorded when
// the whole is held (not at a member's `rlock:acquired`), and its loss by its `lost` event.
import { nanoid } from 'nanoid';
import { MultiLock, type LockClient } from '../../../src';
import type { Recorder } from '../recorder';
import { FAULT_KINDS } from '../records';
import { exclusive, lockAdapter, type LockLike } from './rlock';

function composite(client: LockClient, name: string, recorder: Recorder): LockLike {
  const multi = new MultiLock([client.getLock(name), client.getLock(`{${name}}:b`), client.getLock(`{${name}}:c`)]);
  let field: string | undefined;
  const held = (): void => {
    field = `${client.id}:${nanoid()}`;
    recorder.granted(field, name);
  };
  multi.on('lost', () => {
    if (field !== undefined) recorder.lost(field);
  });
  const lock: Pick<LockLike, 'lock' | 'tryLock' | 'unlock' | 'withLock'> = {
    lock: async (options) => {
      await multi.lock(options);
      held();
    },
    tryLock: async (options) => {
      const got = await multi.tryLock(options);
      if (got) held();
      return got;
    },
    unlock: () => multi.unlock(),
    withLock: (fn, options) =>
      multi.withLock((signal) => {
        held();
        return fn(signal);
      }, options),
  };
  return lock as LockLike;
}

export const multiLock = {
  // A composite is not reentrant: the section's "entering again" takes a plain lock of its own.
  adapter: { ...lockAdapter((client, name, recorder) => ({ handle: composite(client, name, recorder), inner: () => client.getLock(`{${name}}:inner`) })), setup: () => () => undefined },
  invariant: exclusive,
  faults: FAULT_KINDS,
  // The operator force-unlocks the first member: the MultiLock's holder is told (a member lost).
  getLock: (client: LockClient, name: string) => client.getLock(name),
};
