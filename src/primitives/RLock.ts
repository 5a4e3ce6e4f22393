import { LockHandle, RELEASE_LATCH_TTL_MS } from '../core/LockHandle';
import { waitFor, type Hold, type WaitProtocol } from '../core/waitLoop';
import { diagnostics } from '../diagnostics';
import { inspectLock, type LockInfo } from '../introspection';
import { channelOf, UNLOCK_MESSAGE } from '../names';
import { MAX_LOCAL_HANDOFFS, sleepAsCandidate } from '../services/LocalHandoff';
import type { CommandBound, LockContext } from '../services/LockContext';
import type { LockOwner } from '../services/LockOwner';
import type { ScriptedRedis } from '../services/scripts';

/**
 * A reentrant distributed lock, Redisson's RLock: a Redis hash `<clientId>:<ownerId> → holds`.
 * Not fair: a release hands the lock to a parked waiter of its own client when it has one (at
 * most MAX_LOCAL_HANDOFFS times in a row, see LocalHandoff), otherwise publishes on the lock's
 * channel and one waiter per client races for it (see FairLock for first come, first served).
 */
export class RLock extends LockHandle {
  /** @internal Use `client.getLock(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
  }

  /** Deletes the lock whoever holds it and wakes waiters at once; true when there was one. */
  /** The release channel, made once per handle (a lock and its unlock both need it). */
  private get channel(): string {
    return (this.channelName ??= channelOf(this.context.keyPrefix, this.key));
  }

  private channelName: string | undefined;

  async forceUnlock(): Promise<boolean> {
    this.context.assertOpen();
    const { key } = this;
    const publish = await this.context.publishCommand();
    const holders = await this.context.command('forceUnlock', (redis) => redis.rlock_forceUnlock(key, this.channel, UNLOCK_MESSAGE, publish));
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
    return this.context.command('inspect', (redis) => inspectLock(redis, this.name, this.key, this.channel, sharded));
  }

  protected acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal): Promise<Hold | undefined> {
    const { channel } = this;
    const protocol: WaitProtocol = {
      channel,
      attempt: async (listening, bound) => {
        // A client that just passed the lock on lets the other clients' waiters have it: a new
        // caller that may wait joins its own client's parked waiters instead of barging in.
        const yielding = this.context.pubsub.peek(channel)?.local?.yielding;
        if (listening && waitTime > 0 && yielding) return { held: false, ttl: -1 };
        const sentAt = performance.now();
        const reply = await this.attempt(owner, leaseTime, bound);
        if (typeof reply === 'number') return { held: false, ttl: reply };
        this.held(owner, reply);
        return { held: true, sentAt };
      },
      // Each release message wakes one waiter of this client, which tries again; a release of
      // this client may instead hand it the lock directly.
      sleep: (entry, ms, stops) => sleepAsCandidate(entry, this.context.clientId, { field: this.field(owner), lease: leaseTime ?? this.context.watchdogTimeout }, ms, stops),
      ...this.waitEvents(owner),
    };
    return waitFor(this.context, protocol, waitTime, signal);
  }

  protected async releaseCall(redis: ScriptedRedis, field: string, latch: string, last: boolean): Promise<0 | 1 | null> {
    const { key } = this;
    const { channel } = this;
    const publish = await this.context.publishCommand();
    const local = last && this.handsOverLocally ? this.context.pubsub.peek(channel)?.local : undefined;
    const message = this.context.clientId;
    if (local && local.hasCandidates) {
      const next = local.streak < MAX_LOCAL_HANDOFFS ? local.claimFirst() : undefined;
      if (next) {
        const sentAt = performance.now();
        let result: 0 | 1 | 2 | null | undefined;
        try {
          result = await redis.rlock_release(key, channel, latch, field, message, RELEASE_LATCH_TTL_MS, publish, next.candidate.field, next.candidate.lease);
        } finally {
          // The waiter holds the lock from the send of this call on; otherwise it tries again.
          next.deliver(result === 2 ? { sentAt } : undefined);
        }
        if (result !== 2) return result;
        local.streak++;
        return 1;
      }
      // A full run of local handoffs: the other processes' waiters get their turn now.
      local.yieldTurn();
    } else if (local) {
      local.streak = 0;
    }
    const result = await redis.rlock_release(key, channel, latch, field, message, RELEASE_LATCH_TTL_MS, publish);
    return result === 2 ? 1 : result;
  }

  /**
   * Whether a release may hand the lock to a parked waiter of this client without a new acquire;
   * a variant whose acquire script does more than take the hash (FencedLock mints a token) says no.
   */
  protected get handsOverLocally(): boolean {
    return true;
  }

  /**
   * The acquire script and the keys it takes before ARGV = (lease, field). It answers the PTTL (a
   * number) when someone else holds the lock, anything else (nil; a fenced lock's token) when the
   * owner got a hold: a variant (FencedLock) swaps in its own script and keeps the answer in `held`.
   */
  protected acquireScript(): { command: string; keys: string[] } {
    return { command: 'rlock_acquire', keys: [this.key] };
  }

  /** The owner got a hold; `reply` is what the acquire script answered. */
  protected held(_owner: LockOwner, _reply: unknown): void {}

  /** One acquire: the PTTL when someone else holds the lock, else the script's answer. */
  private async attempt(owner: LockOwner, leaseTime: number | undefined, bound: CommandBound): Promise<unknown> {
    const lease = leaseTime ?? this.context.watchdogTimeout;
    const field = this.field(owner);
    const sync = this.context.syncReplicas;
    if (sync) return this.syncedAttempt(owner, lease, field, sync, bound);
    const { command, keys } = this.acquireScript();
    return this.context.command('acquire', (redis) => (redis as unknown as Record<string, AcquireCall>)[command]!(...keys, lease, field), bound);
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
  private async syncedAttempt(owner: LockOwner, lease: number, field: string, sync: { replicas: number; timeout: number }, bound: CommandBound): Promise<unknown> {
    const epoch = this.context.connectionEpoch();
    const { command, keys } = this.acquireScript();
    const [reply, acked] = await this.context.command('acquire', async (redis) => {
      const pipeline = redis.pipeline() as unknown as Record<string, (...args: (string | number)[]) => ScriptedPipeline>;
      const replies = await pipeline[command]!(...keys, lease, field).wait(sync.replicas, sync.timeout).exec();
      const [acquire, wait] = replies ?? [];
      if (!acquire || acquire[0]) throw acquire?.[0] ?? new Error('the pipeline was discarded');
      // A failed WAIT after a successful acquire is an unconfirmed hold, not a failed call.
      return [acquire[1], wait && !wait[0] ? (wait[1] as number) : -1] as const;
    }, bound);
    if (typeof reply === 'number') return reply;
    if (acked >= sync.replicas && epoch === this.context.connectionEpoch()) return reply;
    owner.holds++;
    await this.release(owner).catch(() => undefined);
    return sync.timeout;
  }
}

/** A pipeline after the acquire script was queued on it (ioredis adds script commands to pipelines too). */
interface ScriptedPipeline {
  wait(replicas: number, timeout: number): { exec(): Promise<[Error | null, unknown][] | null> };
}

/** An acquire script command: keys, then lease and field. */
type AcquireCall = (...args: (string | number)[]) => Promise<unknown>;
