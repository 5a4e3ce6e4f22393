import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import type { LocalHandoff } from './LocalHandoff';
import { IN_FLIGHT_GRACE_MS } from './LockContext';
import type { PublishCommand } from './scripts';
import { reviveWhenEnded } from './reviveEnded';
import { WakeQueue } from './WakeQueue';

/**
 * A counted message, published by the semaphore and latch scripts: `wake:<count>` or `wake:all`,
 * optionally followed by `:<releaser>` (the releasing client's id, possibly empty) and then by
 * `:<field>` (a grant for the waiter that expects that field).
 */
const COUNTED_MESSAGE = /^wake:(\d+|all)(?::([\w-]*))?(?::(.+))?$/s;

/** A grant a message (or a release's reply) brought: `redisMicros`, when given, is Redis's time of the grant (a fair lock's). */
export interface Grant {
  readonly redisMicros: number | undefined;
}

/**
 * The owner field a grant names and its Redis time: `message` is the field, or (a fair lock's)
 * "<field>@<µs>". A stamp that is not a whole number of µs (forged, garbled) counts as none.
 */
function parseGrant(message: string): { field: string; grant: Grant } {
  const at = message.lastIndexOf('@');
  if (at < 0) return { field: message, grant: { redisMicros: undefined } };
  const stamp = Number(message.slice(at + 1));
  return { field: message.slice(0, at), grant: { redisMicros: Number.isSafeInteger(stamp) ? stamp : undefined } };
}

/**
 * Keeps a channel entry past its last waiter, for a primitive whose state outlives its waiters
 * (RLock's WaitingClient: the lock is with this client, its waiters come back soon).
 */
export interface EntryKeeper {
  /** The last waiter left: true keeps the entry subscribed; the keeper calls `drop` itself later. */
  lingers(drop: () => void): boolean;
  /** A waiter joined the entry again. */
  joined(): void;
  /** A message came (before it wakes anyone). */
  heard(): void;
  /** A message came while no waiter is there. */
  unheard(): void;
  /** The entry is gone (unsubscribed); `closing`: the client is closing. */
  dropped(closing: boolean): void;
}

/**
 * The waiters of one channel. Each release message is one wake-up (`wakeups`), so it wakes one
 * parked waiter. A message that comes while no waiter is parked leaves one wake-up (never more)
 * for the next to park, which then retries at once instead of sleeping through a free lock;
 * more stored wake-ups would send every waiter back to Redis in a burst that only one of them
 * can win.
 */
export class ChannelEntry {
  refCount = 0;
  /** On a Cluster: the node(s) serving the channel's slot when last looked, to notice it moving. */
  slotOwner: string | undefined;
  readonly wakeups = new WakeQueue();
  /** Settles true once SUBSCRIBE is confirmed, false when it failed (waiters then fall back to pttl sleeps). */
  subscribed: Promise<boolean> = Promise.resolve(false);
  /** True once SUBSCRIBE is confirmed: from then on every release of the lock reaches this entry. */
  confirmed = false;
  /** SUBSCRIBE failed; retried on the next reconnect or slot refresh. */
  failed = false;
  /** When the last SUBSCRIBE was sent (performance.now()). */
  subscribeSentAt = 0;
  /** Told when a SUBSCRIBE of this entry is answered (confirmed or failed). */
  readonly onSubscribeSettled = new Set<() => void>();
  /**
   * Targeted wake-ups (a fair lock's grants): the message names the owner field it is for.
   * Waiters register before they ask to be queued, because a grant can beat the reply to that
   * request; a grant for a registered waiter that is not parked yet is kept until it parks.
   */
  private readonly expected = new Map<string, ((grant: Grant | undefined) => void) | undefined>();
  private readonly grantedEarly = new Map<string, Grant>();
  /** When each expected waiter's wait first asked to be queued (performance.now() at the send). */
  private readonly queuingSince = new Map<string, number>();
  /** RLock's handoffs between waiters of this client, made by the first RLock waiter to need it. */
  local: LocalHandoff | undefined;
  /** Set by a primitive whose entry may outlive its waiters. */
  keeper: EntryKeeper | undefined;

  /**
   * A message arrived on the channel. A counted message (`COUNTED_MESSAGE`) wakes that many
   * waiters (a semaphore's release of k permits) and may also grant one named waiter; a message
   * naming an expected field is that waiter's grant; any other wakes one waiter.
   */
  deliver(message: string): void {
    this.keeper?.heard();
    if (this.refCount === 0 && this.keeper) {
      this.keeper.unheard();
      return;
    }
    const counted = COUNTED_MESSAGE.exec(message);
    if (counted) {
      if (counted[3] !== undefined) this.grant(counted[3]);
      // A release of this client while it yields its turn wakes none of its waiters; another
      // client's release ends the yield (LocalHandoff.heard).
      if (counted[2] && this.local && !this.local.heard(counted[2])) return;
      if (counted[1] === 'all') this.wakeAll();
      else this.wake(Number(counted[1]));
      return;
    }
    if (this.local && !this.local.heard(message)) return;
    if (!this.grant(message)) this.wakeOne();
  }

  /**
   * Hands a grant to its waiter (kept until it parks); false when no such waiter is expected
   * here. `message` is the owner field, or (a fair lock's) "<field>@<µs>" with the grant's Redis time.
   */
  private grant(message: string): boolean {
    if (this.expected.size === 0) return false;
    const { field, grant } = parseGrant(message);
    if (!this.expected.has(field)) return false;
    const parked = this.expected.get(field);
    if (parked) parked(grant);
    else this.grantedEarly.set(field, grant);
    return true;
  }

  /**
   * Wakes up to `count` parked waiters: as many as could now succeed, not one and not all.
   * Wake-ups for waiters not parked yet are kept, but never more than there are waiters.
   */
  wake(count: number): void {
    const missing = Math.min(count, this.refCount) - this.wakeups.value;
    if (missing > 0) this.wakeups.release(missing);
  }

  /** Wakes one parked waiter, or stores one permit when none is parked and none is stored. */
  wakeOne(): void {
    if (this.wakeups.value < 1) this.wakeups.release();
  }

  /** Every waiter tries again (a reconnect or a moved slot may have lost messages). */
  wakeAll(): void {
    const missing = this.refCount - this.wakeups.value;
    if (missing > 0) this.wakeups.release(missing);
    for (const parked of this.expected.values()) parked?.(undefined);
  }

  /** From now on a message naming `field` is a grant for this waiter. */
  expectGrant(field: string): void {
    this.expected.set(field, undefined);
  }

  forgetGrant(field: string): void {
    this.expected.delete(field);
    this.grantedEarly.delete(field);
    this.queuingSince.delete(field);
  }

  /** The waiter expecting `field` sends a request that may queue it (the first one of its wait counts). */
  queuing(field: string, sentAt: number): void {
    if (!this.queuingSince.has(field)) this.queuingSince.set(field, sentAt);
  }

  /**
   * A release of this client, sent at `sentAt`, granted `field` and said so in its reply instead
   * of a message. Told like a message, unless that waiter's wait asked to be queued only after
   * the release was sent: then the reply is one replayed from the release's latch (ioredis
   * resent the release after a reconnect) for an earlier wait of the same owner, which took the
   * lock by asking meanwhile. Both go over one connection, in order, so a grant for this wait
   * comes from a release sent after its queuing request.
   */
  grantFromReply(grant: string, sentAt: number): void {
    const since = this.queuingSince.get(parseGrant(grant).field);
    if (since !== undefined && since < sentAt) this.grant(grant);
  }

  /** Resolves with the grant for `field`, undefined after `ms` or on `wakeAll`; rejects like `untilSubscribed` on abort. */
  async untilGranted(field: string, ms: number, stops: AbortSignal[]): Promise<Grant | undefined> {
    let granted: Grant | undefined;
    await boundedWait(ms, stops, (done) => {
      const early = this.grantedEarly.get(field);
      if (early) {
        this.grantedEarly.delete(field);
        granted = early;
        done();
        return undefined;
      }
      this.expected.set(field, (value) => {
        granted = value;
        done();
      });
      return () => {
        if (this.expected.has(field)) this.expected.set(field, undefined);
      };
    });
    return granted;
  }

  /** Resolves once subscribed or after `ms`, whichever is first; rejects with the reason of the first of `stops` to abort. */
  untilSubscribed(ms: number, stops: AbortSignal[]): Promise<void> {
    return boundedWait(ms, stops, (done) => {
      // The latest SUBSCRIBE's outcome: one may be sent again while waiters wait (see followSlots).
      const settled = (): void => done();
      this.onSubscribeSettled.add(settled);
      void this.subscribed.then(settled);
      return () => this.onSubscribeSettled.delete(settled);
    });
  }

  /**
   * Resolves on a release message (consuming its permit) or after `ms`; rejects like
   * `untilSubscribed` on abort. `parked`, when given, is told how to end the wait early (a
   * local handoff claims the waiter) and, through the function it returns, when the wait ended.
   */
  untilReleased(ms: number, stops: AbortSignal[], parked?: (interrupt: () => void) => () => void): Promise<void> {
    return boundedWait(ms, stops, (done) => {
      // A wait that ends otherwise leaves the queue, so a later wake-up goes to a waiter still there.
      const leave = this.wakeups.park(() => done());
      const ended = parked?.(() => done());
      return () => {
        leave();
        ended?.();
      };
    });
  }
}

/**
 * Waits for `start`'s callback, at most `ms` (Infinity: no bound), or until one of `stops` aborts.
 * `start` may return a function that is told the wait is over.
 */
export function boundedWait(
  ms: number,
  stops: AbortSignal[],
  start: (done: () => void) => (() => void) | undefined,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stopped = stops.find((stop) => stop.aborted);
    if (stopped) {
      reject(stopped.reason);
      return;
    }
    let finished = false;
    // Declared up front: `start` may call done() before it returns (a grant that came early).
    const cleanup: { end?: () => void } = {};
    const finish = (error?: unknown): void => {
      if (finished) return;
      finished = true;
      if (timer !== undefined) clearTimeout(timer);
      for (const stop of stops) stop.removeEventListener('abort', onAbort);
      cleanup.end?.();
      if (error === undefined) resolve();
      else reject(error);
    };
    const onAbort = (event: Event): void => finish((event.target as AbortSignal).reason ?? new Error('aborted'));
    const timer = Number.isFinite(ms) ? setTimeout(() => finish(), Math.max(0, ms)) : undefined;
    for (const stop of stops) stop.addEventListener('abort', onAbort, { once: true });
    cleanup.end = start(() => finish());
    if (finished) cleanup.end?.();
  });
}

/**
 * Waits for `work` to settle, at most IN_FLIGHT_GRACE_MS: a give-back or a leave that a wait
 * ending must not outlast by more (Redis frozen). The work goes on; Redis runs it when it answers.
 */
export function settledWithinGrace(work: Promise<unknown>): Promise<void> {
  return boundedWait(IN_FLIGHT_GRACE_MS, [], (done) => {
    work.then(done, done);
    return undefined;
  });
}

/** How long a sharded SUBSCRIBE may go unanswered before a slot refresh sends it again. */
const SUBSCRIBE_ANSWER_MS = 1000;

/**
 * One subscriber connection per client, created on first need, shared by every lock's waiters:
 * one entry per channel, reference-counted; the last waiter to leave unsubscribes.
 */
export class LockPubSub {
  private subscriber: Redis | Cluster | undefined;
  private readonly entries = new Map<string, ChannelEntry>();
  private wasReady = false;
  private publishCommand: Promise<PublishCommand> | undefined;
  private closed = false;
  private stopReviving: () => void = () => undefined;
  /** The tail of the (un)subscribe queue, see `serially`. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly createSubscriber: (sharded: boolean) => Redis | Cluster,
    /** `spublish` when releases are published sharded (Cluster, Redis >= 7), else `publish`. */
    private readonly detectPublishCommand: () => Promise<PublishCommand>,
  ) {}

  /** Channels with waiters; for tests and introspection. */
  get channelCount(): number {
    return this.entries.size;
  }

  get connection(): Redis | Cluster | undefined {
    return this.subscriber;
  }

  join(channel: string): ChannelEntry {
    let entry = this.entries.get(channel);
    if (!entry) {
      entry = new ChannelEntry();
      this.entries.set(channel, entry);
      this.subscribe(channel, entry);
    } else if (entry.refCount === 0) {
      entry.keeper?.joined();
    }
    entry.refCount++;
    return entry;
  }

  /** The entry of `channel` if it has waiters now, without joining it. */
  peek(channel: string): ChannelEntry | undefined {
    return this.entries.get(channel);
  }

  leave(channel: string, entry: ChannelEntry): void {
    entry.refCount--;
    if (entry.refCount > 0 || this.entries.get(channel) !== entry) return;
    if (entry.keeper?.lingers(() => this.drop(channel, entry))) return;
    this.drop(channel, entry);
  }

  private drop(channel: string, entry: ChannelEntry): void {
    if (entry.refCount > 0 || this.entries.get(channel) !== entry) return;
    this.entries.delete(channel);
    entry.wakeups.cancel();
    entry.local?.stopYielding();
    entry.keeper?.dropped(false);
    if (!this.subscriber) return; // never subscribed
    this.unsubscribe(channel);
  }

  /** Queues an UNSUBSCRIBE of `channel` (sharded or not, as subscribed); a failure changes nothing we rely on. */
  private unsubscribe(channel: string): void {
    this.serially(async (subscriber, sharded) => {
      await (sharded ? subscriber.sunsubscribe(channel) : subscriber.unsubscribe(channel));
    }).catch(() => undefined);
  }

  /** Disconnects; waiters still parked are woken by the caller's abort, not here. */
  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.entries.values()) {
      entry.wakeups.cancel();
      entry.local?.stopYielding();
      entry.keeper?.dropped(true);
    }
    this.entries.clear();
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.stopReviving();
    if (subscriber) subscriber.disconnect();
  }

  private subscribe(channel: string, entry: ChannelEntry): void {
    entry.failed = false;
    entry.subscribed = this.serially(async (subscriber, sharded) => {
      if (this.entries.get(channel) !== entry) return false; // every waiter left meanwhile
      if (subscriber.isCluster) entry.slotOwner = (subscriber as Cluster).slots[calculateSlot(channel)]?.join(',');
      entry.subscribeSentAt = performance.now();
      await (sharded ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel));
      entry.confirmed = true;
      return true;
    }).catch(() => {
      entry.failed = true; // tried again on the next reconnect or slot refresh
      return false;
    });
    void entry.subscribed.then(() => {
      for (const settled of [...entry.onSubscribeSettled]) settled();
    });
  }

  /** Subscriptions that failed, tried again (their waiters meanwhile sleep at most their pttl). */
  private retryFailed(): void {
    for (const [channel, entry] of this.entries) if (entry.failed) this.subscribe(channel, entry);
  }

  /**
   * Sends the (un)subscribes one after another, in the order join/leave asked for them, so a later
   * SUBSCRIBE wins; the next is sent without waiting for the reply. On a Cluster each waits until
   * the subscriber is ready: ioredis would queue it offline and, on ready, route it by a slot map
   * that may lack the slot (a slot not served), and the TypeError that ioredis 5/6 then throws
   * escapes into the process. Sent while ready, the same failure is a rejection here.
   */
  private serially<T>(send: (subscriber: Redis | Cluster, sharded: boolean) => Promise<T>): Promise<T> {
    const turn = this.queue.then(async () => {
      // After close() a queued call must not open a new subscriber (nothing would close it).
      if (this.closed) throw new Error('closed');
      const sharded = (await this.mode()) === 'spublish';
      // Asked again after every wait: a close() meanwhile left no subscriber, and connect()
      // would open a new one (an UNSUBSCRIBE of a waiter that left just before close() did).
      if (this.closed) throw new Error('closed');
      const subscriber = this.connect(sharded);
      if (subscriber.isCluster && subscriber.status !== 'ready') {
        await new Promise((resolve) => subscriber.once('ready', resolve));
        if (this.closed) throw new Error('closed');
      }
      return { reply: send(subscriber, sharded) }; // boxed: the queue waits for the send, not the reply
    });
    this.queue = turn.catch(() => undefined);
    return turn.then(({ reply }) => reply);
  }

  private followSlots(cluster: Cluster): void {
    for (const [channel, entry] of this.entries) {
      // A sharded SUBSCRIBE sent while the slot moved can go unanswered for good (routed by a
      // slot map ioredis had not refreshed yet): one still unanswered a refresh later is sent again.
      if (!entry.confirmed && !entry.failed && entry.subscribeSentAt > 0 && performance.now() - entry.subscribeSentAt > SUBSCRIBE_ANSWER_MS) {
        // ioredis keeps the channel as subscribed: an unsubscribe first, or it sends nothing.
        this.unsubscribe(channel);
        this.subscribe(channel, entry);
        entry.wakeAll();
        continue;
      }
      const owner = cluster.slots[calculateSlot(channel)]?.join(',');
      if (entry.slotOwner !== undefined && owner !== entry.slotOwner) {
        // ioredis does not always carry a sharded subscription over to the slot's new node (an
        // entry kept past its waiters, RLock's, was left with none): subscribe it again ourselves.
        entry.confirmed = false;
        this.subscribe(channel, entry);
        entry.wakeAll();
      }
      entry.slotOwner = owner;
    }
  }

  private mode(): Promise<PublishCommand> {
    return (this.publishCommand ??= this.detectPublishCommand());
  }

  private connect(sharded: boolean): Redis | Cluster {
    if (this.subscriber) return this.subscriber;
    const subscriber = this.createSubscriber(sharded);
    const wake = (channel: string, message: string): void => this.entries.get(channel)?.deliver(message);
    subscriber.on('message', wake);
    subscriber.on('smessage', wake);
    // ioredis resubscribes by itself after a reconnect; releases published while we were away
    // are lost, so every waiter retries once now instead of sleeping out its pttl.
    subscriber.on('ready', () => {
      if (this.wasReady) {
        // ioredis resubscribes only the channels its own set holds, which misses one whose
        // SUBSCRIBE was in flight when the connection dropped (the soak saw waiters then sleep out
        // the holder's whole lease): subscribe every channel again ourselves (a repeated
        // SUBSCRIBE is harmless), and let every waiter retry once.
        for (const [channel, entry] of this.entries) {
          entry.confirmed = false;
          this.subscribe(channel, entry);
          entry.wakeAll();
        }
      }
      this.wasReady = true;
      this.retryFailed();
    });
    // Connection errors are retried by ioredis; without a listener it would log each one.
    subscriber.on('error', () => undefined);
    if (subscriber.isCluster) {
      // A slot that moves (migration, failover) takes its sharded subscriptions with it: ioredis
      // moves ours on its next slots refresh, but releases published meanwhile are lost, so the
      // waiters of a moved channel retry once at once instead of sleeping out their pttl.
      subscriber.on('refresh', () => {
        this.followSlots(subscriber as Cluster);
        this.retryFailed();
      });
    }
    // ioredis can end it for good (see reviveWhenEnded); a Cluster remakes its connections itself.
    if (!subscriber.isCluster) this.stopReviving = reviveWhenEnded(subscriber as Redis, () => !this.closed && this.subscriber === subscriber);
    this.subscriber = subscriber;
    return subscriber;
  }
}
