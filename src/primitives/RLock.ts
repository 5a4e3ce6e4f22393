import { LockHandle, RELEASE_LATCH_TTL_MS } from '../core/LockHandle';
import { waitFor, type Hold, type WaitProtocol } from '../core/waitLoop';
import { diagnostics } from '../diagnostics';
import { inspectLock, type LockInfo } from '../introspection';
import { channelOf, UNLOCK_MESSAGE } from '../names';
import type { LockContext } from '../services/LockContext';
import type { LockOwner } from '../services/LockOwner';
import type { ScriptedRedis } from '../services/scripts';

/**
 * A reentrant distributed lock, Redisson's RLock: a Redis hash `<clientId>:<ownerId> → holds`.
 * Not fair: a release publishes on the lock's channel and the woken waiters race for it (see
 * FairLock for first come, first served).
 */
export class RLock extends LockHandle {
  /** @internal Use `client.getLock(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
  }

  /** Deletes the lock whoever holds it and wakes waiters at once; true when there was one. */
  async forceUnlock(): Promise<boolean> {
    this.context.assertOpen();
    const { key } = this;
    const publish = await this.context.publishCommand();
    const holders = await this.context.command('forceUnlock', (redis) => redis.rlock_forceUnlock(key, channelOf(key), UNLOCK_MESSAGE, publish));
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
    return this.context.command('inspect', (redis) => inspectLock(redis, this.name, this.key, channelOf(this.key), sharded));
  }

  protected acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal): Promise<Hold | undefined> {
    const protocol: WaitProtocol = {
      channel: channelOf(this.key),
      attempt: async () => {
        const sentAt = performance.now();
        const ttl = await this.attempt(owner, leaseTime);
        return ttl === null ? { held: true, sentAt } : { held: false, ttl };
      },
      // Each release message wakes one waiter of this client, which tries again.
      sleep: async (entry, ms, stops) => {
        await entry.untilReleased(ms, stops);
        return undefined;
      },
      ...this.waitEvents(owner),
    };
    return waitFor(this.context, protocol, waitTime, signal);
  }

  protected releaseCall(redis: ScriptedRedis, field: string, latch: string): Promise<0 | 1 | null> {
    const { key } = this;
    return this.context
      .publishCommand()
      .then((publish) => redis.rlock_release(key, channelOf(key), latch, field, UNLOCK_MESSAGE, RELEASE_LATCH_TTL_MS, publish));
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
      const replies = await (redis.pipeline() as unknown as ScriptedPipeline).rlock_acquire(this.key, lease, field).wait(sync.replicas, sync.timeout).exec();
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
}

/** A pipeline with the acquire script on it (ioredis adds script commands to pipelines too). */
interface ScriptedPipeline {
  rlock_acquire(key: string, leaseMs: number, field: string): { wait(replicas: number, timeout: number): { exec(): Promise<[Error | null, unknown][] | null> } };
}
