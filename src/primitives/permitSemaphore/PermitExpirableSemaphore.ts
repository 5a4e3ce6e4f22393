import { outcomeOf, watchHold } from '../../core/holdScope';
import { diagnostics } from '../../diagnostics';
import { InvalidArgumentError, LockLostError, LockTimeoutError, PermitNotHeldError } from '../../errors';
import { subscriberCount, type PermitSemaphoreInfo } from '../../introspection';
import { kindKeyOf, permitChannelOf, permitClaimKeyOf, permitsKeyOf, RELEASE_LATCH_TTL_MS } from '../../names';
import type { LockContext } from '../../services/LockContext';
import { checkCount, checkOperationOptions, checkPermitId, checkPermitIds, checkPermitOptions, type ExpirablePermitOptions, type OperationOptions, type TryExpirablePermitOptions } from '../permitOptions';
import { checkTime } from '../../options';
import { PermitAcquire, permitNamed } from './PermitAcquire';
import { PermitRelease } from './PermitRelease';
import { PermitScope, permitScopeOf } from '../permitScopes';
import { permitScripts as scripts } from './permitSemaphoreScripts';
import { Primitive } from '../Primitive';

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
    const taken = await this.acquires.take(leaseTime, Infinity, signal);
    return taken!.id;
  }

  /** Takes a permit if it can within `waitTime` (default: one attempt); its id, or null. */
  async tryAcquire(options?: TryExpirablePermitOptions): Promise<string | null> {
    const { leaseTime, waitTime, signal } = checkPermitOptions(options, ['leaseTime', 'waitTime', 'signal']);
    this.context.assertOpen();
    return (await this.acquires.take(leaseTime, waitTime ?? 0, signal))?.id ?? null;
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
    const released = await this.releases.releaseEach(list);
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
      return (await this.releases.releaseEach(list)).filter(Boolean).length;
    }
    const id = checkPermitId(ids);
    this.context.assertOpen();
    return this.releases.releaseOne(id);
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
    const taken = await this.acquires.take(leaseTime, maxWait, signal);
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

  /** How this semaphore gives permits back (made on first use). */
  private get releases(): PermitRelease {
    return (this.releasesMade ??= new PermitRelease({ ...this.steps, permitsKey: this.permitsKey, channel: this.channel }));
  }

  private releasesMade: PermitRelease | undefined;

  /** How this semaphore takes permits, giving back through its releases (made on first use). */
  private get acquires(): PermitAcquire {
    return (this.acquiresMade ??= new PermitAcquire({
      ...this.steps,
      permitsKey: this.permitsKey,
      channel: this.channel,
      claimKey: this.claimKey,
      kindKey: this.kindKey,
      releases: this.releases,
    }));
  }

  private acquiresMade: PermitAcquire | undefined;
}
