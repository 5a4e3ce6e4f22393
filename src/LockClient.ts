import { EventEmitter } from 'node:events';
import { inspect } from 'node:util';
import type { Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { nanoid } from 'nanoid';
import { type LockClientEvents, watchdogReports } from './clientEvents';
import { ClientClosedError, WrongKindError } from './errors';
import { reviveWhenEnded } from './services/reviveEnded';
import { keepListening } from './services/abortListeners';
import { CommandRunner } from './services/CommandRunner';
import { ClusterClocks } from './services/ClusterClocks';
import { RedisClock, type RedisClocks } from './services/RedisClock';
import { nameConnection, openConnection, quitWithin, subscriberOf } from './services/connection';
import { ExpirationRenewal } from './services/ExpirationRenewal';
import type { CommandBound, LockContext } from './services/LockContext';
import { LockPubSub } from './services/LockPubSub';
import { QueueHeartbeat } from './services/QueueHeartbeat';
import { connectionName, kindOf, listLockNames, type LockInfo } from './introspection';
import { checkClientOptions, checkListOptions, type ListLocksOptions, type LockClientOptions } from './options';
import { CountDownLatch } from './primitives/CountDownLatch';
import { FairLock } from './primitives/FairLock';
import { FencedLock } from './primitives/FencedLock';
import { PermitExpirableSemaphore } from './primitives/permitSemaphore/PermitExpirableSemaphore';
import { ReadWriteLock } from './primitives/readWriteLock/ReadWriteLock';
import { RLock } from './primitives/lock/RLock';
import { Semaphore } from './primitives/semaphore/Semaphore';
import { hideFromLogs } from './redact';
import { defineScripts } from './services/scripts';
import { ShardedPublish } from './services/ShardedPublish';

/** How long `close()` waits for QUIT before it cuts the connection. */
const QUIT_TIMEOUT_MS = 1000;

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
  private readonly commands: CommandRunner;
  /** Redis's clock, for the deadlines of counting calls (a resend later than its latch is refused). */
  private readonly clock: RedisClocks;
  /** Aborted by close(): wakes every parked waiter with ClientClosedError. */
  private readonly closing = new AbortController();
  private waiterCount = 0;
  private closed = false;
  private readonly onReconnect: () => void;
  private readonly onDrop: () => void;
  private epoch = 0;
  private readonly unname: () => void;
  private readonly publishing: ShardedPublish;
  private readonly context: LockContext;
  /** Stops remaking our connection after ioredis ended it (see reviveWhenEnded). */
  private readonly stopReviving: () => void;

  constructor(options: LockClientOptions) {
    super();
    // Every wait listens to it through one shared listener, kept for the client's life (abortListeners.ts).
    keepListening(this.closing.signal);
    const checked = checkClientOptions(options);
    this.keyPrefix = checked.keyPrefix;
    this.watchdogTimeout = checked.watchdogTimeout;
    this.name = checked.name;
    const connName = connectionName(this.id, this.name);
    const { redis: connection, owned } = openConnection(checked.redis, connName);
    this.redis = connection;
    this.ownsRedis = owned;
    this.unname = this.ownsRedis ? () => undefined : nameConnection(this.redis, connName);
    const redis = defineScripts(this.redis);
    this.pubsub = new LockPubSub(subscriberOf(redis, connName), () => this.publishing.learn());
    // On Cluster a renewal (or heartbeat) script may only name keys of one slot.
    const batchOf = redis.isCluster ? (key: string) => calculateSlot(key) : () => 0;
    const reports = watchdogReports(this);
    this.renewal = new ExpirationRenewal(redis, this.watchdogTimeout, batchOf, reports.lost, reports.failed);
    this.heartbeat = new QueueHeartbeat(redis, checked.queueTimeout, batchOf);
    // On a Cluster, the clock of each key's own master (the nodes' clocks need not agree).
    this.clock = redis.isCluster ? new ClusterClocks(redis as Cluster) : new RedisClock(redis as Redis);
    // After a reconnect Redis may have restarted empty or failed over: check every kept lock now
    // rather than at the next tick, so that an owner learns of a loss as soon as it can.
    let wasReady = this.redis.status === 'ready';
    this.onReconnect = () => {
      void this.clock.ready(); // Redis may be another server now, with another clock
      if (wasReady) void this.renewal.renewAll();
      wasReady = true;
    };
    this.redis.on('ready', this.onReconnect);
    this.commands = new CommandRunner(this.redis, this.ownsRedis, checked.offlineTimeout, this.closing.signal);
    this.publishing = new ShardedPublish(this.redis.isCluster, this.commands);
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
      offlineTimeout: checked.offlineTimeout,
      redis,
      isCluster: redis.isCluster,
      heartbeat: this.heartbeat,
      pubsub: this.pubsub,
      renewal: this.renewal,
      assertOpen: () => this.assertOpen(),
      command: (name, call, bound?: CommandBound) => this.commands.run(name, call, bound),
      redisTimeAfter: (ms, key) => this.clock.after(ms, key),
      remeasureRedisClock: (key) => this.clock.ready(key),
      connectionEpoch: () => this.epoch,
      publishCommand: () => this.publishing.command(),
      knownPublishCommand: () => this.publishing.known(),
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
    return this.handle(RLock, name);
  }

  /**
   * A handle on the fair lock `name`: first come, first served across processes, the lock handed
   * straight to the next waiter on release (see docs/design.md, "The fair lock").
   */
  getFairLock(name: string): FairLock {
    return this.handle(FairLock, name);
  }

  /** A handle on the counting semaphore `name` (Redisson's RSemaphore; see docs/design.md, "Semaphores"). */
  getSemaphore(name: string): Semaphore {
    return this.handle(Semaphore, name);
  }

  /** A handle on the semaphore `name` whose permits have ids and leases (Redisson's RPermitExpirableSemaphore). */
  getPermitExpirableSemaphore(name: string): PermitExpirableSemaphore {
    return this.handle(PermitExpirableSemaphore, name);
  }

  /** A handle on the count-down latch `name` (Redisson's RCountDownLatch). */
  getCountDownLatch(name: string): CountDownLatch {
    return this.handle(CountDownLatch, name);
  }

  /**
   * A handle on the fenced lock `name`: every first acquire answers a fencing token (bigint)
   * larger than every token minted before for `name`, even after Redis lost its data.
   */
  getFencedLock(name: string): FencedLock {
    return this.handle(FencedLock, name);
  }

  /**
   * A read-write lock `name`: `readLock()` shared, `writeLock()` exclusive, and a waiting writer
   * is never starved by readers (see docs/design.md, "The read-write lock").
   */
  getReadWriteLock(name: string): ReadWriteLock {
    return this.handle(ReadWriteLock, name);
  }

  /**
   * Who holds lock `name`, for how long, and how many clients wait on it (see `RLock.inspect`).
   * A read-write lock (its hash has a `mode`) is answered as `readLock().inspect()` does, with
   * the mode and waiting writers, and a fair lock with waiters as `FairLock.inspect()`, with its
   * queue: `listLocks()` finds both, and a dashboard inspects whatever it found. The name of a
   * semaphore, permit-expirable semaphore or latch (recognised by its kind marker, as `rlock
   * inspect` does) rejects with `WrongKindError` naming the kind and the call that answers for
   * it: their state has another shape than `LockInfo`, which a caller reads as a lock's.
   */
  async inspect(name: string): Promise<LockInfo> {
    // async: a bad name or a closed client rejects, as every other call does, rather than throwing.
    const key = this.getLock(name).key;
    const kind = await this.commands.run('inspect', (redis) => kindOf(redis, this.keyPrefix, key));
    if (kind === 'semaphore' || kind === 'permits' || kind === 'latch') {
      const getter = kind === 'semaphore' ? 'getSemaphore' : kind === 'permits' ? 'getPermitExpirableSemaphore' : 'getCountDownLatch';
      throw new WrongKindError(name, kind, `${getter}(${JSON.stringify(name)}).inspect()`);
    }
    return this.inspectAs(name, kind === 'rw' || kind === 'fair' ? kind : 'lock');
  }

  /** @internal Lock `name` inspected as the kind of lock given, by its own handle (the CLI, which knows the kind, and `inspect`). */
  inspectAs(name: string, kind: 'lock' | 'fair' | 'rw'): Promise<LockInfo> {
    if (kind === 'rw') return this.getReadWriteLock(name).readLock().inspect();
    if (kind === 'fair') return this.getFairLock(name).inspect();
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
    const command = <T>(call: () => Promise<T>): Promise<T> => this.commands.run('listLocks', () => call());
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
   * replies of the calls it settled and gives back what they took (`CommandRunner.answersIn`),
   * then a polite QUIT; both within `QUIT_TIMEOUT_MS`, after which the socket is cut. Held locks
   * are not released: they expire after their lease.
   */
  close(): Promise<void> {
    // A second call (an `await using` around an explicit close(), two shutdown hooks) waits for
    // the first: resolved early, it let its caller quit a connection passed in before close()
    // had given back what in-flight acquires took, which then stayed held for their lease.
    return (this.closeCall ??= this.closeOnce());
  }

  private closeCall: Promise<void> | undefined;

  private async closeOnce(): Promise<void> {
    this.closed = true;
    this.commands.close();
    this.renewal.close();
    this.heartbeat.close();
    this.redis.off('ready', this.onReconnect);
    this.clock.close();
    this.redis.off('close', this.onDrop);
    this.stopReviving();
    this.unname();
    const error = new ClientClosedError();
    this.closing.abort(error);
    this.commands.settleAll(error);
    const deadline = performance.now() + QUIT_TIMEOUT_MS;
    await this.pubsub.close();
    // Also on a connection the user owns: its owner may quit it right after close(), which
    // would put QUIT ahead of a give-back. (Past the deadline, a reply that still comes on it
    // is given back through it too.)
    await this.commands.answersIn(deadline);
    if (this.ownsRedis) await quitWithin(this.redis, Math.max(0, deadline - performance.now()));
  }

  /** `await using client = new LockClient(...)`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Counters of the client's internal state, for tests and dashboards: holds the watchdog keeps,
   * channels subscribed (with waiters, or kept subscribed past them while the lock is with this
   * client: not a measure of contention, `waiters` is), and parked waiters.
   */
  get stats(): { renewals: number; waitingChannels: number; waiters: number } {
    return { renewals: this.renewal.size, waitingChannels: this.pubsub.channelCount, waiters: this.waiterCount };
  }

  /** A handle of kind `Handle` on `name`, once the client is checked open. */
  private handle<T>(Handle: new (context: LockContext, name: string) => T, name: string): T {
    this.assertOpen();
    return new Handle(this.context, name);
  }

  private assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }
}
