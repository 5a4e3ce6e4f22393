import type { ChainableCommander } from 'ioredis';
import { refusedUntilFailover } from '../core/waitLoop';
import type { Hold } from '../services/Hold';
import { watchHold } from '../core/holdScope';
import { diagnostics } from '../diagnostics';
import { InvalidArgumentError, LockTimeoutError, RedisCommandError } from '../errors';
import { KIND_NAMES, type NameKind, subscriberCount, type SemaphoreInfo } from '../introspection';
import { kindKeyOf, RELEASE_LATCH_TTL_MS, reservationKeyOf, semaphoreChannelOf } from '../names';
import { type CommandBound, IDEMPOTENT, type LockContext } from '../services/LockContext';
import { localHandoffOf, type Parking, sleepAsCandidate } from '../services/LocalHandoff';
import { boundedWait, OUTCOME_UNKNOWN, settledWithinGrace } from '../services/bounds';
import { STALE_MARGIN_MS } from '../services/RedisClock';
import { readValues } from '../services/database';
import type { ChannelEntry } from '../services/ChannelEntry';
import type { PublishCommand, ScriptedRedis } from '../services/scripts';
import { checkCount, checkOperationOptions, checkPermitOptions, type OperationOptions, type PermitOptions, type ReleaseOptions, type TryPermitOptions } from './permitOptions';
import { type Attempt, Primitive } from './Primitive';

/**
 * How long a caller that may wait sleeps without asking Redis, or undefined when it must ask.
 * It stands back while its client yields its turn (the other clients' waiters get the permits
 * it passed on), and a new caller (`first`) for one permit parks behind its client's waiters
 * already parked: they wait because no permits were free, so its attempt would nearly always be
 * refused (one script call per acquisition under contention, measured in the bench); parked, it
 * is served in order by this client's releases handing over or by a release message. A
 * multi-permit caller must try, to claim the reservation that keeps smaller requests from
 * starving it. Either sleeps no longer than the bound this client's latest refused attempt was
 * given (a lease's or a reservation's end, which publishes nothing), and asks once that ran out.
 */
export function standBackBound(entry: ChannelEntry, permits: number, first: boolean): number | undefined {
  const local = entry.local;
  // Behind waiters for 1 permit only: one for more may wait while a permit is free (it waited
  // 0.5-4.7 s behind a parked request for more permits than the semaphore has, a permit free).
  if (local?.yielding === true) return entry.joinBound(); // its turn given away: it stands back whatever it asks for
  const standsBack = first && permits === 1 && local?.hasCandidateFor(1) === true;
  return standsBack ? entry.joinBound(permits) : undefined;
}

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

/** The semaphore's scripts (src/lua/semaphore/), as `defineCommand` adds them. */
interface SemaphoreScripts {
  rlock_semaphore_acquire(key: string, reservationKey: string, latch: string, kindKey: string, permits: number, field: string, mayReserve: 0 | 1, reservationTtlMs: number, latchTtlMs: number, notAfter: number): Promise<[0 | 1 | 2, number, number?]>;
  rlock_semaphore_undoAcquire(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, releaser: string, latchTtlMs: number): Promise<0 | 1>;
  rlock_semaphore_add(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, delta: number, publish: PublishCommand, releaser: string, latchTtlMs: number, notAfter: number): Promise<[number, number, 1?]>;
  rlock_semaphore_trySetPermits(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, latchTtlMs: number): Promise<0 | 1>;
  rlock_semaphore_drain(key: string, latch: string, kindKey: string, latchTtlMs: number, notAfter: number): Promise<number>;
  rlock_semaphore_leave(key: string, reservationKey: string, channel: string, field: string, publish: PublishCommand): Promise<0 | 1>;
}

const scripts = (redis: ScriptedRedis): SemaphoreScripts => redis as unknown as SemaphoreScripts;

/**
 * How long a waiter for a single permit stays parked before its next attempt may reserve permits
 * (as a multi-permit request always may): then the permits freed next are its, whoever is
 * quicker. Long enough that the common wait never reserves (a reservation costs its holder a
 * grant message and an attempt), short enough to bound a starving wait to a few of them. Counted
 * from the waiter's first sleep, not from its call: getting subscribed (slow on a loaded
 * machine) is not being passed over, and a reservation taken then changed how every waiter of
 * a test parked.
 */
export const STARVING_MS = 100;

/**
 * How long one acquire may hold the semaphore's reservation, in queue timeouts (30 s by default):
 * a request for more permits than will ever be free at once (more than the semaphore has) kept
 * every smaller request out for as long as it waited, for good without a `waitTime`. After it,
 * the request waits on without the privilege, as Redisson's would.
 */
export const RESERVATION_QUEUE_TIMEOUTS = 6;

/** A waiter's STARVING_MS clock: `parked()` at each sleep (the first one starts it), `starving()` once it ran out. */
export function starvingClock(): { parked(): void; starving(): boolean } {
  let parkedAt: number | undefined;
  return {
    parked: () => {
      parkedAt ??= performance.now();
    },
    starving: () => parkedAt !== undefined && performance.now() - parkedAt >= STARVING_MS,
  };
}

/**
 * A counting semaphore, Redisson's RSemaphore: a counter of free permits at `<keyPrefix><name>`;
 * `acquire` takes permits only when enough are free, all at once; `release` adds them and wakes
 * as many waiters as they can serve (one counted message). Permits have no owner: a holder that
 * crashes takes its permits with it (use `getPermitExpirableSemaphore` for permits that come
 * back). A waiter asking for several permits reserves them once it has to wait, so smaller
 * requests cannot starve it (see docs/design.md, "Semaphores").
 */
export class Semaphore extends Primitive {
  private readonly channel: string;
  private readonly reservationKey: string;
  private readonly kindKey: string;

  /** @internal Use `client.getSemaphore(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
    this.channel = semaphoreChannelOf(context.keyPrefix, this.key);
    this.reservationKey = reservationKeyOf(context.keyPrefix, this.key);
    this.kindKey = kindKeyOf(context.keyPrefix, this.key);
  }

  /** Sets the number of permits if it was never set; true when it did. */
  async trySetPermits(permits: number): Promise<boolean> {
    checkCount('permits', permits, 0);
    this.context.assertOpen();
    const publish = await this.publishCommand();
    const latch = this.requestLatch(); // a resend after a lost reply answers what the first run did
    const set = await this.context.command('trySetPermits', (redis) => scripts(redis).rlock_semaphore_trySetPermits(this.key, this.reservationKey, this.channel, this.kindKey, latch, permits, publish, RELEASE_LATCH_TTL_MS));
    return set === 1;
  }

  /**
   * Adds `delta` permits (negative: removes them; the count may go below 0, and no one gets any
   * until it is back above). A cut stops every client's in-process handoffs (its message; this
   * client's at once): the permits released go back to Redis until none are owed. With
   * `operationId`, once per id (see OperationOptions).
   */
  async addPermits(delta: number, options?: OperationOptions): Promise<void> {
    checkCount('delta', delta, -Infinity);
    const operationId = checkOperationOptions(options);
    this.context.assertOpen();
    if (delta < 0) this.context.pubsub.peek(this.channel)?.local?.suspend();
    await this.add('addPermits', delta, operationId);
  }

  /** Waits as long as it takes (or until `signal` aborts) and takes `permits` permits (default 1). */
  async acquire(options?: PermitOptions): Promise<void> {
    const { permits, signal } = checkPermitOptions(options, ['permits', 'signal']);
    this.context.assertOpen();
    await this.take(permits, Infinity, signal);
  }

  /** Takes `permits` permits if it can within `waitTime` (default: one attempt); true when it did. */
  async tryAcquire(options?: TryPermitOptions): Promise<boolean> {
    const { permits, waitTime, signal } = checkPermitOptions(options, ['permits', 'waitTime', 'signal']);
    this.context.assertOpen();
    return (await this.take(permits, waitTime ?? 0, signal)) !== undefined;
  }

  /**
   * Gives back `permits` permits (default 1). Unchecked, as in Redisson: the semaphore has no
   * owners. Permits that a waiter of this client parked on this semaphore can use are handed to
   * it in-process, no Redis call at all (at most MAX_LOCAL_HANDOFFS in a row and for at most
   * MAX_LOCAL_RUN_MS; then the permits go back to Redis and wake the other processes' waiters too).
   * With `operationId`, once per id (see OperationOptions); such a release always goes to Redis,
   * which records the id.
   */
  async release(options?: ReleaseOptions): Promise<void> {
    const { permits, operationId } = checkPermitOptions(options, ['permits', 'operationId']);
    this.context.assertOpen();
    await this.giveBackTold(permits, operationId);
  }

  /** Gives back and says so on `rlock:released` (`withPermits` too: its takes are announced). */
  private async giveBackTold(permits: number, operationId?: string): Promise<void> {
    await this.giveBack(permits, operationId);
    if (diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.event(''), permits, released: true });
  }

  private async giveBack(permits: number, operationId: string | undefined): Promise<void> {
    // A release with the caller's id is not handed over in-process: no record of the id would
    // stop its retry, by this process or another, from giving the permits back again.
    const { left, yielded } = operationId === undefined ? this.handOver(permits) : this.notHandedOver(permits);
    if (left === 0) return;
    const sentAt = performance.now();
    const [free, reached, replayed] = await this.add('release', left, operationId);
    // Below 0: permits are owed after a cut whose message this client may have missed (its
    // subscriber was reconnecting); its next releases must pay them off, not go to its waiters.
    // An answer replayed from an earlier run (a retry's) is older than this call: it may not resume.
    const entry = this.context.pubsub.peek(this.channel);
    if (free < 0) entry?.local?.suspend();
    else if (replayed !== 1) entry?.local?.resume(sentAt);
    if (!yielded || reached > 1) return;
    // No other client waits (the message reached ours alone, or no one): no turn to give; our
    // waiters, which the message may have found still standing back, try again now.
    entry?.local?.stopYielding();
    entry?.wake(free);
  }

  /** A release that goes back through Redis whole: the next in-process handoff starts a new run. */
  private notHandedOver(permits: number): { left: number; yielded: boolean } {
    this.context.pubsub.peek(this.channel)?.local?.endRun();
    return { left: permits, yielded: false };
  }

  /** Hands released permits to this client's parked waiters that they suffice for; returns the rest, and whether this client yields its turn. */
  private handOver(permits: number): { left: number; yielded: boolean } {
    const local = this.context.pubsub.peek(this.channel)?.local;
    if (!local) return { left: permits, yielded: false };
    let left = permits;
    const fits = (candidate: { permits?: number }): boolean => (candidate.permits ?? Infinity) <= left;
    // Permits cut below those held (a negative addPermits): they go back to Redis, which owes them.
    while (left > 0 && !local.runIsOver && !local.suspended) {
      const next = local.claimFirst(fits);
      if (!next) break;
      left -= next.candidate.permits!;
      local.handedOver();
      next.deliver({ sentAt: performance.now() });
    }
    if (left === 0) return { left, yielded: false };
    // A full run of handoffs while waiters here could use these permits: they go back to Redis
    // and this client yields its turn (its waiters and new callers stand back for a moment), so
    // that the other processes' waiters get them. Otherwise a new run may start after them.
    const yielded = local.runIsOver;
    if (yielded) local.yieldTurn();
    else local.endRun();
    return { left, yielded };
  }

  /** Free permits now (0 when never set; negative after a negative `addPermits`). */
  async availablePermits(): Promise<number> {
    this.context.assertOpen();
    const value = await this.context.command('availablePermits', async (redis) => (await this.readCount(redis))[0]);
    return value === null ? 0 : Number(value);
  }

  /**
   * The free permits (a string, or null when never set) with `more` read in the same round trip.
   * Another kind's count read as free permits is refused, as the scripts refuse it (kind.lua).
   */
  private async readCount(redis: ScriptedRedis, more: (reads: ChainableCommander) => unknown = () => undefined): Promise<[string | null, ...unknown[]]> {
    const [free, marker, ...rest] = (await readValues(redis, (reads) => more(reads.get(this.key).get(this.kindKey)))) as [string | null, string | null, ...unknown[]];
    if (marker !== null && marker !== 'semaphore' && marker !== 'deleted') {
      const kind = marker in KIND_NAMES ? `a ${KIND_NAMES[marker as NameKind]}` : JSON.stringify(marker);
      throw new Error(`WRONGTYPE the name is used by ${kind}, not a semaphore`);
    }
    // Not ours at all (no marker, no count): a key someone SET, read as permits it was NaN.
    if (free !== null && !/^-?\d+$/.test(free)) throw new Error('WRONGTYPE the name holds a value that is not a count of permits, not a semaphore');
    return [free, ...rest];
  }

  /** Takes every free permit; returns how many. */
  async drainPermits(): Promise<number> {
    this.context.assertOpen();
    const latch = this.requestLatch(); // a resend after a lost reply answers what the first run took
    return this.counted('drainPermits', RELEASE_LATCH_TTL_MS, (redis, notAfter) => scripts(redis).rlock_semaphore_drain(this.key, latch, this.kindKey, RELEASE_LATCH_TTL_MS, notAfter));
  }

  /** Free permits, the reservation (who, how many, for how long), and how many clients wait. */
  async inspect(): Promise<SemaphoreInfo> {
    this.context.assertOpen();
    const sharded = (await this.publishCommand()) === 'spublish';
    return this.context.command('inspect', async (redis) => {
      const [free, reservation, ttl] = (await this.readCount(redis, (reads) => reads.hgetall(this.reservationKey).pttl(this.reservationKey))) as [string | null, Record<string, string>, number];
      const [clientId = '', waiterId = ''] = (reservation.field ?? '').split(':');
      return {
        name: this.name,
        key: this.key,
        availablePermits: free === null ? null : Number(free),
        reservation: reservation.field ? { clientId, waiterId, permits: Number(reservation.permits), expiresInMs: ttl } : null,
        waitingClients: await subscriberCount(redis, this.channel, sharded),
      };
    });
  }

  /**
   * Runs `fn` holding `permits` permits (default 1) and gives them back in `finally`. Waits as
   * long as it takes unless `waitTime` is given (then rejects with `LockTimeoutError`). `fn`'s
   * signal aborts when `options.signal` does, or (`ClientClosedError`) when the client closes;
   * permits without owners or leases are never lost from under it.
   */
  async withPermits<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: TryPermitOptions): Promise<T> {
    const { permits, waitTime, signal } = checkPermitOptions(options, ['permits', 'waitTime', 'signal']);
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    this.context.assertOpen();
    const maxWait = waitTime ?? Infinity;
    if ((await this.take(permits, maxWait, signal)) === undefined) throw new LockTimeoutError(this.name, maxWait, permits === 1 ? `a permit of semaphore "${this.name}"` : `semaphore "${this.name}" (${permits} permits at once)`);
    // The callback is told when its client closes, as every scope is: its permits (no lease) go
    // back only if its give-back goes out before the connection does, so it had best stop now.
    const scope = new AbortController();
    const stopWatching = watchHold(scope, [signal, this.context.closedSignal]);
    try {
      return await fn(scope.signal);
    } finally {
      stopWatching();
      await this.giveBackTold(permits);
    }
  }

  /** Gives up the reservation `field` holds (if it still does), passing the permits it gathered on. */
  private async leaveReservation(field: string, bound?: CommandBound): Promise<void> {
    const publish = await this.publishCommand();
    await this.context.command('leave', (redis) => scripts(redis).rlock_semaphore_leave(this.key, this.reservationKey, this.channel, field, publish), bound);
  }

  /**
   * Adds `delta` permits (a release, or addPermits), once: the request's latch (expiring by
   * itself) makes a call that ioredis resends after a reconnect, or that its caller makes again
   * with the same `operationId`, answer what the first run did instead of adding the permits
   * twice. Resolves with the free permits after, how many clients the wake-up reached, and 1
   * when that answer is replayed from an earlier run.
   */
  private async add(call: string, delta: number, operationId: string | undefined): Promise<[number, number, 1?]> {
    const publish = await this.publishCommand();
    const [latch, latchTtl, bound] = this.operationLatch(operationId);
    return this.counted(call, RELEASE_LATCH_TTL_MS, (redis, notAfter) => scripts(redis).rlock_semaphore_add(this.key, this.reservationKey, this.channel, this.kindKey, latch, delta, publish, this.context.clientId, latchTtl, notAfter), bound);
  }

  /**
   * Undoes the attempt whose latch is `latch`, sent at `sentAt`, whose outcome is unknown: its
   * permits go back if it ran, and it takes nothing if it runs later (undoAcquire-5.lua).
   * Tried again while Redis does not answer, as long as the attempt's latch can still say what
   * it did; past that, permits it took are lost (an outage of about a minute).
   */
  private async undoTake(latch: string, permits: number, sentAt: number): Promise<void> {
    const { context } = this;
    const publish = await this.publishCommand();
    const until = sentAt + RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS;
    for (;;) {
      try {
        await context.command('giveBack', (redis) => scripts(redis).rlock_semaphore_undoAcquire(this.key, this.reservationKey, this.channel, this.kindKey, latch, permits, publish, context.clientId, RELEASE_LATCH_TTL_MS), IDEMPOTENT);
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

  /** Takes `permits` within `waitTime`; resolves with the send time, undefined when the time ran out. */
  private async take(permits: number, waitTime: number, signal: AbortSignal | undefined): Promise<number | undefined> {
    const { context } = this;
    const callId = this.newId();
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
        entry.expectGrant(field);
      }
      // Its answer covers this client's parked waiters whose bound runs out meanwhile (one asks
      // per client, not each of them): a refusal records its bound below, a success wakes as
      // many as the permits it left free can serve.
      const marks = !reserving ? listening : undefined;
      marks?.asking(context.queueTimeout, permits);
      const sentAt = performance.now();
      // Each attempt has a latch of its own: a resent attempt that took answers "taken" again.
      const latch = this.requestLatch(`${field}.${number}`);
      // Cut short (its bound, an abort whatever its reason): `lateReply` gives back, not the catch below.
      let cut = false;
      const answer = await this.counted(
        'acquire',
        RELEASE_LATCH_TTL_MS,
        (redis, notAfter) => scripts(redis).rlock_semaphore_acquire(this.key, this.reservationKey, latch, this.kindKey, permits, field, listening !== undefined && mayReserve ? 1 : 0, context.queueTimeout, RELEASE_LATCH_TTL_MS, notAfter),
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
            if (lateStatus === 1) return this.add('release', permits, undefined);
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
      if (free !== undefined && free < 0 && listening) localHandoffOf(listening, context.clientId).suspend();
      else if (status === 1 || (free ?? -1) >= 0) context.pubsub.peek(this.channel)?.local?.resume(sentAt);
      if (status === 1) {
        // Permits left free that this client's parked waiters would sleep past: a waiter whose
        // bound ran out was covered by this ask (see `asking`), and no message says so. Only after
        // such a sleep: a release's message woke as many waiters as it freed (the others are on
        // their way), and a new caller asks only when none of its client's waiters is parked (or
        // for several permits), where a wake-up kept for a waiter in flight would cost an attempt.
        // Those are the client's other waiters: the taker, if joined, is one of refCount.
        const woken = context.pubsub.peek(this.channel);
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
      hold = await this.wait(callId, this.channel, attempt, waitTime, signal, {
        // The reservation's holder waits for its grant; the others may be handed permits by a
        // release of this client (see release()).
        park: (woken, ms, stops, deadline, debt) => {
          clock.parked();
          if (reserving) {
            return woken.untilGranted(field, ms, stops).then((grant) => {
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
      entry?.forgetGrant(field);
    }
    if (hold === undefined) return undefined;
    // Taken while the caller aborted or the client closed: give the permits back, leave nothing.
    const stopped = this.stoppedReason(signal);
    if (stopped !== undefined) {
      // Not longer than an attempt would wait (Redis frozen): it is given back when Redis answers.
      await settledWithinGrace(this.add('release', permits, undefined));
      throw stopped;
    }
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...this.event(callId), permits });
    return hold.sentAt;
  }
}
