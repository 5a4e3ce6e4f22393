import type { Hold } from '../../services/Hold';
import { diagnostics } from '../../diagnostics';
import type { RenewalTarget } from '../../services/RenewalTarget';
import type { CommandBound } from '../../services/LockContext';
import { type Parking, sleepAsCandidate } from '../../services/candidateSleep';
import { OUTCOME_UNKNOWN, settledWithinGrace } from '../../services/bounds';
import type { ChannelEntry } from '../../services/ChannelEntry';
import { LockOwner } from '../../services/LockOwner';
import { syncedAcquire } from '../../services/syncedAcquire';
import { permitScripts as scripts } from './permitSemaphoreScripts';
import { keptByWatchdog, type PermitRelease } from './PermitRelease';
import type { Attempt, PrimitiveSteps } from '../Primitive';
import { standBackBound, starvingClock } from '../semaphoreWaiting';

/**
 * How long a client's claim on the next free permit stands unless one of its waiters renews it
 * (each refused attempt of a waiter parked for STARVING_MS does): a claimant whose waiters
 * all gave up, or whose process stopped, keeps one permit from the others this long at most.
 */
const CLAIM_MS = 1_000;

/** The watchdog's renew script for permits (lua/permitSemaphore/renew.lua). */
const RENEW_COMMAND = 'rlock_permitSemaphore_renew';

/** How errors name permit `id` of semaphore `name` (see `LockLostError`). */
export function permitNamed(id: string, name: string): string {
  return `permit ${id} of semaphore "${name}"`;
}

/** The watchdog's name for a permit it keeps (one function for every permit: nothing made per acquire). */
const describePermit = (target: RenewalTarget): string => permitNamed(target.field, target.name);

/** What taking a permit asks of its semaphore: its keys, its own steps, bound to it, and how it gives a permit back. */
export interface AcquiredPermits extends PrimitiveSteps {
  readonly permitsKey: string;
  readonly channel: string;
  readonly claimKey: string;
  readonly kindKey: string;
  /** Gives back a permit taken for a caller that is gone, or that the replicas did not acknowledge. */
  readonly releases: Pick<PermitRelease, 'releasePermit'>;
}

/**
 * How a permit-expirable semaphore's permit is taken: the attempts of one acquire through the
 * shared wait (the claim on the next free permit once it starves, a handoff from this client's
 * releases while parked), the `syncReplicas` check, and the watchdog registration of a permit
 * taken without `leaseTime`.
 */
export class PermitAcquire {
  constructor(private readonly semaphore: AcquiredPermits) {}

  /**
   * The acquire under `syncReplicas` (see syncedAcquire), Redisson #4097: a permit the replicas
   * did not acknowledge is given back (quietly: nobody was told of it) and the attempt counts as
   * refused for the sync timeout. Answers as the acquire script: null when taken, else a TTL.
   */
  private async acquireSynced(sync: { replicas: number; timeout: number }, id: string, args: readonly (string | number)[], bound: CommandBound): Promise<number | null> {
    const { reply, confirmed, waitRefused } = await syncedAcquire(this.semaphore.context, sync, 'rlock_permitSemaphore_acquire', args, bound);
    if (reply !== null || confirmed) return reply as number | null;
    await this.semaphore.releases.releasePermit(id).catch(() => undefined);
    if (waitRefused) throw waitRefused;
    return sync.timeout;
  }

  /** Takes a permit within `waitTime`: its id and send time, or undefined when the time ran out. */
  async take(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<{ id: string; sentAt: number } | undefined> {
    const { semaphore } = this;
    const { context } = semaphore;
    // The permit id is the owner's id: a lost permit is reported like a lost lock of that owner.
    const owner = new LockOwner();
    const id = owner.id;
    const lease = leaseTime ?? context.watchdogTimeout;
    const publish = await semaphore.publishCommand();
    const sync = context.syncReplicas;
    let attempts = 0;
    // A waiter parked for STARVING_MS claims the next free permit for its client (see
    // acquire-5.lua), as the plain semaphore's waiters reserve: a release wakes a waiter in
    // every client, and the client always woken last would otherwise starve.
    const clock = starvingClock();
    // One for the whole wait: it keeps the waiter's place in its client's line from sleep to sleep.
    const parking: Parking = { field: id, lease, giveBack: () => semaphore.releases.releasePermit(id) };
    const attempt = async (listening: ChannelEntry | undefined, bound: CommandBound): Promise<Attempt> => {
      // Only the first: a waiter woken by a message must try, or the wake-up is lost.
      const first = attempts++ === 0;
      // Stands back while its client yields, or joins its client's parked waiters (see standBackBound).
      const standBack = listening && waitTime > 0 ? standBackBound(listening, 1, first) : undefined;
      if (standBack !== undefined) return { held: false, ttl: standBack };
      const sentAt = performance.now();
      const claims = listening && clock.starving() ? 1 : 0;
      const args = [semaphore.key, semaphore.permitsKey, semaphore.channel, semaphore.claimKey, semaphore.kindKey, id, lease, publish, context.clientId, claims, CLAIM_MS] as const;
      // Answered after the wait ended (Redis frozen, a silent connection): a permit taken for the
      // caller that is gone goes back (a number is a refusal's TTL).
      const lateBound: CommandBound = {
        ...bound,
        lateReply: (late) => (late === null || late === OUTCOME_UNKNOWN ? semaphore.releases.releasePermit(id) : undefined),
      };
      const ttl = sync
        ? await this.acquireSynced(sync, id, args, lateBound)
        : await context.command('acquire', (redis) => scripts(redis).rlock_permitSemaphore_acquire(...args), lateBound);
      if (ttl === null) return { held: true, sentAt };
      listening?.refused(ttl);
      return { held: false, ttl };
    };
    // Parked, the waiter may be handed a permit by a release of this client (see handOver).
    if (leaseTime === undefined) keptByWatchdog.add(id);
    let hold: Hold | undefined;
    try {
      hold = await semaphore.wait(id, semaphore.channel, attempt, waitTime, signal, {
        // A release that claimed the waiter waits for its script's reply unless pipelined; a
        // waiter that stops meanwhile ends at once, and the permit handed over later goes back.
        // Never with syncReplicas: every permit must come from an acquire that WAIT vouched for.
        // (undefined: the plain wake-up; the first sleep still starts the STARVING_MS clock.)
        park: (entry, ms, stops, deadline, debt) => {
          clock.parked();
          if (sync) return undefined;
          return sleepAsCandidate(entry, context.clientId, parking, ms, stops, deadline, debt);
        },
      });
    } finally {
      keptByWatchdog.delete(id);
    }
    if (hold === undefined) return undefined;
    const { sentAt, expiresAt } = hold;
    owner.holds = 1;
    if (leaseTime === undefined) {
      // Keyed by the semaphore's name (what `lost` reports), renewed in its permits zset.
      context.renewal.add({ name: semaphore.name, key: semaphore.key, field: id, owner, renewCommand: RENEW_COMMAND, renewKeys: [semaphore.permitsKey], describe: describePermit }, sentAt, expiresAt);
    }
    const stopped = semaphore.stoppedReason(signal);
    if (stopped !== undefined) {
      // Not longer than an attempt would wait (Redis frozen): it is given back when Redis answers.
      await settledWithinGrace(semaphore.releases.releasePermit(id));
      throw stopped;
    }
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...semaphore.event(id), holds: 1, leaseTime });
    return { id, sentAt };
  }
}
