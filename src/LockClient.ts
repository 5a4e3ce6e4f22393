import { EventEmitter } from 'node:events';
import { Cluster, Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { ClientClosedError, InvalidArgumentError, type LockLostError, RedisCommandError } from './errors';
import { ExpirationRenewal, type RenewalTarget } from './ExpirationRenewal';
import type { LockContext } from './LockContext';
import { LockPubSub } from './LockPubSub';
import { checkClientOptions, type LockClientOptions } from './options';
import { RLock } from './RLock';
import { defineScripts } from './scripts';

/** Payload of the `lockLost` event. */
export interface LockLostEvent {
  name: string;
  key: string;
  clientId: string;
  ownerId: string;
  error: LockLostError;
}

export interface LockClientEvents {
  /** The watchdog found a lock it kept no longer held by its owner. */
  lockLost: [LockLostEvent];
  /** A watchdog renewal call failed (network, Redis error); it is retried next tick. */
  renewalFailed: [unknown];
}

function isConnection(value: unknown): value is Redis | Cluster {
  return value instanceof Redis || value instanceof Cluster ||
    (typeof value === 'object' && value !== null &&
      typeof (value as Redis).defineCommand === 'function' && typeof (value as Redis).duplicate === 'function');
}

/**
 * The entry point: owns the connections it creates, one watchdog and one pub/sub subscriber,
 * and hands out lock handles. `close()` stops everything so that the process can exit.
 */
export class LockClient extends EventEmitter<LockClientEvents> {
  /** Unique per client; the first half of every owner field `<clientId>:<ownerId>`. */
  readonly id = nanoid();
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  private readonly redis: Redis | Cluster;
  private readonly ownsRedis: boolean;
  private readonly pubsub: LockPubSub;
  private readonly renewal: ExpirationRenewal;
  private readonly waiters = new Set<AbortController>();
  private closed = false;
  private readonly context: LockContext;

  constructor(options: LockClientOptions) {
    super();
    const checked = checkClientOptions(options);
    this.keyPrefix = checked.keyPrefix;
    this.watchdogTimeout = checked.watchdogTimeout;
    const given = checked.redis;
    if (isConnection(given)) {
      this.redis = given;
      this.ownsRedis = false;
    } else {
      if (typeof given === 'object' && 'keyPrefix' in given && given.keyPrefix) {
        throw new InvalidArgumentError('options.redis.keyPrefix', 'is not supported; use the LockClient option keyPrefix');
      }
      this.redis = typeof given === 'string' ? new Redis(given) : new Redis(given);
      this.ownsRedis = true;
      this.redis.on('error', () => undefined); // ioredis retries; calls report their own failures
    }
    const ioredisPrefix = (this.redis as Redis).options?.keyPrefix;
    if (ioredisPrefix) {
      if (this.ownsRedis) this.redis.disconnect();
      // ioredis would prefix the keys but not the channel the waiters subscribe to.
      throw new InvalidArgumentError('options.redis', 'must not have an ioredis keyPrefix; use the LockClient option keyPrefix');
    }
    defineScripts(this.redis);
    const redis = this.redis;
    this.pubsub = new LockPubSub(() => redis.duplicate());
    this.renewal = new ExpirationRenewal(
      redis,
      this.watchdogTimeout,
      () => 0,
      (target, error) => this.lost(target, error),
      (error) => this.emit('renewalFailed', error),
    );
    this.context = {
      clientId: this.id,
      keyPrefix: this.keyPrefix,
      watchdogTimeout: this.watchdogTimeout,
      redis,
      pubsub: this.pubsub,
      renewal: this.renewal,
      assertOpen: () => this.assertOpen(),
      command: (name, call) => this.command(name, call),
      trackWaiter: (waiter) => {
        this.waiters.add(waiter);
        return () => this.waiters.delete(waiter);
      },
    };
  }

  /** A handle on the lock `name` (key `<keyPrefix><name>`). Handles are cheap; take one per task. */
  getLock(name: string): RLock {
    this.assertOpen();
    return new RLock(this.context, name);
  }

  /**
   * Stops the watchdog, rejects parked waiters with `ClientClosedError`, and closes the
   * connections this client created. Held locks are not released: they expire after their lease.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.renewal.close();
    const error = new ClientClosedError();
    for (const waiter of this.waiters) waiter.abort(error);
    this.waiters.clear();
    await this.pubsub.close();
    if (this.ownsRedis) {
      await (this.redis as Redis).quit().catch(() => this.redis.disconnect());
    }
  }

  /** Counters of the client's internal state, for tests and dashboards. */
  get stats(): { renewals: number; waitingChannels: number; waiters: number } {
    return { renewals: this.renewal.size, waitingChannels: this.pubsub.channelCount, waiters: this.waiters.size };
  }

  private assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }

  private async command<T>(name: string, call: (redis: Redis | Cluster) => Promise<T>): Promise<T> {
    try {
      return await call(this.redis);
    } catch (error) {
      if (this.closed) throw new ClientClosedError();
      throw new RedisCommandError(name, error);
    }
  }

  private lost(target: RenewalTarget, error: LockLostError): void {
    this.emit('lockLost', {
      name: target.name,
      key: target.key,
      clientId: this.id,
      ownerId: target.owner.id,
      error,
    });
  }
}
