import { EventEmitter, setMaxListeners } from 'node:events';
import { inspect } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { nanoid } from 'nanoid';
import { ClientClosedError, InvalidArgumentError, type LockLostError, RedisCommandError, RedisUnreachableError } from './errors';
import { diagnostics } from './diagnostics';
import { reviveWhenEnded } from './services/reviveEnded';
import { ExpirationRenewal, type RenewalTarget } from './services/ExpirationRenewal';
import { CallCutShort, type CommandBound, IN_FLIGHT_GRACE_MS, type LockContext } from './services/LockContext';
import { LockPubSub } from './services/LockPubSub';
import { QueueHeartbeat } from './services/QueueHeartbeat';
import { connectionName, listLockNames, type LockInfo } from './introspection';
import { checkClientOptions, checkListOptions, type ListLocksOptions, type LockClientOptions } from './options';
import { CountDownLatch } from './primitives/CountDownLatch';
import { FairLock } from './primitives/FairLock';
import { FencedLock } from './primitives/FencedLock';
import { PermitExpirableSemaphore } from './primitives/PermitExpirableSemaphore';
import { ReadWriteLock } from './primitives/ReadWriteLock';
import { RLock } from './primitives/RLock';
import { Semaphore } from './primitives/Semaphore';
import { redactError } from './redact';
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
  /** A lock the watchdog kept was found no longer held by its owner (by a renewal, or by the owner's release). */
  lockLost: [LockLostEvent];
  /** A watchdog renewal call failed (network, Redis error); it is retried next tick. */
  renewalFailed: [unknown];
}


/** How often a Cluster subscriber refreshes its slot map (CLUSTER SLOTS) to follow moved slots. */
const SUBSCRIBER_SLOTS_REFRESH_MS = 2000;

/**
 * ioredis's ready check sends INFO on every connect, which a least-privilege ACL refuses
 * (`@dangerous`), and then prints a warning. It only waits out a server still loading its data;
 * without it a command sent meanwhile fails with LOADING, which rlock treats as transient (a
 * waiter retries it, the watchdog retries at its next tick within the lease), so nothing is lost.
 */
const NO_READY_CHECK = { enableReadyCheck: false } as const;

/** The undo of a wait that set nothing up. */
const NOTHING_TO_UNDO = (): void => undefined;

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

/** `util.inspect` shows `label` for `object`, and `JSON.stringify` leaves it out. */
function hideFromLogs(object: object, label: string): void {
  Object.defineProperty(object, inspect.custom, { value: () => label });
  Object.defineProperty(object, 'toJSON', { value: () => undefined });
}

/**
 * An error of a connection attempt that retrying will not fix soon: a system error with a code
 * (ECONNREFUSED, ENOTFOUND, a TLS certificate error) or Redis refusing the login. Not ioredis's
 * "Connection is closed." while a Sentinel resolves its master, or a timeout.
 */
function isDefinitive(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code !== 'ETIMEDOUT';
  return /^(WRONGPASS|NOAUTH|NOPERM)\b/.test(error.message);
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
  /**
   * Calls sent and not answered yet, settled or not: close() waits for their replies (bounded)
   * before QUIT, so that what an acquire took for a caller that close() settled is given back.
   */
  private unanswered = 0;
  private closed = false;
  private readonly onReconnect: () => void;
  private readonly onDrop: () => void;
  private epoch = 0;
  private readonly unname: () => void;
  private publishCommandAnswer: Promise<PublishCommand> | undefined;
  /** The Cluster's answer once it came (a failed probe is asked again, so it is not kept). */
  private publishCommandKnown: PublishCommand | undefined;
  /** Why the connection this client created last failed, until it is ready again. */
  private readonly context: LockContext;
  private readonly offlineTimeout: number;
  /** Connected (ready) at least once: from then on an outage is waited out, not reported at once. */
  private everReady = false;
  /** The last connection error of a connection we own (we do not listen on one passed in). */
  private lastError: Error | undefined;
  /** Calls waiting for the connection to be ready: told on ready, and on a first attempt's failure. */
  private readonly waitingForReady = new Set<(error?: Error) => void>();
  private readonly onReady: () => void;
  private readonly onError: (error: Error) => void;
  /** Stops remaking our connection after ioredis ended it (see reviveWhenEnded). */
  private readonly stopReviving: () => void;

  constructor(options: LockClientOptions) {
    super();
    setMaxListeners(0, this.closing.signal); // one listener per parked waiter, by design
    const checked = checkClientOptions(options);
    this.keyPrefix = checked.keyPrefix;
    this.watchdogTimeout = checked.watchdogTimeout;
    this.offlineTimeout = checked.offlineTimeout;
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
      // NO_READY_CHECK: see its comment; options given explicitly win.
      if (typeof given === 'string') this.redis = new Redis(given, { disconnectTimeout: 0, connectionName: connName, ...NO_READY_CHECK });
      else if ('clusterNodes' in given) {
        const { clusterNodes, clusterOptions = {} } = given;
        this.redis = new Cluster(clusterNodes, {
          ...clusterOptions,
          redisOptions: { disconnectTimeout: 0, connectionName: connName, ...NO_READY_CHECK, ...clusterOptions.redisOptions },
        });
      } else {
        // failoverDetector (Sentinel only): on SENTINEL FAILOVER the old master lives on and
        // keeps taking writes for seconds until the Sentinel demotes it; ioredis drops the
        // connection as soon as a Sentinel announces +switch-master, so renewals and releases
        // move to the new master at once instead of renewing a lock nobody else can see.
        // A Sentinel connection keeps the ready check: ioredis checks the node's role in its INFO.
        const readyCheck = given.sentinels?.length ? {} : NO_READY_CHECK;
        this.redis = new Redis({ disconnectTimeout: 0, connectionName: connName, failoverDetector: true, ...readyCheck, ...given });
      }
      this.ownsRedis = true;
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
        redactError(error); // a failed AUTH carries the password in its `command.args`
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
    this.everReady = this.redis.status === 'ready';
    this.onReady = () => {
      this.everReady = true;
      this.lastError = undefined;
      for (const wake of [...this.waitingForReady]) wake();
    };
    this.onError = (error) => {
      this.lastError = error;
      // ioredis reconnects; waiting calls keep waiting, unless a connection that was never ready
      // met an error that says it will not be (refused, no such host, bad password, certificate).
      if (this.everReady || !isDefinitive(error)) return;
      for (const wake of [...this.waitingForReady]) wake(error);
    };
    this.redis.on('ready', this.onReady);
    // Only on a connection we own: a listener on the user's would silence ioredis's own
    // "Unhandled error event" report for them. ioredis retries; calls report their own failures.
    if (this.ownsRedis) this.redis.on('error', this.onError);
    // A Cluster remakes its node connections itself; a connection passed in is the user's to remake.
    this.stopReviving = this.ownsRedis && !this.redis.isCluster ? reviveWhenEnded(this.redis as Redis, () => !this.closed) : () => undefined;
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
      command: (name, call, bound?: CommandBound) => this.command(name, call, bound),
      connectionEpoch: () => this.epoch,
      publishCommand: () => this.publishCommand(),
      knownPublishCommand: () => (this.redis.isCluster ? this.publishCommandKnown : 'publish'),
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
    // Every lock handle keeps the context, and through it the connections, whose options hold
    // the password: a handle or client that is logged must not print them.
    hideFromLogs(this.context, '[LockContext]');
  }

  /** What `util.inspect` (console.log) shows of a client: never its connections (see hideFromLogs). */
  [inspect.custom](): object {
    return { id: this.id, name: this.name, keyPrefix: this.keyPrefix, watchdogTimeout: this.watchdogTimeout };
  }

  /** What `JSON.stringify` shows of a client. */
  toJSON(): object {
    return this[inspect.custom]();
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

  /** A handle on the counting semaphore `name` (Redisson's RSemaphore; see docs/design.md, "Semaphores"). */
  getSemaphore(name: string): Semaphore {
    this.assertOpen();
    return new Semaphore(this.context, name);
  }

  /** A handle on the semaphore `name` whose permits have ids and leases (Redisson's RPermitExpirableSemaphore). */
  getPermitExpirableSemaphore(name: string): PermitExpirableSemaphore {
    this.assertOpen();
    return new PermitExpirableSemaphore(this.context, name);
  }

  /** A handle on the count-down latch `name` (Redisson's RCountDownLatch). */
  getCountDownLatch(name: string): CountDownLatch {
    this.assertOpen();
    return new CountDownLatch(this.context, name);
  }

  /**
   * A handle on the fenced lock `name`: every first acquire answers a fencing token (bigint)
   * larger than every token minted before for `name`, even after Redis lost its data.
   */
  getFencedLock(name: string): FencedLock {
    this.assertOpen();
    return new FencedLock(this.context, name);
  }

  /**
   * A read-write lock `name`: `readLock()` shared, `writeLock()` exclusive, and a waiting writer
   * is never starved by readers (see docs/design.md, "The read-write lock").
   */
  getReadWriteLock(name: string): ReadWriteLock {
    this.assertOpen();
    return new ReadWriteLock(this.context, name);
  }

  /**
   * How releases are published: sharded (`SPUBLISH`, to the lock's shard only) on a Cluster
   * whose servers know it (Redis >= 7), classic `PUBLISH` elsewhere. Asked once.
   */
  private publishCommand(): Promise<PublishCommand> {
    if (this.publishCommandAnswer) return this.publishCommandAnswer;
    if (!this.redis.isCluster) return (this.publishCommandAnswer = Promise.resolve('publish'));
    // Counted as a call under way: a give-back waits for it, and close() for the give-back.
    this.unanswered++;
    this.publishCommandAnswer = this.redis
      .call('COMMAND', 'INFO', 'SPUBLISH')
      .then((info) => (this.publishCommandKnown = Array.isArray(info) && info[0] ? 'spublish' : 'publish'))
      .catch(() => {
        this.publishCommandAnswer = undefined; // ask again next time
        return 'publish' as PublishCommand;
      })
      .finally(() => this.unanswered--);
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
   * `ClientClosedError`, and closes the connections this client created: first it waits for the
   * replies of the calls it settled and gives back what they took (see answersIn), then a polite
   * QUIT; both within `QUIT_TIMEOUT_MS`, after which the socket is cut. Held locks are not released:
   * they expire after their lease.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.renewal.close();
    this.heartbeat.close();
    this.redis.off('ready', this.onReconnect);
    this.redis.off('close', this.onDrop);
    this.redis.off('ready', this.onReady);
    this.stopReviving();
    this.unname();
    const error = new ClientClosedError();
    this.closing.abort(error);
    for (const reject of this.inFlight) reject(error);
    this.inFlight.clear();
    const deadline = performance.now() + QUIT_TIMEOUT_MS;
    await this.pubsub.close();
    // Also on a connection the user owns: its owner may quit it right after close(), which
    // would put QUIT ahead of a give-back. (Past the deadline, a reply that still comes on it
    // is given back through it too.)
    await this.answersIn(deadline);
    if (this.ownsRedis) await quitWithin(this.redis, Math.max(0, deadline - performance.now()));
  }

  /**
   * Waits until every call sent before close() settled it has its reply, and so have the calls
   * those replies set off (the give-backs of `lateReply`, of a local handoff to a waiter that
   * close() woke), or until `deadline`. Without it, an acquire that Redis ran just as close()
   * came took its hold or permits for nobody: a lock then stayed taken for its lease, a plain
   * semaphore's permits for good. Everything before QUIT on the connection is answered first.
   */
  private async answersIn(deadline: number): Promise<void> {
    // A give-back is sent a few promise hops after the reply that calls for it: the count must
    // stay at zero across a turn of the event loop.
    while (performance.now() < deadline) {
      if (this.unanswered === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        if (this.unanswered === 0) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /** `await using client = new LockClient(...)`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
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
   * arrives later goes to `bound.lateReply`, if any, to give back what the call took.
   *
   * While the connection is down the call is not handed to ioredis (whose offline queue would
   * send it whenever the connection came back, even after we gave up on it): it waits for the
   * connection up to `offlineTimeout` or `bound.deadline` (performance.now() ms), whichever
   * comes first, and then rejects with `RedisUnreachableError`. A connection we own that has
   * never been ready and whose attempt failed fails the call at once, naming the cause.
   */
  private command<T>(name: string, call: (redis: ScriptedRedis) => Promise<T>, bound?: CommandBound): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // An attempt (it carries lateReply) that a primitive sends after close() settled its
      // caller (it awaited something first) must not take anything: refused, not sent.
      if (this.closed && bound?.lateReply) return reject(new ClientClosedError());
      let stopWaiting = NOTHING_TO_UNDO;
      const settle = (error: Error): void => {
        stopWaiting();
        this.inFlight.delete(settle);
        reject(error);
      };
      this.inFlight.add(settle);
      const send = (): void => {
        const lateReply = bound?.lateReply;
        let cut = false;
        if (lateReply) {
          stopWaiting = this.cutWhenDue(name, bound, (error) => {
            cut = true;
            bound.cutShort?.();
            settle(error);
          });
        }
        this.unanswered++;
        let sent: Promise<T>;
        try {
          sent = call(this.redis as ScriptedRedis);
        } catch (error) {
          sent = Promise.reject(error); // counted and settled like any failed call
        }
        sent.then(
          (value) => {
            this.unanswered--;
            if (!this.inFlight.delete(settle)) {
              // Settled before its reply, by its bound (cut) or by close(): what it took goes back.
              if (cut || this.closed) {
                try {
                  lateReply?.(value)?.catch(() => undefined);
                } catch {
                  // A reply of a shape the primitive did not expect: nothing to give back.
                }
              }
              return;
            }
            stopWaiting();
            resolve(value);
          },
          (error: unknown) => {
            this.unanswered--;
            if (!this.inFlight.delete(settle)) return;
            stopWaiting();
            // A failed AUTH carries the password in its `command.args`.
            reject(this.closed ? new ClientClosedError() : new RedisCommandError(name, redactError(error)));
          },
        );
      };
      const status = this.redis.status;
      // 'wait': a lazyConnect connection connects on its first command.
      if (status === 'ready' || status === 'wait') return send();
      // A give-back sent while close() drains: no connection to wait for.
      if (this.closed) return settle(new ClientClosedError());
      if (this.ownsRedis && !this.everReady && this.lastError && isDefinitive(this.lastError)) return settle(this.unreachable(name, this.lastError));
      // Ours is being made again after ioredis ended it (reviveWhenEnded); one passed in is not.
      if (status === 'end' && (!this.ownsRedis || this.redis.isCluster)) return settle(this.unreachable(name, this.lastError ?? new Error('the connection was closed')));
      stopWaiting = this.whenReady(name, bound, send, settle);
    });
  }

  /**
   * Ends a call Redis has not answered yet when its bound is due (see `CommandBound.lateReply`):
   * calls `cut` with `CallCutShort` at the deadline, or with a signal's reason once it aborted,
   * but never sooner than IN_FLIGHT_GRACE_MS after the call was sent or the signal aborted. A
   * reply that comes within that grace is taken as usual, so on a Redis that answers, a call
   * that rejects has left nothing behind (its caller gives back what it took before rejecting);
   * only a call Redis leaves unanswered is cut, and its late reply given back. Returns the undo.
   */
  private cutWhenDue(name: string, bound: CommandBound, cut: (error: Error) => void): () => void {
    // Not the client's own close signal: close() settles every call under way at once. Leaving
    // it out spares a plain lock() (no deadline, no signal of its own) any listener or timer;
    // skipped in place, as this runs for every attempt.
    const own = this.closing.signal;
    const signals = bound.signals ?? [];
    const dueIn = bound.deadline === undefined ? Infinity : Math.max(bound.deadline - performance.now(), IN_FLIGHT_GRACE_MS);
    if (dueIn === Infinity && signals.every((signal) => signal === own)) return NOTHING_TO_UNDO;
    const deadlineTimer = Number.isFinite(dueIn) ? setTimeout(() => cut(new CallCutShort(name)), dueIn) : undefined;
    let abortTimer: NodeJS.Timeout | undefined;
    const aborted = (signal: AbortSignal): void => {
      abortTimer ??= setTimeout(() => cut(signal.reason as Error), IN_FLIGHT_GRACE_MS);
    };
    const onAbort = (event: Event): void => aborted(event.target as AbortSignal);
    for (const signal of signals) {
      if (signal === own) continue;
      if (signal.aborted) aborted(signal);
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    return () => {
      clearTimeout(deadlineTimer);
      clearTimeout(abortTimer);
      for (const signal of signals) if (signal !== own) signal.removeEventListener('abort', onAbort);
    };
  }

  /**
   * Calls `send` once the connection is ready, or `fail` with `RedisUnreachableError` when the
   * wait runs out (or a connection never ready reports an error); returns the undo.
   */
  private whenReady(name: string, bound: CommandBound | undefined, send: () => void, fail: (error: Error) => void): () => void {
    const signals = bound?.signals ?? [];
    const aborted = signals.find((signal) => signal.aborted);
    if (aborted) {
      fail(aborted.reason as Error);
      return NOTHING_TO_UNDO;
    }
    // A first connection still being made (no error yet) is waited for up to offlineTimeout even
    // past a call's deadline: it normally takes a round trip, and a tryLock({ waitTime: 25 })
    // made right after new LockClient() should try, not fail. Once the connection was lost or
    // failed, the call's own deadline counts.
    const deadline = this.everReady || this.lastError ? bound?.deadline : undefined;
    const waitMs = Math.max(0, Math.min(this.offlineTimeout, (deadline ?? Infinity) - performance.now()));
    const timer = setTimeout(() => {
      const state = this.lastError ? `last error: ${this.lastError.message}` : `connection ${this.redis.status}`;
      fail(this.unreachable(name, Object.assign(new Error(`no connection within ${Math.round(waitMs)} ms (${state})`), { code: 'ETIMEDOUT' })));
    }, waitMs);
    const onAbort = (event: Event): void => fail((event.target as AbortSignal).reason as Error);
    const stop = (): void => {
      clearTimeout(timer);
      this.waitingForReady.delete(wake);
      for (const signal of signals) signal.removeEventListener('abort', onAbort);
    };
    const wake = (error?: Error): void => {
      stop();
      if (error) fail(this.unreachable(name, error));
      else send();
    };
    this.waitingForReady.add(wake);
    for (const signal of signals) signal.addEventListener('abort', onAbort, { once: true });
    return stop;
  }

  /** Where the connection points, for error messages: `host:port`, or the Cluster's startup nodes. */
  private address(): string {
    if (this.redis.isCluster) {
      const nodes = (this.redis as unknown as { startupNodes?: unknown[] }).startupNodes ?? [];
      const names = nodes.map((node: unknown) => (typeof node === 'object' && node ? `${(node as { host?: string }).host ?? '127.0.0.1'}:${(node as { port?: number }).port ?? 6379}` : String(node)));
      return `Cluster ${names.join(',')}`;
    }
    const { host, port, path, sentinels, name } = (this.redis as Redis).options;
    if (sentinels?.length) return `Sentinel master "${name}" (${sentinels.map((s) => `${s.host ?? '127.0.0.1'}:${s.port ?? 26379}`).join(',')})`;
    return path ?? `${host}:${port}`;
  }

  private unreachable(name: string, cause: Error): RedisUnreachableError {
    return new RedisUnreachableError(name, this.address(), redactError(cause));
  }

  private lost(target: RenewalTarget, error: LockLostError): void {
    const event = { name: target.name, key: target.key, clientId: this.id, ownerId: target.owner.id, error };
    if (diagnostics.lost.hasSubscribers) diagnostics.lost.publish(event);
    this.emit('lockLost', event);
  }
}
