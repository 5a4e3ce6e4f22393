// FencedLock in the soak: RLock's adapter behind a wrapper that notes each hold's token, and the
// invariants "one holder" and "tokens grow" (invariants.ts, checkTokens).
import type { FencedLock, LockClient } from '../../../src';
import type { Invariant } from '../checker';
import type { Recorder } from '../recorder';
import { FAULT_KINDS } from '../records';
import { exclusive, lockAdapter, type LockLike } from './rlock';

/** The RLock interface over a fenced lock; every token it hands out goes to the current hold's record. */
function noting(lock: FencedLock, recorder: Recorder): LockLike {
  return {
    async lock(options) {
      recorder.noteToken(await lock.lock(options));
    },
    async tryLock(options) {
      const token = await lock.tryLock(options);
      if (token !== null) recorder.noteToken(token);
      return token !== null;
    },
    unlock: () => lock.unlock(),
    withLock: (fn, options) =>
      lock.withLock((signal, token) => {
        recorder.noteToken(token);
        return fn(signal);
      }, options),
    forceUnlock: () => lock.forceUnlock(),
  };
}

export const fencedLock = {
  adapter: lockAdapter((client, name, recorder) => ({
    handle: noting(client.getFencedLock(name), recorder),
    inner: () => noting(client.getFencedLock(name), recorder),
  })),
  invariant: { ...exclusive, tokens: true } satisfies Invariant,
  faults: FAULT_KINDS,
  getLock: (client: LockClient, name: string) => client.getFencedLock(name),
};
