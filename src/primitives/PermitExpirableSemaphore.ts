import { outcomeOf, watchHold } from '../core/holdScope';
import { refusedUntilFailover, whileRefused } from '../core/waitLoop';
import type { Hold } from '../services/Hold';
import { diagnostics } from '../diagnostics';
import { InvalidArgumentError, LockLostError, LockTimeoutError, PermitNotHeldError, RedisCommandError } from '../errors';
import { subscriberCount, type PermitSemaphoreInfo } from '../introspection';
import { kindKeyOf, permitChannelOf, permitClaimKeyOf, permitsKeyOf, RELEASE_LATCH_TTL_MS } from '../names';
import type { RenewalTarget } from '../services/ExpirationRenewal';
import type { CommandBound, LockContext } from '../services/LockContext';
import { type Parking, sleepAsCandidate } from '../services/LocalHandoff';
import { OUTCOME_UNKNOWN, settledWithinGrace } from '../services/bounds';
import type { ChannelEntry } from '../services/ChannelEntry';
import { LockOwner } from '../services/LockOwner';
import type { PublishCommand, ScriptedRedis } from '../services/scripts';
import { syncedAcquire } from '../services/syncedAcquire';
import { checkCount, checkOperationOptions, checkPermitId, checkPermitIds, checkPermitOptions, type ExpirablePermitOptions, type OperationOptions, type TryExpirablePermitOptions } from './permitOptions';
import { checkTime } from '../options';
import { PermitScope, permitScopeOf } from './permitScopes';
import { type Attempt, Primitive } from './Primitive';
import { standBackBound, starvingClock } from './Semaphore';

/** The scripts of src/lua/permitSemaphore/, as `defineCommand` adds them. */
interface PermitScripts {
  rlock_permitSemaphore_acquire(
    key: string,
    permitsKey: string,
    channel: string,
    claimKey: string,
    kindKey: string,
    id: string,
    leaseMs: number,
    publish: PublishCommand,
    clientId: string,
    claims: 0 | 1,
    claimMs: number,
  ): Promise<number | null>;
  rlock_permitSemaphore_release(key: string, permitsKey: string, channel: string, latch: string, id: string, publish: PublishCommand, releaser: string, latchTtlMs: number): Promise<[0 | 1, number]>;
  rlock_permitSemaphore_handoff(key: string, permitsKey: string, latch: string, id: string, newId: string, leaseMs: number, latchTtlMs: number, pipelined: 0 | 1): Promise<0 | 1 | 2 | 3>;
  rlock_permitSemaphore_updateLease(permitsKey: string, id: string, leaseMs: number): Promise<0 | 1>;
  rlock_permitSemaphore_available(key: string, permitsKey: string, kindKey: string): Promise<number>;
  rlock_permitSemaphore_trySetPermits(key: string, permitsKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, latchTtlMs: number): Promise<0 | 1>;
  rlock_permitSemaphore_add(key: string, permitsKey: string, channel: string, kindKey: string, latch: string, delta: number, publish: PublishCommand, latchTtlMs: number, notAfter: number): Promise<number>;
  rlock_permitSemaphore_inspect(key: string, permitsKey: string, claimKey: string, kindKey: string): Promise<[string | null, number, string[], string | null, number]>;
}

const scripts = (redis: ScriptedRedis): PermitScripts => redis as unknown as PermitScripts;

/**
 * How long a client's claim on the next free permit stands unless one of its waiters renews it
 * (each refused attempt of a waiter parked for STARVING_MS does): a claimant whose waiters
 * all gave up, or whose process stopped, keeps one permit from the others this long at most.
 */
const CLAIM_MS = 1_000;

/** Ids of the permits being waited for that the watchdog will keep (taken without `leaseTime`): a handoff to them may be pipelined (see handOver). */
const keptByWatchdog = new Set<string>();

/** The watchdog's renew script for permits (lua/permitSemaphore/renew.lua). */
const RENEW_COMMAND = 'rlock_permitSemaphore_renew';

/** How errors name permit `id` of semaphore `name` (see `LockLostError`). */
function permitNamed(id: string, name: string): string {
  return `permit ${id} of semaphore "${name}"`;
}

/** The watchdog's name for a permit it keeps (one function for every permit: nothing made per acquire). */
const describePermit = (target: RenewalTarget): string => permitNamed(target.field, target.name);

/**
 * Redisson's RPermitExpirableSemaphore: every permit has an id and a lease, kept in a zset
 * `rlock__permits:{<key>}` (id → expiry on the Redis server's clock) beside the total at
 * `<keyPrefix><name>`; a permit whose lease ran out is free again at once, for every reader.
 * Permits taken without `leaseTime` are kept by the client's watchdog (batched with the locks'
 * renewals) and reported lost like a lock (`lockLost`, `withPermit`'s signal); Redisson's never
 * expire.
 */
export class PermitExpirableSemaphore extends Primitive {
  private readonly permitsKey: string;
  private readonly channel: string;
  private readonly kindKey: string;
  private readonly claimKey: string;

  /** @internal Use `client.getPermitExpirableSemaphore(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
    this.permitsKey = permitsKeyOf(context.keyPrefix, this.key);
    this.channel = permitChannelOf(context.keyPrefix, this.key);
    this.kindKey = kindKeyOf(context.keyPrefix, this.key);
    this.claimKey = permitClaimKeyOf(context.keyPrefix, this.key);
  }

  /** Sets the total of permits if it was never set; true when it did. */
  async trySetPermits(permits: number): Promise<boolean> {
    checkCount('permits', permits, 0);
    this.context.assertOpen();
    const publish = await this.publishCommand();
    const latch = this.requestLatch(); // a resend after a lost reply answers what the first run did
    return (await this.context.command('trySetPermits', (redis) => scripts(redis).rlock_permitSemaphore_trySetPermits(this.key, this.permitsKey, this.channel, this.kindKey, latch, permits, publish, RELEASE_LATCH_TTL_MS))) === 1;
  }

  /** Changes the total of permits by `delta` (may be negative); with `operationId`, once per id (see OperationOptions). */
  async addPermits(delta: number, options?: OperationOptions): Promise<void> {
    checkCount('delta', delta, -Infinity);
    const operationId = checkOperationOptions(options);
    this.context.assertOpen();
    // A cut: no pipelined handoff here until one is answered "handed over" (see handOver); the
    // other clients learn it from the script's message.
    if (delta < 0) this.context.pubsub.peek(this.channel)?.local?.suspend();
    const publish = await this.publishCommand();
    const [latch, latchTtl, bound] = this.operationLatch(operationId); // a resend after a lost reply, or a retry with the id, changes nothing again
    await this.counted('addPermits', RELEASE_LATCH_TTL_MS, (redis, notAfter) => scripts(redis).rlock_permitSemaphore_add(this.key, this.permitsKey, this.channel, this.kindKey, latch, delta, publish, latchTtl, notAfter), bound);
  }

  /** Waits as long as it takes (or until `signal` aborts) and takes a permit; resolves with its id. */
  async acquire(options?: ExpirablePermitOptions): Promise<string> {
    const { leaseTime, signal } = checkPermitOptions(options, ['leaseTime', 'signal']);
    this.context.assertOpen();
    const taken = await this.take(leaseTime, Infinity, signal);
    return taken!.id;
  }

  /** Takes a permit if it can within `waitTime` (default: one attempt); its id, or null. */
  async tryAcquire(options?: TryExpirablePermitOptions): Promise<string | null> {
    const { leaseTime, waitTime, signal } = checkPermitOptions(options, ['leaseTime', 'waitTime', 'signal']);
    this.context.assertOpen();
    return (await this.take(leaseTime, waitTime ?? 0, signal))?.id ?? null;
  }

  /**
   * Gives permit `id` back; throws `PermitNotHeldError` when it is not held (unknown, released,
   * expired). Given a list of ids, gives back every one held, then throws `PermitNotHeldError`
   * naming those that were not (`permitIds`), if any.
   */
  async release(ids: string | readonly string[]): Promise<void> {
    if (!Array.isArray(ids)) {
      if (!(await this.tryRelease(ids as string))) throw new PermitNotHeldError(this.name, ids as string);
      return;
    }
    const list = checkPermitIds(ids);
    this.context.assertOpen();
    const released = await this.releaseEach(list);
    const notHeld = list.filter((_, i) => !released[i]);
    if (notHeld.length > 0) throw new PermitNotHeldError(this.name, notHeld[0]!, notHeld, list.length);
  }

  /**
   * Gives permit `id` back; false when it was not held (an expired permit is not counted twice).
   * Given a list of ids, gives back every one held and resolves with how many were.
   */
  tryRelease(id: string): Promise<boolean>;
  tryRelease(ids: readonly string[]): Promise<number>;
  async tryRelease(ids: string | readonly string[]): Promise<boolean | number> {
    if (Array.isArray(ids)) {
      const list = checkPermitIds(ids);
      this.context.assertOpen();
      return (await this.releaseEach(list)).filter(Boolean).length;
    }
    const id = checkPermitId(ids);
    this.context.assertOpen();
    return this.releaseOne(id);
  }

  /**
   * Gives back each of `ids` at once, each as `tryRelease(id)` would; whether each was held. A
   * failure (Redis's) is thrown once every release has settled, so that none is left running.
   */
  private async releaseEach(ids: readonly string[]): Promise<boolean[]> {
    const results = await Promise.allSettled(ids.map((id) => this.releaseOne(id)));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    return results.map((result) => (result as PromiseFulfilledResult<boolean>).value);
  }

  /** tryRelease(id), checked. */
  private async releaseOne(id: string): Promise<boolean> {
    const released = await this.releasePermit(id);
    // A permit not held is not a release: one the watchdog kept was reported lost instead (one
    // `acquired`, then one `released` or one `lost`, so that a holds gauge adds up).
    if (released && diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.event(id), released });
    return released;
  }

  /**
   * Gives permit `id` back and says whether it was held, telling no diagnostics subscriber: what
   * `tryRelease` does, and what gives back a permit its caller never had (handed to a waiter that
   * had stopped, or taken as its signal aborted), of which no `acquired` was published either.
   */
  private async releasePermit(id: string): Promise<boolean> {
    // Stop renewing first, or a renewal racing the release would report the permit lost. Until
    // `kept.lostAt` the permit is certainly still in Redis.
    const kept = this.context.renewal.remove(this.key, id);
    // One latch per release request (see release-4.lua): a resend answers what the first run did.
    const latch = this.requestLatch();
    const handed = await this.handOver(id, kept?.lostAt, latch);
    let result = handed?.result;
    if (result === undefined) {
      const publish = await this.publishCommand();
      // Sent again under its latch while a slot in flux refuses it (see whileRefused).
      const [released, reached] = await whileRefused(this.context, () =>
        this.context.command('release', (redis) => scripts(redis).rlock_permitSemaphore_release(this.key, this.permitsKey, this.channel, latch, id, publish, this.context.clientId, RELEASE_LATCH_TTL_MS)),
      );
      result = released;
      if (handed?.yielded && reached <= 1) {
        // No other client waits: no turn to give; our waiters, which the message may have found
        // still standing back, try again now.
        const entry = this.context.pubsub.peek(this.channel);
        entry?.local?.stopYielding();
        entry?.wakeOne();
      }
    }
    // The latch answers a resend, so 0 means taken away before the release ran: a permit the
    // watchdog kept is reported lost, as a renewal would have. 2: released, not handed over (a
    // cut); 3: handed over beyond a cut.
    const released = result !== undefined && result !== 0;
    if (!released && kept) this.context.renewal.reportLost(this.key, id, 'its release found it no longer held', kept);
    return released;
  }

  /**
   * A waiter of this client parked on this semaphore takes the permit over in one script call
   * (no release message, no attempt), at most MAX_LOCAL_HANDOFFS in a row and for at most
   * MAX_LOCAL_RUN_MS; then the permit goes back to Redis and this client yields its turn (see
   * Semaphore.release). Undefined result: no handoff, release as usual.
   *
   * Pipelined when the released permit is kept by the watchdog with more than half a lease
   * certainly left (`deadline`) and the waiter's will be too: the waiter holds from the send of
   * the script, without waiting for its reply. The script cannot then find the permit gone
   * unless Redis lost it; if it does, the waiter's permit is reported lost at once. Its own
   * commands go after the script on the same connection, and should the script never run (a
   * dropped connection), the released permit still fills the slot in Redis for over half a
   * lease, longer than the watchdog takes (a third of one) to find the waiter's permit missing.
   */
  private async handOver(id: string, deadline: number | undefined, latch: string): Promise<{ result?: 0 | 1 | 2 | 3; yielded: boolean } | undefined> {
    const local = this.context.pubsub.peek(this.channel)?.local;
    if (!local?.hasCandidates) {
      local?.endRun();
      return undefined;
    }
    if (local.runIsOver) {
      local.yieldTurn();
      return { yielded: true };
    }
    const next = local.claimFirst();
    if (!next) return undefined;
    const sentAt = performance.now();
    const waiter = next.candidate.field;
    // Not after a cut of the total (a negative addPermits), which the script may answer by
    // refusing the handoff: the waiter would have started on a permit it never got.
    const pipelined = !local.suspended && deadline !== undefined && deadline - sentAt > this.context.watchdogTimeout / 2 && keptByWatchdog.has(waiter);
    // Told from the script's own reply, not the call's: close() settles the call at once, and a
    // waiter that close() woke must still learn that the permit went to it, to give it back.
    let sent = false;
    // Sent again under its latch while Redis refuses it as a release is (see whileRefused: before,
    // the release failed, the permit stayed held until its lease ran out, and the claimed waiter
    // tried again for nothing). A refusal is not an outcome: the waiter is told the last one.
    let refused: unknown;
    const call = whileRefused(this.context, () =>
      this.context.command('release', async (redis) => {
        sent = true;
        refused = undefined;
        let reply: 0 | 1 | 2 | 3 | undefined;
        try {
          reply = await scripts(redis).rlock_permitSemaphore_handoff(this.key, this.permitsKey, latch, id, waiter, next.candidate.lease, RELEASE_LATCH_TTL_MS, pipelined ? 1 : 0);
        } catch (error) {
          refused = error;
          throw error;
        } finally {
          // The waiter holds the permit from the send of this call on; otherwise it tries again.
          if (!pipelined && !refusedAsRelease(refused)) next.deliver(reply === 1 ? { sentAt } : undefined);
        }
        return reply;
      }),
    );
    // Until the script runs, only the released permit fills the slot in Redis, and only until
    // `deadline` for certain (its last renewal's): should the script never run (the link went
    // silent), the waiter must stop by then, not a full lease after the handoff.
    if (pipelined) next.deliver({ sentAt, expiresAt: deadline });
    let result: 0 | 1 | 2 | 3 | undefined;
    try {
      result = await call;
    } catch (error) {
      // Never sent (no connection, closed), or refused to the end: it tries again.
      if (!pipelined && (!sent || refusedAsRelease(refused))) next.deliver(undefined);
      throw error;
    }
    if (pipelined && result === 0) this.context.renewal.reportLost(this.key, waiter, 'the permit handed over to it was no longer in Redis');
    if (result === 1 || result === 3) local.handedOver();
    // 2 (refused) or 3 (handed over, pipelined, beyond the total): the total was cut and this
    // client missed the cut's message (it subscribed later, or it came during a reconnect).
    if (result === 2 || result === 3) local.suspend();
    else if (result === 1) local.resume(sentAt); // the total has room for every permit held
    return { result, yielded: false };
  }

  /**
   * Sets permit `id`'s lease to `leaseTime` ms from now (Redis time); the watchdog stops keeping
   * it. False when the permit is not held. When the call fails, the watchdog keeps the permit
   * as before (the new lease may or may not have reached Redis).
   */
  async updateLeaseTime(id: string, leaseTime: number): Promise<boolean> {
    checkPermitId(id);
    const lease = checkTime('leaseTime', leaseTime, 1);
    if (lease === undefined) throw new InvalidArgumentError('leaseTime', 'is required');
    this.context.assertOpen();
    // Stopped first: a renewal racing the call would put the watchdog's lease back over the new one.
    const removed = this.context.renewal.remove(this.key, id);
    const scope = permitScopeOf(this.key, id);
    // Reported once: by the overdue timer or by the reply, and then never put back on the watchdog.
    let reported = false;
    const lose = (reason: string): void => {
      if (reported || scope?.told) return;
      reported = true;
      if (removed && this.context.renewal.reportLost(this.key, id, reason, removed)) {
        if (scope) scope.told = true;
      } else scope?.lose(reason);
    };
    // Nothing renews the permit while the call is out, and its old lease runs on: unanswered by
    // the time that lease may end, the permit is lost as far as its holder can tell.
    const overdue = removed && setTimeout(() => lose('its lease update got no answer before its lease could run out'), Math.max(0, removed.lostAt - performance.now()));
    if (overdue) overdue.unref();
    const sentAt = performance.now();
    try {
      const updated = (await this.context.command('updateLeaseTime', (redis) => scripts(redis).rlock_permitSemaphore_updateLease(this.permitsKey, id, lease))) === 1;
      if (!updated) lose('its lease update found the permit no longer held');
      else if (!reported) scope?.lease(sentAt, lease);
      return updated;
    } catch (error) {
      // Else a permit whose new lease never reached Redis ran out at its old one, unrenewed and unreported.
      if (removed && !reported) this.context.renewal.restore(removed);
      throw error;
    } finally {
      clearTimeout(overdue);
    }
  }

  /** Free permits now, counting those whose lease ran out as free (read-only; Redis time). */
  async availablePermits(): Promise<number> {
    this.context.assertOpen();
    return this.context.command('availablePermits', (redis) => scripts(redis).rlock_permitSemaphore_available(this.key, this.permitsKey, this.kindKey));
  }

  /** The total, the free permits, every permit on lease with its remaining lease (Redis time), the claim on the next free permit, and how many clients wait. */
  async inspect(): Promise<PermitSemaphoreInfo> {
    this.context.assertOpen();
    const sharded = (await this.publishCommand()) === 'spublish';
    return this.context.command('inspect', async (redis) => {
      const [total, now, flat, claimant, claimTtl] = await scripts(redis).rlock_permitSemaphore_inspect(this.key, this.permitsKey, this.claimKey, this.kindKey);
      const permits: PermitSemaphoreInfo['permits'] = [];
      for (let i = 0; i < flat.length; i += 2) permits.push({ id: flat[i]!, expiresInMs: Number(flat[i + 1]) - now });
      const totalPermits = total === null ? null : Number(total);
      return {
        name: this.name,
        key: this.key,
        totalPermits,
        availablePermits: (totalPermits ?? 0) - permits.length,
        permits,
        claim: claimant === null ? null : { clientId: claimant, expiresInMs: claimTtl },
        waitingClients: await subscriberCount(redis, this.channel, sharded),
      };
    });
  }

  /**
   * Runs `fn` holding a permit and gives it back in `finally`. `fn`'s signal aborts when the
   * permit is lost (the watchdog finds it gone, or its `leaseTime` runs out) or `options.signal`
   * aborts; a permit lost while `fn` ran makes `withPermit` reject with `LockLostError`.
   */
  async withPermit<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: TryExpirablePermitOptions): Promise<T> {
    const { leaseTime, waitTime, signal } = checkPermitOptions(options, ['leaseTime', 'waitTime', 'signal']);
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    this.context.assertOpen();
    const maxWait = waitTime ?? Infinity;
    const taken = await this.take(leaseTime, maxWait, signal);
    if (!taken) throw new LockTimeoutError(this.name, maxWait, `a permit of semaphore "${this.name}"`);
    const scope = new AbortController();
    // Its lease, if it has one (now or after an updateLeaseTime), ends the scope; the watchdog's loss signal otherwise.
    const what = permitNamed(taken.id, this.name);
    const permit = new PermitScope(this.key, taken.id, this.name, scope, what);
    if (leaseTime !== undefined) permit.lease(taken.sentAt, leaseTime);
    const stopWatching = watchHold(scope, [signal, this.context.renewal.lostSignal(this.key, taken.id)]);
    const outcome = await outcomeOf(
      () => fn(scope.signal),
      () => {
        stopWatching();
        permit.stop();
      },
    );
    const lost = scope.signal.reason instanceof LockLostError ? scope.signal.reason : undefined;
    // After a loss the permit is gone already: tryRelease answers false, which is no news.
    const released = this.tryRelease(taken.id);
    // A permit with a lease of its own that ran out: no watchdog reported it, so its loss is said
    // here (one `acquired`, then one `released` or one `lost`).
    const toldIfLost = (gaveBack: boolean | undefined): void => {
      if (gaveBack === false && permit.leased && !permit.told && diagnostics.lost.hasSubscribers) {
        diagnostics.lost.publish({ ...this.event(taken.id), holds: 1, error: lost ?? new LockLostError(this.name, 'its release found it no longer held', what) });
      }
    };
    if ('error' in outcome) {
      toldIfLost(await released.catch(() => undefined));
      throw outcome.error;
    }
    const gaveBack = await released;
    toldIfLost(gaveBack);
    if (lost) throw lost;
    // Taken away without a renewal noticing (Redis lost it, its lease ran out): a loss all the same.
    if (!gaveBack) throw new LockLostError(this.name, 'its release found it no longer held', what);
    return outcome.value;
  }

  /**
   * The acquire under `syncReplicas` (see syncedAcquire), Redisson #4097: a permit the replicas
   * did not acknowledge is given back (quietly: nobody was told of it) and the attempt counts as
   * refused for the sync timeout. Answers as the acquire script: null when taken, else a TTL.
   */
  private async acquireSynced(sync: { replicas: number; timeout: number }, id: string, args: readonly (string | number)[], bound: CommandBound): Promise<number | null> {
    const { reply, confirmed, waitRefused } = await syncedAcquire(this.context, sync, 'rlock_permitSemaphore_acquire', args, bound);
    if (reply !== null || confirmed) return reply as number | null;
    await this.releasePermit(id).catch(() => undefined);
    if (waitRefused) throw waitRefused;
    return sync.timeout;
  }

  /** Takes a permit within `waitTime`: its id and send time, or undefined when the time ran out. */
  private async take(leaseTime: number | undefined, waitTime: number, signal: AbortSignal | undefined): Promise<{ id: string; sentAt: number } | undefined> {
    const { context } = this;
    // The permit id is the owner's id: a lost permit is reported like a lost lock of that owner.
    const owner = new LockOwner();
    const id = owner.id;
    const lease = leaseTime ?? context.watchdogTimeout;
    const publish = await this.publishCommand();
    const sync = context.syncReplicas;
    let attempts = 0;
    // A waiter parked for STARVING_MS claims the next free permit for its client (see
    // acquire-5.lua), as the plain semaphore's waiters reserve: a release wakes a waiter in
    // every client, and the client always woken last would otherwise starve.
    const clock = starvingClock();
    // One for the whole wait: it keeps the waiter's place in its client's line from sleep to sleep.
    const parking: Parking = { field: id, lease, giveBack: () => this.releasePermit(id) };
    const attempt = async (listening: ChannelEntry | undefined, bound: CommandBound): Promise<Attempt> => {
      // Only the first: a waiter woken by a message must try, or the wake-up is lost.
      const first = attempts++ === 0;
      // Stands back while its client yields, or joins its client's parked waiters (see standBackBound).
      const standBack = listening && waitTime > 0 ? standBackBound(listening, 1, first) : undefined;
      if (standBack !== undefined) return { held: false, ttl: standBack };
      const sentAt = performance.now();
      const claims = listening && clock.starving() ? 1 : 0;
      const args = [this.key, this.permitsKey, this.channel, this.claimKey, this.kindKey, id, lease, publish, context.clientId, claims, CLAIM_MS] as const;
      // Answered after the wait ended (Redis frozen, a silent connection): a permit taken for the
      // caller that is gone goes back (a number is a refusal's TTL).
      const lateBound: CommandBound = {
        ...bound,
        lateReply: (late) => (late === null || late === OUTCOME_UNKNOWN ? this.releasePermit(id) : undefined),
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
      hold = await this.wait(id, this.channel, attempt, waitTime, signal, {
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
      context.renewal.add({ name: this.name, key: this.key, field: id, owner, renewCommand: RENEW_COMMAND, renewKeys: [this.permitsKey], describe: describePermit }, sentAt, expiresAt);
    }
    const stopped = this.stoppedReason(signal);
    if (stopped !== undefined) {
      // Not longer than an attempt would wait (Redis frozen): it is given back when Redis answers.
      await settledWithinGrace(this.releasePermit(id));
      throw stopped;
    }
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...this.event(id), holds: 1, leaseTime });
    return { id, sentAt };
  }
}

/** Whether ioredis's `error` for a handoff is a refusal that `whileRefused` sends it again after (what it says of the call's RedisCommandError). */
function refusedAsRelease(error: unknown): boolean {
  return error !== undefined && refusedUntilFailover(new RedisCommandError('release', error));
}
