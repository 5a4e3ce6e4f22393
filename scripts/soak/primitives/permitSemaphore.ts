// The permit-expirable semaphore in the soak: permits with ids and leases (the watchdog's, or a
// leaseTime), taken along every public path; the invariant is the semaphore's, "never more than
// PERMITS permits held" (invariants.ts, checkCapacity), where a permit a fault took away counts
// until its owner was told (lockLost, LockLostError, PermitNotHeldError). Its permits come back
// after their lease, so every fault but the force-unlock it does not have applies.
import { LockLostError, PermitNotHeldError } from '../../../src';
import { permitChannelOf } from '../../../src/names';
import type { Invariant } from '../checker';
import { oneChannel } from './channels';
import type { ErrorReading } from '../recorder';
import { lockErrors, pick, recordGrantsAndLosses, type PrimitiveAdapter } from './rlock';
import { PERMITS, permitRound, settingPermits } from './semaphore';

const errors: ErrorReading = {
  holdGone: (error) => (error instanceof PermitNotHeldError ? 'notOwner' : error instanceof LockLostError ? 'lost' : undefined),
  miss: lockErrors.miss,
};

const adapter: PrimitiveAdapter = {
  errors,
  setup: recordGrantsAndLosses,
  prepare: settingPermits((client, name) => client.getPermitExpirableSemaphore(name)),
  async round(client, recorder, config, stop) {
    const lock = pick(config.locks);
    const semaphore = client.getPermitExpirableSemaphore(lock);
    // A restart without data forgets the permits: whoever comes next sets them again.
    if (Math.random() < 0.05) await semaphore.trySetPermits(PERMITS).catch(() => undefined);
    await permitRound(recorder, lock, {
      within: (fn, bound) => semaphore.withPermit(fn, bound),
      // A bounded acquire takes a lease of its own; the others are kept by the watchdog.
      take: (bound, signalled) => (signalled ? semaphore.acquire({ signal: AbortSignal.timeout(bound) }) : semaphore.tryAcquire({ waitTime: bound, leaseTime: config.leaseTime })),
      give: (id) => semaphore.release(id),
      watchdogKept: config.watchdogTimeout,
    }, stop, 'withPermit');
  },
};

export const permitSemaphore = {
  adapter,
  invariant: { conflicts: () => false, fifo: false, capacity: PERMITS, counters: false } satisfies Invariant,
  faults: ['conn-kill', 'sub-kill', 'restart', 'restart-persist', 'pause', 'worker-kill'] as const,
  channels: oneChannel(permitChannelOf),
  keysGone: false,
};
