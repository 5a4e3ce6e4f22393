import { refusedUntilFailover } from '../../core/waitLoop';
import type { Hold } from '../../services/Hold';
import { diagnostics } from '../../diagnostics';
import { RedisCommandError } from '../../errors';
import { RELEASE_LATCH_TTL_MS } from '../../names';
import { type CommandBound, IDEMPOTENT } from '../../services/LockContext';
import { type Parking, sleepAsCandidate } from '../../services/candidateSleep';
import { boundedWait, OUTCOME_UNKNOWN, settledWithinGrace } from '../../services/bounds';
import { STALE_MARGIN_MS } from '../../services/RedisClock';
import type { ChannelEntry } from '../../services/ChannelEntry';
import type { Attempt, PrimitiveSteps } from '../Primitive';
import { semaphoreScripts as scripts } from './semaphoreScripts';
import { standBackBound, starvingClock } from '../semaphoreWaiting';

/** How long an undo that Redis did not answer waits before it is sent again. */
const UNDO_RETRY_MS = 1_000;

/** An attempt refused with STALE (see `take`): tried again at once. */
const STALE_RESEND = Symbol('stale resend');

/**
 * The call failed without Redis's answer (ioredis's `commandTimeout`, a connection flushed, or
 * never sent): it may have run, or may still. An error Redis replied means it did not (our
 * scripts refuse before they write).
 */
function mayHaveRun(error: unknown): boolean {
  return error instanceof RedisCommandError && (error.cause as { name?: unknown } | undefined)?.name !== 'ReplyError';
}

/**
 * How long one acquire may hold the semaphore's reservation, in queue timeouts (30 s by default):
 * a request for more permits than will ever be free at once (more than the semaphore has) kept
 * every smaller request out for as long as it waited, for good without a `waitTime`. After it,
 * the request waits on without the privilege, as Redisson's would.
 */
export const RESERVATION_QUEUE_TIMEOUTS = 6;

/** What a semaphore's acquire asks of it: its keys and its own steps, bound to it. */
export interface AcquiredSemaphore extends PrimitiveSteps {
  readonly channel: string;
  readonly reservationKey: string;
  readonly kindKey: string;
  /** Adds permits once (see `Semaphore.add`): what gives back the permits of an attempt whose caller is gone. */
  add(call: string, delta: number, operationId: string | undefined): Promise<unknown>;
}

/**
 * How a semaphore takes permits: the attempts of one acquire through the shared wait, the
 * reservation a request that smaller ones could overtake (or a starving one) holds and leaves,
 * and the undo of an attempt whose outcome is unknown, so that permits taken for a caller that
 * is gone go back.
 */
export class SemaphoreAcquire {
  constructor(private readonly semaphore: AcquiredSemaphore) {}

  /** Takes `permits` within `waitTime`; resolves with the send time, undefined when the time ran out. */
  async take(permits: number, waitTime: number, signal: AbortSignal | undefined): Promise<number | undefined> {
    const { semaphore } = this;
    const { context } = semaphore;
    const callId = semaphore.newId();
    const field = `${context.clientId}:${callId}`;
    // A request that smaller ones could overtake reserves, and so does one that has been parked
    // STARVING_MS: a release wakes a waiter in every client and the quickest takes the permit,
    // so without it a slower process could lose that race for good. It must be subscribed
    // first so that the release naming it reaches it.
    const clock = starvingClock();
    const mayReserveNow = (): boolean => permits > 1 || clock.starving();
    let entry: ChannelEntry | undefined;
    let reserving = false;
    // When this acquire first held the reservation (undefined: never), and whether its time with it is over.
    let reservedAt: number | undefined;
    let reservationOver = false;
    let attempts = 0;
    // Whether the latest sleep ran out with no wake-up (no message, no grant, no handover): the
    // attempt after it asks for the client's parked waiters too (see `asking`).
    let ranOut = false;
    // One for the whole wait: it keeps the waiter's place in its client's line from sleep to sleep.
    const parking: Parking = { field, lease: 0, permits, coveredBySiblings: true };
    const attempt = async (listening: ChannelEntry | undefined, bound: CommandBound): Promise<Attempt> => {
      // Only a multi-permit request: one permit is always served in the end, and a waiter that
      // reserved because it starved would lose its place to every later one.
      if (permits > 1 && reserving && reservedAt !== undefined && performance.now() - reservedAt >= RESERVATION_QUEUE_TIMEOUTS * context.queueTimeout) {
        // Held long enough: the others get the permits it gathered, and it waits on as they do.
        reservationOver = true;
        reserving = false;
        // Within the attempt's bound (an abort, the waitTime, Redis frozen: the wait ends as for
        // an attempt). Refused by Redis, the reservation runs out after queueTimeout unrenewed.
        await this.leaveReservation(field, { ...bound, lateReply: () => undefined }).catch((error: unknown) => {
          if (!(error instanceof RedisCommandError)) throw error;
        });
      }
      const number = ++attempts;
      // Only the first: a waiter woken by a message must try, or the wake-up is lost.
      const first = number === 1;
      // Stands back, or joins its client's parked waiters (see standBackBound). Not the
      // reservation's holder: the permits freed for it are no one else's, and its grant comes
      // once (skipped, it slept on for good; trying, it sleeps at most the third of
      // queueTimeout its attempt answers, below).
      const standBack = listening && waitTime > 0 && !reserving ? standBackBound(listening, permits, first) : undefined;
      if (standBack !== undefined) return { held: false, ttl: standBack };
      const mayReserve = !reservationOver && mayReserveNow();
      if (listening && mayReserve && !entry) {
        // Registered before the request that may reserve: the grant can beat its reply.
        entry = listening;
        entry.grants.expectGrant(field);
      }
      // Its answer covers this client's parked waiters whose bound runs out meanwhile (one asks
      // per client, not each of them): a refusal records its bound below, a success wakes as
      // many as the permits it left free can serve.
      const marks = !reserving ? listening : undefined;
      marks?.asking(context.queueTimeout, permits);
      const sentAt = performance.now();
      // Each attempt has a latch of its own: a resent attempt that took answers "taken" again.
      const latch = semaphore.requestLatch(`${field}.${number}`);
      // Cut short (its bound, an abort whatever its reason): `lateReply` gives back, not the catch below.
      let cut = false;
      const answer = await semaphore.counted(
        'acquire',
        RELEASE_LATCH_TTL_MS,
        (redis, notAfter) => scripts(redis).rlock_semaphore_acquire(semaphore.key, semaphore.reservationKey, latch, semaphore.kindKey, permits, field, listening !== undefined && mayReserve ? 1 : 0, context.queueTimeout, RELEASE_LATCH_TTL_MS, notAfter),
        {
          ...bound,
          cutShort: () => {
            cut = true;
            bound.cutShort?.();
          },
          // Answered after the wait ended (Redis frozen, a silent connection): permits taken for
          // the caller that is gone go back, a reservation made for it is left.
          lateReply: (late) => {
            // No answer, the attempt may have run, or may still: undone by its latch.
            if (late === OUTCOME_UNKNOWN) return this.undoTake(latch, permits, sentAt);
            const [lateStatus] = late as [number, number];
            if (lateStatus === 1) return semaphore.add('release', permits, undefined);
            return lateStatus === 2 ? this.leaveReservation(field) : undefined;
          },
        },
      ).catch((error: unknown): typeof STALE_RESEND => {
        marks?.askFailed(); // no answer: the waiters it covered must not sleep on its mark
        // Failed without Redis's answer while its caller waited: it may have run, and the caller
        // is told it failed. Undone, or its permits would be nobody's for good.
        if (!cut && mayHaveRun(error)) this.undoTake(latch, permits, sentAt).catch(() => undefined);
        // ioredis resent the attempt after an outage longer than its latch lives: refused, it
        // wrote nothing (whether its first run took permits cannot be known any more, and the
        // caller could not give them back either). The wait goes on with a new attempt, as an
        // app that set maxRetriesPerRequest: null to ride out outages expects.
        if (error instanceof RedisCommandError && error.code === 'STALE') return STALE_RESEND;
        throw error;
      });
      if (answer === STALE_RESEND) return { held: false, ttl: 0 };
      const [status, ttl, free] = answer;
      reserving = status === 2;
      if (reserving) reservedAt ??= performance.now();
      // Permits owed (cut below those held): this client's releases must go back to Redis. A
      // client that was not listening when the cut was published learns it here.
      if (free !== undefined && free < 0 && listening) listening.localHandoff(context.clientId).suspend();
      else if (status === 1 || (free ?? -1) >= 0) context.pubsub.peek(semaphore.channel)?.local?.resume(sentAt);
      if (status === 1) {
        // Permits left free that this client's parked waiters would sleep past: a waiter whose
        // bound ran out was covered by this ask (see `asking`), and no message says so. Only after
        // such a sleep: a release's message woke as many waiters as it freed (the others are on
        // their way), and a new caller asks only when none of its client's waiters is parked (or
        // for several permits), where a wake-up kept for a waiter in flight would cost an attempt.
        // Those are the client's other waiters: the taker, if joined, is one of refCount.
        const woken = context.pubsub.peek(semaphore.channel);
        if (ranOut && woken && free !== undefined && free > 0) woken.wake(Math.min(free, woken.refCount - (listening ? 1 : 0)));
        // Its answer for the siblings: a reservation of another waiter that still keeps permits
        // back ends in `ttl` (no message then); with none, the queue timeout, as for a refusal.
        if (free !== undefined) marks?.refused(ttl < 0 ? context.queueTimeout : ttl);
        return { held: true, sentAt };
      }
      // The holder renews its reservation by attempting again well before it runs out. A refusal
      // with no bound (-1: nothing reserved yet) is asked again after a queue timeout all the
      // same: a reservation made after it publishes nothing, and if its holder dies the permits
      // kept for it come free with no message. The waiters that join this client's parked ones
      // without asking take that bound too, and when it runs out one of them asks for all (see
      // `coveredBySiblings`): before, they kept "no bound" and slept on for good once the waiter
      // that asked had left; bounding each of them on its own made every parked waiter ask
      // (a second reader measured 220 script calls a second for 200 waiters, against 3).
      const sleepMs = reserving ? Math.floor(context.queueTimeout / 3) : ttl < 0 ? context.queueTimeout : ttl;
      // A refusal of `permits` covers the requests for as many or more only (fewer may fit).
      if (!reserving) listening?.refused(sleepMs, permits);
      return { held: false, ttl: sleepMs };
    };
    let hold: Hold | undefined;
    try {
      hold = await semaphore.wait(callId, semaphore.channel, attempt, waitTime, signal, {
        // The reservation's holder waits for its grant; the others may be handed permits by a
        // release of this client (see release()).
        park: (woken, ms, stops, deadline, debt) => {
          clock.parked();
          if (reserving) {
            return woken.grants.untilGranted(field, ms, stops).then((grant) => {
              ranOut = grant === undefined; // else the grant's message woke the others it serves
              return undefined;
            });
          }
          return sleepAsCandidate(woken, context.clientId, parking, ms, stops, deadline, debt).then((hold) => {
            ranOut = hold === undefined && !debt.owed;
            return hold;
          });
        },
        giveUp: async () => {
          if (reservedAt === undefined) return;
          await this.leaveReservation(field).catch(() => undefined); // the reservation then runs out after queueTimeout
        },
      });
    } finally {
      entry?.grants.forgetGrant(field);
    }
    if (hold === undefined) return undefined;
    // Taken while the caller aborted or the client closed: give the permits back, leave nothing.
    const stopped = semaphore.stoppedReason(signal);
    if (stopped !== undefined) {
      // Not longer than an attempt would wait (Redis frozen): it is given back when Redis answers.
      await settledWithinGrace(semaphore.add('release', permits, undefined));
      throw stopped;
    }
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...semaphore.event(callId), permits });
    return hold.sentAt;
  }

  /** Gives up the reservation `field` holds (if it still does), passing the permits it gathered on. */
  private async leaveReservation(field: string, bound?: CommandBound): Promise<void> {
    const { semaphore } = this;
    const publish = await semaphore.publishCommand();
    await semaphore.context.command('leave', (redis) => scripts(redis).rlock_semaphore_leave(semaphore.key, semaphore.reservationKey, semaphore.channel, field, publish), bound);
  }

  /**
   * Undoes the attempt whose latch is `latch`, sent at `sentAt`, whose outcome is unknown: its
   * permits go back if it ran, and it takes nothing if it runs later (undoAcquire-5.lua).
   * Tried again while Redis does not answer, as long as the attempt's latch can still say what
   * it did; past that, permits it took are lost (an outage of about a minute).
   */
  private async undoTake(latch: string, permits: number, sentAt: number): Promise<void> {
    const { semaphore } = this;
    const { context } = semaphore;
    const publish = await semaphore.publishCommand();
    const until = sentAt + RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS;
    for (;;) {
      try {
        await context.command('giveBack', (redis) => scripts(redis).rlock_semaphore_undoAcquire(semaphore.key, semaphore.reservationKey, semaphore.channel, semaphore.kindKey, latch, permits, publish, context.clientId, RELEASE_LATCH_TTL_MS), IDEMPOTENT);
        return;
      } catch (error) {
        // Sent again when it may not have run: no answer, or a refusal for now (a server loading
        // its data after a restart, a failover: rlock turns ioredis's ready check off, and the
        // old master answers READONLY until Sentinel's switch).
        if (!(mayHaveRun(error) || refusedUntilFailover(error)) || performance.now() + UNDO_RETRY_MS >= until) throw error;
        await boundedWait(UNDO_RETRY_MS, [context.closedSignal], () => undefined);
      }
    }
  }
}
