// FencedLock in the soak: RLock's adapter behind a wrapper that notes each hold's token, a
// `fencedSet` after each section, and the invariants "one holder", "tokens grow" and "fencedSet
// never writes an older token after a newer one" (invariants.ts, checkTokens, checkFencedWrites).
import type { FencedLock, LockClient } from '../../../src';
import type { Invariant } from '../checker';
import { now } from '../clock';
import type { HoldRecorder, Recorder } from '../recorder';
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

/**
 * The fenced write a holder makes after its section: `fencedSet` of the lock's data key with the
 * hold's token, recorded for checkFencedWrites (a holder that lost its lock unseen, whose
 * successor wrote already, must be refused).
 */
function fencedWrite(lock: FencedLock, name: string, recorder: Recorder): (rec: HoldRecorder) => Promise<void> {
  return async (rec) => {
    if (rec.token === undefined) return;
    const sent = now();
    const ok = await lock.fencedSet(`${recorder.keyPrefix}data:${name}`, `${recorder.worker}.${rec.id}`, BigInt(rec.token));
    recorder.emit({ k: 'fw', w: recorder.worker, lock: name, token: rec.token, sent, replied: now(), ok });
  };
}

export const fencedLock = {
  adapter: lockAdapter((client, name, recorder) => {
    const lock = client.getFencedLock(name);
    return {
      handle: noting(lock, recorder),
      inner: () => noting(client.getFencedLock(name), recorder),
      afterSection: fencedWrite(lock, name, recorder),
    };
  }),
  invariant: { ...exclusive, tokens: true } satisfies Invariant,
  faults: FAULT_KINDS,
  getLock: (client: LockClient, name: string) => client.getFencedLock(name),
};
