import type { ChainableCommander } from 'ioredis';
import { watchHold } from '../../core/holdScope';
import { InvalidArgumentError, LockTimeoutError } from '../../errors';
import { KIND_NAMES, type NameKind, subscriberCount, type SemaphoreInfo } from '../../introspection';
import { kindKeyOf, RELEASE_LATCH_TTL_MS, reservationKeyOf, semaphoreChannelOf } from '../../names';
import type { LockContext } from '../../services/LockContext';
import { readValues } from '../../services/database';
import type { ScriptedRedis } from '../../services/scripts';
import { checkCount, checkOperationOptions, checkPermitOptions, type OperationOptions, type PermitOptions, type ReleaseOptions, type TryPermitOptions } from '../permitOptions';
import { Primitive } from '../Primitive';
import { SemaphoreAcquire } from './SemaphoreAcquire';
import { SemaphoreRelease } from './SemaphoreRelease';
import { semaphoreScripts as scripts } from './semaphoreScripts';

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
    await this.acquires.take(permits, Infinity, signal);
  }

  /** Takes `permits` permits if it can within `waitTime` (default: one attempt); true when it did. */
  async tryAcquire(options?: TryPermitOptions): Promise<boolean> {
    const { permits, waitTime, signal } = checkPermitOptions(options, ['permits', 'waitTime', 'signal']);
    this.context.assertOpen();
    return (await this.acquires.take(permits, waitTime ?? 0, signal)) !== undefined;
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
    await this.releases.giveBackTold(permits, operationId);
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
    if ((await this.acquires.take(permits, maxWait, signal)) === undefined) throw new LockTimeoutError(this.name, maxWait, permits === 1 ? `a permit of semaphore "${this.name}"` : `semaphore "${this.name}" (${permits} permits at once)`);
    // The callback is told when its client closes, as every scope is: its permits (no lease) go
    // back only if its give-back goes out before the connection does, so it had best stop now.
    const scope = new AbortController();
    const stopWatching = watchHold(scope, [signal, this.context.closedSignal]);
    try {
      return await fn(scope.signal);
    } finally {
      stopWatching();
      await this.releases.giveBackTold(permits);
    }
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

  /** How this semaphore takes permits, over its own steps (made on first use). */
  private get acquires(): SemaphoreAcquire {
    return (this.acquiresMade ??= new SemaphoreAcquire({
      ...this.steps,
      channel: this.channel,
      reservationKey: this.reservationKey,
      kindKey: this.kindKey,
      add: (call, delta, operationId) => this.add(call, delta, operationId),
    }));
  }

  private acquiresMade: SemaphoreAcquire | undefined;

  /** How this semaphore gives permits back (made on first use). */
  private get releases(): SemaphoreRelease {
    return (this.releasesMade ??= new SemaphoreRelease({
      ...this.steps,
      channel: this.channel,
      add: (call, delta, operationId) => this.add(call, delta, operationId),
    }));
  }

  private releasesMade: SemaphoreRelease | undefined;
}

