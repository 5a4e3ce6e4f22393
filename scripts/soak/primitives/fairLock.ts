// FairLock in the soak: RLock's adapter on client.getFairLock, plus what FIFO needs: which
// attempts ask to be queued, and the fair invariant (one holder, grants in queue order).
import type { LockClient } from '../../../src';
import type { Invariant } from '../checker';
import { fairGrantChannels } from './channels';
import { FAULT_KINDS } from '../records';
import { lockAdapter, lockErrors, type LockLike } from './rlock';

/**
 * fairLock/acquire-3.lua's ARGV[2] is "1" when the attempt joins (or stays in) the queue; in the
 * EVALSHA/EVAL arguments [sha or script, numkeys, 3 keys, ARGV...] that is index 6.
 */
const enqueues = (args: unknown[]): boolean => String(args[1]) === '3' && String(args[5]).includes(':') && String(args[6]) === '1';

const getLock = (client: LockClient, name: string): LockLike => client.getFairLock(name);

export const fairLock = {
  adapter: lockAdapter((client, name) => ({ handle: getLock(client, name), inner: () => getLock(client, name) }), { ...lockErrors, enqueues }),
  invariant: { conflicts: () => true, fifo: true, counters: true } satisfies Invariant,
  faults: FAULT_KINDS,
  getLock,
  channels: fairGrantChannels,
};
