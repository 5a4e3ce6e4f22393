import { EventEmitter, setMaxListeners } from 'node:events';
import { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { nanoid } from 'nanoid';
import { ClientClosedError, InvalidArgumentError, type LockLostError, RedisCommandError } from './errors';
import { diagnostics } from './diagnostics';
import { ExpirationRenewal, type RenewalTarget } from './services/ExpirationRenewal';
import type { LockContext } from './services/LockContext';
import { LockPubSub } from './services/LockPubSub';
import { QueueHeartbeat } from './services/QueueHeartbeat';
import { connectionName, listLockNames, type LockInfo } from './introspection';
import { checkClientOptions, checkListOptions, type ListLocksOptions, type LockClientOptions } from './options';
import { FairLock } from './primitives/FairLock';
import { RLock } from './primitives/RLock';
import { defineScripts, type PublishCommand, type ScriptedRedis } from './services/scripts';

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

/** How often a Cluster subscriber refreshes its slot map (CLUSTER SLOTS) to follow moved slots. */
const SUBSCRIBER_SLOTS_REFRESH_MS = 2000;

/** How long `close()` waits for QUIT before it cuts the connection. */
const QUIT_TIMEOUT_MS = 1000;

async function quitWithin(redis: Redis | Cluster, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([redis.quit().catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

/**
 * A connection passed in without a name of its own gets ours, so that inspect() can say who
 * holds a lock: ioredis re-applies `connectionName` on every (re)connect, and a Cluster gives its
 * `redisOptions` to each node connection it makes; those already open are named now.
 */
function nameConnection(redis: Redis | Cluster, name: string): () => void {
  const nameNode = (node: Redis): void => {
    if (node.options.connectionName) return;
    node.options.connectionName = name; // re-applied by ioredis on each reconnect
    if (node.status === 'ready') node.client('SETNAME', name).catch(() => undefined);
    else node.once('ready', () => void node.client('SETNAME', name).catch(() => undefined));
  };
  if (!redis.isCluster) {
    nameNode(redis as Redis);
    return () => undefined;
  }
  const cluster = redis as Cluster;
  if (cluster.options.redisOptions?.connectionName) return () => undefined;
  for (const node of cluster.nodes()) nameNode(node);
  cluster.on('+node', nameNode);
  return () => cluster.off('+node', nameNode);
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
  /** The human name `inspect()` shows beside the clientId (option `name`). */
  readonly name: string;
  private readonly redis: Redis | Cluster;
  private readonly ownsRedis: boolean;
  private readonly pubsub: LockPubSub;
  private readonly renewal: ExpirationRenewal;
  private readonly heartbeat: QueueHeartbeat;
  /** Aborted by close(): wakes every parked waiter with ClientClosedError. */
  private readonly closing = new AbortController();
  private waiterCount = 0;
  /** Rejecters of the Redis calls under way, so that `close()` can settle them at once. */
  private readonly inFlight = new Set<(error: Error) => void>();
  private closed = false;
  private readonly onReconnect: () => void;
  private readonly onDrop: () => void;
  private epoch = 0;
  private readonly unname: () => void;
  private publishCommandAnswer: Promise<PublishCommand> | undefined;
  private readonly context: LockContext;

  constructor(options: LockClientOptions) {
    super();
    setMaxListeners(0, this.closing.signal); // one listener per parked waiter, by design
    const checked = checkClientOptions(options);
    this.keyPrefix = checked.keyPrefix;
    this.watchdogTimeout = checked.watchdogTimeout;
    this.name = checked.name;
    const connName = connectionName(this.id, this.name);
    const given = checked.redis;
    if (isConnection(given)) {
      this.redis = given;
      this.ownsRedis = false;
      const own = (given as Redis).options;
      if (!given.isCluster && own?.sentinels?.length && !own.failoverDetector) {
        process.emitWarning('a Sentinel connection without failoverDetector: true keeps writing to the old master for seconds after SENTINEL FAILOVER (see docs/topologies.md)', {
          type: 'RLockWarning',
          code: 'RLOCK_NO_FAILOVER_DETECTOR',
        });
      }
    } else {
      if (typeof given === 'object' && 'keyPrefix' in given && given.keyPrefix) {
        throw new InvalidArgumentError('options.redis.keyPrefix', 'is not supported; use the LockClient option keyPrefix');
      }
      // ioredis sets the connection name again on every reconnect; inspect() reads it.
      if (typeof given === 'string') this.redis = new Redis(given, { disconnectTimeout: 0, connectionName: connName });
      else if ('clusterNodes' in given) {
        const { clusterNodes, clusterOptions = {} } = given;
        this.redis = new Cluster(clusterNodes, {
          ...clusterOptions,
          redisOptions: { disconnectTimeout: 0, connectionName: connName, ...clusterOptions.redisOptions },
        });
      } else {
        // failoverDetector (Sentinel only): on SENTINEL FAILOVER the old master lives on and
        // keeps taking writes for seconds until the Sentinel demotes it; ioredis drops the
        // connection as soon as a Sentinel announces +switch-master, so renewals and releases
        // move to the new master at once instead of renewing a lock nobody else can see.
        this.redis = new Redis({ disconnectTimeout: 0, connectionName: connName, failoverDetector: true, ...given });
      }
      this.ownsRedis = true;
      this.redis.on('error', () => undefined); // ioredis retries; calls report their own failures
    }
    const ioredisPrefix = this.redis.isCluster ? (this.redis as Cluster).options.keyPrefix : (this.redis as Redis).options?.keyPrefix;
    if (ioredisPrefix) {
      if (this.ownsRedis) this.redis.disconnect();
      // ioredis would prefix the keys but not the channel the waiters subscribe to.
      throw new InvalidArgumentError('options.redis', 'must not have an ioredis keyPrefix; use the LockClient option keyPrefix');
    }
    this.unname = this.ownsRedis ? () => undefined : nameConnection(this.redis, connName);
    const redis = defineScripts(this.redis);
    // disconnectTimeout 0: on disconnect() ioredis otherwise arms a ref'ed 2 s timer that waits
    // for a socket 'close' which never comes when the socket was already gone (Redis down), and
    // that timer would hold the process open after close().
    this.pubsub = new LockPubSub(
      (sharded) =>
        redis.isCluster
          ? // Refreshing the slots now and then is how the subscriber notices a slot that moved.
            (redis as Cluster).duplicate([], { shardedSubscribers: sharded, slotsRefreshInterval: SUBSCRIBER_SLOTS_REFRESH_MS })
          : (redis as Redis).duplicate({ disconnectTimeout: 0, connectionName: connName }),
      () => this.publishCommand(),
    );
    this.renewal = new ExpirationRenewal(
      redis,
      this.watchdogTimeout,
      // On Cluster a renewal script may only name keys of one slot.
      redis.isCluster ? (key) => calculateSlot(key) : () => 0,
      (target, error) => this.lost(target, error),
      (error) => {
        if (diagnostics.renewalFailed.hasSubscribers) diagnostics.renewalFailed.publish({ clientId: this.id, error });
        this.emit('renewalFailed', error);
      },
    );
    this.heartbeat = new QueueHeartbeat(redis, checked.queueTimeout, redis.isCluster ? (key) => calculateSlot(key) : () => 0);
    // After a reconnect Redis may have restarted empty or failed over: check every kept lock now
    // rather than at the next tick, so that an owner learns of a loss as soon as it can.
    let wasReady = this.redis.status === 'ready';
    this.onReconnect = () => {
      if (wasReady) void this.renewal.renewAll();
      wasReady = true;
    };
    this.redis.on('ready', this.onReconnect);
    this.onDrop = () => this.epoch++;
    this.redis.on('close', this.onDrop);
    this.context = {
      clientId: this.id,
      keyPrefix: this.keyPrefix,
      watchdogTimeout: this.watchdogTimeout,
      syncReplicas: checked.syncReplicas,
      queueTimeout: checked.queueTimeout,
      redis,
      isCluster: redis.isCluster,
      heartbeat: this.heartbeat,
      pubsub: this.pubsub,
      renewal: this.renewal,
      assertOpen: () => this.assertOpen(),
      command: (name, call) => this.command(name, call),
      connectionEpoch: () => this.epoch,
      publishCommand: () => this.publishCommand(),
      closedSignal: this.closing.signal,
      trackWaiter: () => {
        this.waiterCount++;
        let counted = true;
        return () => {
          if (counted) this.waiterCount--;
          counted = false;
        };
      },
    };
  }

  /** A handle on the lock `name` (key `<keyPrefix><name>`). Handles are cheap; take one per task. */
  getLock(name: string): RLock {
    this.assertOpen();
    return new RLock(this.context, name);
  }

  /**
   * A handle on the fair lock `name`: first come, first served across processes, the lock handed
   * straight to the next waiter on release (see docs/design.md, "The fair lock").
   */
  getFairLock(name: string): FairLock {
    this.assertOpen();
    return new FairLock(this.context, name);
  }

  /**
   * How releases are published: sharded (`SPUBLISH`, to the lock's shard only) on a Cluster
   * whose servers know it (Redis >= 7), classic `PUBLISH` elsewhere. Asked once.
   */
  private publishCommand(): Promise<PublishCommand> {
    this.publishCommandAnswer ??= this.redis.isCluster
      ? this.redis
          .call('COMMAND', 'INFO', 'SPUBLISH')
          .then((info) => (Array.isArray(info) && info[0] ? 'spublish' : 'publish') as PublishCommand)
          .catch(() => {
            this.publishCommandAnswer = undefined; // ask again next time
            return 'publish' as PublishCommand;
          })
      : Promise.resolve('publish');
    return this.publishCommandAnswer;
  }

  /** Who holds lock `name`, for how long, and how many clients wait on it (see `RLock.inspect`). */
  inspect(name: string): Promise<LockInfo> {
    return this.getLock(name).inspect();
  }

  /**
   * The names of the locks under this client's `keyPrefix` (`match` is a glob on the name),
   * found with SCAN on every master, never KEYS, and recognised by their hash layout.
   */
  listLocks(options?: ListLocksOptions): AsyncIterable<string> {
    const { match, count } = checkListOptions(options);
    this.assertOpen();
    const names = listLockNames(this.redis, this.keyPrefix, match, count);
    const command = <T>(call: () => Promise<T>): Promise<T> => this.command('listLocks', () => call());
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => command(() => names.next()),
        return: async () => {
          await names.return(undefined);
          return { done: true, value: undefined };
        },
      }),
    };
  }

  /**
   * Stops the watchdog, settles every call under way and every parked waiter with
   * `ClientClosedError`, and closes the connections this client created (a polite QUIT, cut
   * short after `QUIT_TIMEOUT_MS` when Redis does not answer). Held locks are not released:
   * they expire after their lease.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.renewal.close();
    this.heartbeat.close();
    this.redis.off('ready', this.onReconnect);
    this.redis.off('close', this.onDrop);
    this.unname();
    const error = new ClientClosedError();
    this.closing.abort(error);
    for (const reject of this.inFlight) reject(error);
    this.inFlight.clear();
    await this.pubsub.close();
    if (this.ownsRedis) await quitWithin(this.redis, QUIT_TIMEOUT_MS);
  }

  /** Counters of the client's internal state, for tests and dashboards. */
  get stats(): { renewals: number; waitingChannels: number; waiters: number } {
    return { renewals: this.renewal.size, waitingChannels: this.pubsub.channelCount, waiters: this.waiterCount };
  }

  private assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }

  /**
   * Runs one call. It settles with `ClientClosedError` as soon as `close()` runs, even when
   * Redis has not answered (paused, unreachable, a connection the user owns); a reply that
   * arrives later is dropped.
   */
  private command<T>(name: string, call: (redis: ScriptedRedis) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const settle = (error: Error): void => {
        this.inFlight.delete(settle);
        reject(error);
      };
      this.inFlight.add(settle);
      call(this.redis as ScriptedRedis).then(
        (value) => {
          if (!this.inFlight.delete(settle)) return;
          resolve(value);
        },
        (error: unknown) => {
          if (!this.inFlight.delete(settle)) return;
          reject(this.closed ? new ClientClosedError() : new RedisCommandError(name, error));
        },
      );
    });
  }

  private lost(target: RenewalTarget, error: LockLostError): void {
    const event = { name: target.name, key: target.key, clientId: this.id, ownerId: target.owner.id, error };
    if (diagnostics.lost.hasSubscribers) diagnostics.lost.publish(event);
    this.emit('lockLost', event);
  }
}
