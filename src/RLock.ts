import { nanoid } from 'nanoid';
import { InvalidArgumentError, LockLostError, LockTimeoutError, LockUsageError, NotLockOwnerError, RedisCommandError } from './errors';
import type { LockContext } from './LockContext';
import { LockOwner, runAsOwner, scopedOwner } from './LockOwner';
import { diagnostics } from './diagnostics';
import { inspectLock, type LockInfo } from './introspection';
import { channelOf, latchPrefixOf, UNLOCK_MESSAGE } from './names';
import { checkLockOptions, checkName, type LockOptions, type TryLockOptions, type WithLockOptions } from './options';

/**
 * How long a release latch outlives its call, in ms. It only matters when ioredis resends a
 * release whose reply was lost, which happens on reconnect; a successful reply deletes it.
 */
const RELEASE_LATCH_TTL_MS = 60_000;

/** How long a waiter pauses after Redis refused an attempt during a failover. */
const TRANSIENT_RETRY_MS = 200;

/**
 * A reentrant distributed lock, Redisson's RLock: a Redis hash `<clientId>:<ownerId> → holds`.
 * Outside `withLock` the handle is its own owner and not reentrant; inside `withLock(fn)`, every
 * handle of the same client and name acts as the scope's owner, so nested holds count up.
 */
export class RLock {
  readonly name: string;
  /** The Redis key of the lock hash: `<keyPrefix><name>`. */
  readonly key: string;
  private ownOwner: LockOwner | undefined;

  /** @internal Use `client.getLock(name)`. */
  constructor(
    private readonly context: LockContext,
    name: unknown,
  ) {
    this.name = checkName(name, context.keyPrefix);
    this.key = context.keyPrefix + this.name;
  }

  /** One lock of one client, for the owner scopes: `<clientId>\n<key>`. */
  private get identity(): string {
    return `${this.context.clientId}\n${this.key}`;
  }

  /** Waits as long as it takes (or until `signal` aborts) and takes the lock. */
  async lock(options?: LockOptions): Promise<void> {
    const { leaseTime, signal } = checkLockOptions(options, false);
    this.context.assertOpen();
    await this.acquire(this.ownerToAcquire(), leaseTime, Infinity, signal);
  }

  /** Takes the lock if it can within `waitTime` (default: one attempt); true when it did. */
  async tryLock(options?: TryLockOptions): Promise<boolean> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    this.context.assertOpen();
    return (await this.acquire(this.ownerToAcquire(), leaseTime, waitTime ?? 0, signal)) !== undefined;
  }

  /** Gives back one hold; throws `NotLockOwnerError` when the current owner holds none. */
  async unlock(): Promise<void> {
    this.context.assertOpen();
    const owner = this.currentOwner();
    // A handle's own owner never holds more than once, so any further hold Redis counts comes
    // from an acquire that ioredis resent after a reconnect: give it back too.
    await (owner === this.handleOwner ? this.releaseAll(owner) : this.release(owner));
  }

  /**
   * Runs `fn` holding the lock and unlocks in `finally`. `fn`'s signal aborts when the lock is
   * lost (watchdog finds it gone, or its `leaseTime` runs out) or when `options.signal` aborts;
   * a lock lost while `fn` ran makes `withLock` reject with `LockLostError` even if `fn` resolved.
   */
  async withLock<T>(fn: (signal: AbortSignal) => T | Promise<T>, options?: WithLockOptions): Promise<T> {
    const { leaseTime, waitTime, signal } = checkLockOptions(options, true);
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    this.context.assertOpen();
    const outer = scopedOwner(this.identity);
    const owner = outer ?? new LockOwner();
    const maxWait = waitTime ?? Infinity;
    const sentAt = await this.acquire(owner, leaseTime, maxWait, signal);
    if (sentAt === undefined) throw new LockTimeoutError(this.name, maxWait);

    const scope = new AbortController();
    const stopWatching = this.watchScope(owner, leaseTime, signal, scope, sentAt);
    let outcome: { value: T } | { error: unknown };
    try {
      const run = (): T | Promise<T> => fn(scope.signal);
      outcome = { value: await (outer ? run() : runAsOwner(this.identity, owner, run)) };
    } catch (error) {
      outcome = { error };
    } finally {
      stopWatching();
    }
    const lost = scope.signal.reason instanceof LockLostError ? scope.signal.reason : undefined;
    let releaseError: unknown;
    try {
      await (outer ? this.release(owner) : this.releaseAll(owner));
    } catch (error) {
      // After a loss, "not the owner" is the expected answer, not news.
      if (!(lost && error instanceof NotLockOwnerError)) releaseError = error;
    }
    if ('error' in outcome) throw outcome.error;
    if (lost) throw lost;
    if (releaseError !== undefined) throw releaseError;
    return outcome.value;
  }

  /** Deletes the lock whoever holds it and wakes waiters at once; true when there was one. */
  async forceUnlock(): Promise<boolean> {
    this.context.assertOpen();
    const { key } = this;
    const publish = await this.context.publishCommand();
    const holders = await this.context.command('forceUnlock', (redis) => redis.rlock_forceUnlock(key, channelOf(this.context.keyPrefix, key), UNLOCK_MESSAGE, publish));
    if (diagnostics.forceUnlocked.hasSubscribers) {
      diagnostics.forceUnlocked.publish({ name: this.name, key, clientId: this.context.clientId, removed: holders.length > 0, holders });
    }
    return holders.length > 0;
  }

  /**
   * Who holds the lock (clientId, ownerId, hold count, and the holding client's `name` when its
   * connection is still there), its remaining TTL, and how many clients wait on it: HGETALL,
   * PTTL and PUBSUB NUMSUB in one round trip, then CLIENT LIST for the names.
   */
  async inspect(): Promise<LockInfo> {
    this.context.assertOpen();
    const sharded = (await this.context.publishCommand()) === 'spublish';
    return this.context.command('inspect', (redis) => inspectLock(redis, this.name, this.key, sharded));
  }

  /** Holds of the current owner (0 when none). */
  async getHoldCount(): Promise<number> {
    this.context.assertOpen();
    const field = this.field(this.currentOwner());
    const count = await this.context.command('getHoldCount', (redis) => redis.hget(this.key, field));
    return count === null ? 0 : Number(count);
  }

  /** Whether anyone holds the lock. */
  async isLocked(): Promise<boolean> {
    this.context.assertOpen();
    return (await this.context.command('isLocked', (redis) => redis.exists(this.key))) === 1;
  }

  async isHeldByCurrentOwner(): Promise<boolean> {
    this.context.assertOpen();
    const field = this.field(this.currentOwner());
    return (await this.context.command('isHeldByCurrentOwner', (redis) => redis.hexists(this.key, field))) === 1;
  }

  /** Remaining lease in ms; -2 when there is no lock, -1 when it never expires (as PTTL). */
  async remainTimeToLive(): Promise<number> {
    this.context.assertOpen();
    return this.context.command('remainTimeToLive', (redis) => redis.pttl(this.key));
  }

  /** The common part of every diagnostics message. */
  private event(owner: LockOwner): { name: string; key: string; clientId: string; ownerId: string } {
    return { name: this.name, key: this.key, clientId: this.context.clientId, ownerId: owner.id };
  }

  /** The handle's own owner, made on first use (a process may keep many handles). */
  private get handleOwner(): LockOwner {
    return (this.ownOwner ??= new LockOwner());
  }

  private field(owner: LockOwner): string {
    return `${this.context.clientId}:${owner.id}`;
  }

  private currentOwner(): LockOwner {
    return scopedOwner(this.identity) ?? this.handleOwner;
  }

  /**
   * A handle outside `withLock` refuses to enter twice: a second `lock()` could as well come from
   * another task sharing the handle, and letting it in would put two tasks in the critical section.
   */
  private ownerToAcquire(): LockOwner {
    const scoped = scopedOwner(this.identity);
    if (scoped) return scoped;
    const owner = this.handleOwner;
    if (owner.holds > 0 || owner.pending > 0) {
      throw new LockUsageError(
        `this handle of lock "${this.name}" already ${owner.holds > 0 ? 'holds it' : 'is acquiring it'}; ` +
          'a handle is not reentrant outside withLock, so two tasks sharing one cannot both enter. ' +
          'Use client.getLock() per task, or withLock() for reentrant sections.',
      );
    }
    return owner;
  }

  /**
   * The waiter loop: try; subscribe; try again; sleep until a release message or the pttl; repeat.
   * Resolves with when (performance.now()) the successful attempt was sent, or undefined on timeout.
   */
  private async acquire(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal): Promise<number | undefined> {
    signal?.throwIfAborted();
    owner.pending++;
    try {
      const deadline = performance.now() + waitTime;
      // Already subscribed by other waiters of this client: every release from now on reaches us.
      const listening = this.context.pubsub.peek(channelOf(this.context.keyPrefix, this.key));
      const alreadyListening = listening?.confirmed === true;
      let sentAt = performance.now();
      // A call that may wait rides out a failover (see attemptWhileWaiting); one that may not, reports it.
      let ttl = waitTime > 0 ? await this.attemptWhileWaiting(owner, leaseTime) : await this.attempt(owner, leaseTime);
      if (ttl === null) return await this.acquired(owner, leaseTime, sentAt, signal ? [signal] : []);
      if (waitTime <= 0) return undefined;

      // Stopped by the caller's signal or by client.close(); no controller of its own, as a
      // process may park 10 000s of waiters.
      const stops = signal ? [signal, this.context.closedSignal] : [this.context.closedSignal];
      const untrack = this.context.trackWaiter();
      const channel = channelOf(this.context.keyPrefix, this.key);
      const entry = this.context.pubsub.join(channel);
      const waitFrom = performance.now();
      let got = false;
      if (diagnostics.waitStart.hasSubscribers) diagnostics.waitStart.publish(this.event(owner));
      try {
        // Retrying only once subscribed closes the race with a release published before that;
        // if the subscription was already there (the same entry, confirmed) before our first
        // attempt, no release can have slipped by and the retry is skipped.
        if (alreadyListening && entry === listening) {
          await entry.untilReleased(Math.min(ttl < 0 ? Infinity : ttl, deadline - performance.now()), stops);
        } else {
          await entry.untilSubscribed(Math.min(ttl < 0 ? Infinity : ttl, deadline - performance.now()), stops);
        }
        for (;;) {
          sentAt = performance.now();
          ttl = await this.attemptWhileWaiting(owner, leaseTime);
          if (ttl === null) {
            const result = await this.acquired(owner, leaseTime, sentAt, stops);
            got = true;
            return result;
          }
          const remaining = deadline - performance.now();
          if (remaining <= 0) return undefined;
          // A lost message costs at most the holder's pttl, never liveness.
          await entry.untilReleased(Math.min(ttl < 0 ? Infinity : ttl, remaining), stops);
        }
      } finally {
        this.context.pubsub.leave(channel, entry);
        untrack();
        if (diagnostics.waitEnd.hasSubscribers) {
          diagnostics.waitEnd.publish({ ...this.event(owner), durationMs: performance.now() - waitFrom, acquired: got });
        }
      }
    } finally {
      owner.pending--;
    }
  }

  /**
   * An attempt of a waiter: a refusal Redis will not repeat for long (`RedisCommandError.transient`:
   * failover, loading, a slot in flux; refused, not run) does not end the wait; it is retried
   * after a short pause, within the waitTime.
   */
  private async attemptWhileWaiting(owner: LockOwner, leaseTime: number | undefined): Promise<number | null> {
    try {
      return await this.attempt(owner, leaseTime);
    } catch (error) {
      if (error instanceof RedisCommandError && error.transient) return TRANSIENT_RETRY_MS;
      throw error;
    }
  }

  private async attempt(owner: LockOwner, leaseTime: number | undefined): Promise<number | null> {
    const lease = leaseTime ?? this.context.watchdogTimeout;
    const field = this.field(owner);
    const sync = this.context.syncReplicas;
    if (sync) return this.syncedAttempt(owner, lease, field, sync);
    return this.context.command('acquire', (redis) => redis.rlock_acquire(this.key, lease, field));
  }

  /**
   * Synced acquire: the lock counts only once enough replicas have it, or a failover could hand
   * it to a second owner. WAIT vouches only for the writes of the connection it runs on, so it
   * rides in the acquire's pipeline: ioredis sends a pipeline down one connection (on Cluster,
   * to the master of the key's slot, and its node connections never reconnect); on a single
   * connection a reconnect in between (the epoch moved) could have resent WAIT alone, so that
   * counts as unconfirmed. Unconfirmed: give the hold back and report a failed attempt that may
   * be retried after the sync timeout.
   */
  private async syncedAttempt(owner: LockOwner, lease: number, field: string, sync: { replicas: number; timeout: number }): Promise<number | null> {
    const epoch = this.context.connectionEpoch();
    const [ttl, acked] = await this.context.command('acquire', async (redis) => {
      const replies = await redis.pipeline().rlock_acquire(this.key, lease, field).wait(sync.replicas, sync.timeout).exec();
      const [acquire, wait] = replies ?? [];
      if (!acquire || acquire[0]) throw acquire?.[0] ?? new Error('the pipeline was discarded');
      // A failed WAIT after a successful acquire is an unconfirmed hold, not a failed call.
      return [acquire[1] as number | null, wait && !wait[0] ? (wait[1] as number) : -1] as const;
    });
    if (ttl !== null) return ttl;
    if (acked >= sync.replicas && epoch === this.context.connectionEpoch()) return null;
    owner.holds++;
    await this.release(owner).catch(() => undefined);
    return sync.timeout;
  }

  /** Books a successful attempt; one that raced an abort is given back, leaving nothing behind. */
  private async acquired(owner: LockOwner, leaseTime: number | undefined, sentAt: number, stops: AbortSignal[]): Promise<number> {
    owner.holds++;
    if (diagnostics.acquired.hasSubscribers) diagnostics.acquired.publish({ ...this.event(owner), holds: owner.holds, leaseTime });
    if (leaseTime === undefined) {
      this.context.renewal.add({ name: this.name, key: this.key, field: this.field(owner), owner }, sentAt);
    }
    const stopped = stops.find((stop) => stop.aborted);
    if (stopped) {
      await this.release(owner).catch(() => undefined);
      throw stopped.reason;
    }
    return sentAt;
  }

  /** Gives back one hold; returns whether the lock was released entirely. */
  private async release(owner: LockOwner): Promise<boolean> {
    const { key } = this;
    const field = this.field(owner);
    const latch = latchPrefixOf(this.context.keyPrefix, key) + nanoid();
    const epoch = this.context.connectionEpoch();
    const holdsBefore = owner.holds;
    // The last hold is being given up: stop renewing now, not after the reply, or a renewal
    // racing this release would find the lock gone and report it lost. If the release fails,
    // the lock then expires within its lease.
    if (holdsBefore <= 1) this.context.renewal.remove(key, field);
    const publish = await this.context.publishCommand();
    // A failure leaves the outcome unknown; a retried unlock() tells the rest.
    let result = await this.context.command('release', (redis) =>
      redis.rlock_release(key, channelOf(this.context.keyPrefix, key), latch, field, UNLOCK_MESSAGE, RELEASE_LATCH_TTL_MS, publish),
    );
    if (result !== null && diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.event(owner), released: result === 1 });
    if (result === 0) {
      // The reply came, so ioredis will not resend this call: the latch has done its job.
      this.context.redis.del(latch).catch(() => undefined);
      owner.holds = Math.max(1, owner.holds - 1);
      return false;
    }
    // nil after a reconnect, for an owner with one hold: the answer of a resend whose first run
    // released the lock (or of a lock lost meanwhile); either way it is not held any more.
    if (result === null && holdsBefore === 1 && this.context.connectionEpoch() !== epoch) {
      result = 1;
      if (diagnostics.released.hasSubscribers) diagnostics.released.publish({ ...this.event(owner), released: true });
    }
    owner.holds = 0;
    this.context.renewal.remove(key, field);
    if (result === null) throw new NotLockOwnerError(this.name, owner.id);
    return true;
  }

  /**
   * Ends an outermost `withLock`: its owner disappears with it, so holds that `fn` left behind
   * (a `lock()` without `unlock()`), or that Redis counted twice for an acquire resent after a
   * reconnect, are given back too instead of being kept alive by the watchdog forever.
   */
  private async releaseAll(owner: LockOwner): Promise<void> {
    while (!(await this.release(owner))) {
      /* keep going until Redis says released (or not held) */
    }
  }

  /** Aborts `scope` when the lock is lost or `signal` aborts; returns the undo. */
  private watchScope(
    owner: LockOwner,
    leaseTime: number | undefined,
    signal: AbortSignal | undefined,
    scope: AbortController,
    sentAt: number,
  ): () => void {
    const forward = (source: AbortSignal) => () => scope.abort(source.reason);
    const undo: (() => void)[] = [];
    for (const source of [signal, this.context.renewal.lostSignal(this.key, this.field(owner))]) {
      if (!source) continue;
      if (source.aborted) scope.abort(source.reason);
      const listener = forward(source);
      source.addEventListener('abort', listener, { once: true });
      undo.push(() => source.removeEventListener('abort', listener));
    }
    if (leaseTime !== undefined && !this.context.renewal.has(this.key, this.field(owner))) {
      // Counted from when the acquire was sent: Redis's TTL started later, so this fires first.
      const timer = setTimeout(
        () => scope.abort(new LockLostError(this.name, `its lease of ${leaseTime} ms ran out`)),
        Math.max(0, sentAt + leaseTime - performance.now()),
      );
      timer.unref();
      undo.push(() => clearTimeout(timer));
    }
    return () => undo.forEach((fn) => fn());
  }
}
