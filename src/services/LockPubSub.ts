import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { ChannelEntry } from './ChannelEntry';
import type { PublishCommand } from './scripts';
import { reviveWhenEnded } from './reviveEnded';
import { refreshSlotsEvery, SUBSCRIBER_SLOTS_REFRESH_MS } from './slotsRefresh';

/**
 * Resolves when `subscriber` is ready; rejects when it ends first (closed by us, or given up by
 * ioredis): a subscribe that fails so is tried again on the next 'ready' (retryFailed), and its
 * waiters poll at their pttl meanwhile, instead of the serial queue waiting for good.
 */
function untilReady(subscriber: Redis | Cluster): Promise<void> {
  if (subscriber.status === 'end') return Promise.reject(new Error('the subscriber connection ended'));
  return new Promise((resolve, reject) => {
    const onReady = (): void => {
      subscriber.off('end', onEnd);
      resolve();
    };
    const onEnd = (): void => {
      subscriber.off('ready', onReady);
      reject(new Error('the subscriber connection ended'));
    };
    subscriber.once('ready', onReady);
    subscriber.once('end', onEnd);
    // A duplicate of a lazyConnect connection connects on its first command, which now waits.
    if (subscriber.status === 'wait') subscriber.connect().catch(() => undefined);
  });
}

/** How long a sharded SUBSCRIBE may go unanswered before a slot refresh sends it again. */
const SUBSCRIBE_ANSWER_MS = 1000;

/** How long the subscriber waits before it asks again how releases are published. */
const MODE_RETRY_MS = 500;

/** The pause before a SUBSCRIBE that Redis refused is sent again (see retryFailedSoon). */
const FAILED_SUBSCRIBE_RETRY_MS = 1000;

/**
 * One subscriber connection per client, created on first need, shared by every lock's waiters:
 * one entry per channel, reference-counted; the last waiter to leave unsubscribes.
 */
export class LockPubSub {
  private subscriber: Redis | Cluster | undefined;
  private readonly entries = new Map<string, ChannelEntry>();
  private wasReady = false;
  private publishCommand: Promise<PublishCommand> | undefined;
  /** The pause before the mode is asked again; close() ends it. */
  private modeRetry: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  private closed = false;
  /** Stops what keeps the subscriber going: remaking it after ioredis ended it, or refreshing a Cluster's slot map. */
  private stopKeeping: () => void = () => undefined;
  /** The tail of the (un)subscribe queue, see `serially`. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly createSubscriber: (sharded: boolean) => Redis | Cluster,
    /**
     * `spublish` when releases are published sharded (Cluster, Redis >= 7), else `publish`;
     * rejects when Redis could not answer.
     */
    private readonly detectPublishCommand: () => Promise<PublishCommand>,
  ) {}

  /** Channels subscribed: with waiters, or kept past them (an entry's keeper); for tests and introspection. */
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
    if (this.modeRetry) {
      clearTimeout(this.modeRetry.timer);
      this.modeRetry.resolve();
    }
    clearTimeout(this.failedRetry);
    for (const entry of this.entries.values()) {
      entry.wakeups.cancel();
      entry.local?.stopYielding();
      entry.keeper?.dropped(true);
    }
    this.entries.clear();
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.stopKeeping();
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
      entry.failed = true; // tried again on the next reconnect or slot refresh, and soon (below)
      this.retryFailedSoon();
      return false;
    });
    void entry.subscribed.then(() => {
      for (const link of entry.onSubscribeSettled.links()) link.value?.();
    });
  }

  /**
   * Subscribes `channel` again (a reconnect, a moved slot) and lets every waiter retry once when
   * Redis has answered the SUBSCRIBE (or refused it): releases published while it was away are
   * lost, and so is one published before that answer, so a retry any sooner could miss it and a
   * waiter with no bound (a latch's awaiter) would then sleep for good.
   */
  private resubscribe(channel: string, entry: ChannelEntry): void {
    entry.confirmed = false;
    this.subscribe(channel, entry);
    void entry.subscribed.then(() => {
      if (this.entries.get(channel) === entry) entry.wakeAll();
    });
  }

  /** Every channel subscribed again, its waiters woken once answered: after a reconnect, releases published meanwhile are lost. */
  private resubscribeAll(): void {
    for (const [channel, entry] of this.entries) this.resubscribe(channel, entry);
  }

  /**
   * Subscriptions that failed, tried again (their waiters meanwhile sleep at most their pttl, a
   * latch's awaiter with no bound at all), and their waiters woken once subscribed: what was
   * published meanwhile reached nobody here (a latch opened then was never seen).
   */
  private retryFailed(): void {
    for (const [channel, entry] of this.entries) if (entry.failed) this.resubscribe(channel, entry);
  }

  /**
   * A SUBSCRIBE Redis refused while the connection stays up (NOPERM from an ACL without the
   * channel, BUSY from a long script) is answered neither by a reconnect nor by a slot refresh:
   * it is sent again after a pause, and again, until it is answered or its waiters leave.
   */
  private retryFailedSoon(): void {
    if (this.closed || this.failedRetry) return;
    // Unref'd: a client never closed must not keep its process alive for this.
    this.failedRetry = setTimeout(() => {
      this.failedRetry = undefined;
      if (!this.closed) this.retryFailed();
    }, FAILED_SUBSCRIBE_RETRY_MS).unref();
  }

  private failedRetry: NodeJS.Timeout | undefined;

  /**
   * Sends the (un)subscribes one after another, in the order join/leave asked for them, so a later
   * SUBSCRIBE wins; the next is sent without waiting for the reply. Each waits until the
   * subscriber is ready. A single connection that is up but not ready yet writes a SUBSCRIBE at
   * once (ioredis lets commands that may run while Redis loads through), ahead of its ready
   * check's INFO, which Redis then refuses in subscriber mode: ioredis dropped the connection and
   * made it again, and waiters could not hear meanwhile (the fair-lock soak saw grants passed
   * over). On a Cluster ioredis would queue it offline and, on ready, route it by a slot map that
   * may lack the slot (a slot not served), and the TypeError that ioredis 5/6 then throws escapes
   * into the process. Sent while ready, the same failure is a rejection here.
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
      if (subscriber.status !== 'ready') await untilReady(subscriber);
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
        this.resubscribe(channel, entry);
        continue;
      }
      const owner = cluster.slots[calculateSlot(channel)]?.join(',');
      if (entry.slotOwner !== undefined && owner !== entry.slotOwner) {
        // ioredis does not always carry a sharded subscription over to the slot's new node (an
        // entry kept past its waiters, RLock's, was left with none): subscribe it again ourselves.
        this.resubscribe(channel, entry);
      }
      entry.slotOwner = owner;
    }
  }

  private mode(): Promise<PublishCommand> {
    return (this.publishCommand ??= this.learnMode());
  }

  /**
   * Asked until Redis answers, the (un)subscribes waiting meanwhile (their waiters sleep at most
   * their bound, and are woken once subscribed): a subscriber made on a guess stays in its mode,
   * deaf to every release published the other way.
   */
  private async learnMode(): Promise<PublishCommand> {
    for (;;) {
      try {
        return await this.detectPublishCommand();
      } catch {
        // Unref'd: a client never closed must not keep its process alive for this.
        if (!this.closed) await new Promise<void>((resolve) => (this.modeRetry = { timer: setTimeout(resolve, MODE_RETRY_MS).unref(), resolve }));
        this.modeRetry = undefined;
        if (this.closed) throw new Error('closed');
      }
    }
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
        this.resubscribeAll();
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
      // A sharded subscriber whose connection to a master dropped (a network blip, CLIENT KILL)
      // gets a new one at ioredis's next slots refresh, which subscribes its channels again and
      // says so with subscribersReady: not ready (the Cluster never went down), nor a slot that
      // moved. Releases published in the gap reached nobody, so this is a reconnect like any
      // other: every channel subscribed again, and its waiters retry once.
      // Only after ioredis replaced a subscriber (-subscriber): it says subscribersReady after
      // any slot map change too, where followSlots wakes the channels that moved and nothing else.
      let replaced = false;
      subscriber.on('-subscriber', () => {
        replaced = true;
      });
      subscriber.on('subscribersReady', () => {
        if (!replaced) return;
        replaced = false;
        if (this.wasReady) this.resubscribeAll();
      });
    }
    // ioredis can end it for good (see reviveWhenEnded); a Cluster remakes its connections itself,
    // and its slot map is refreshed here (see refreshSlotsEvery).
    const wanted = (): boolean => !this.closed && this.subscriber === subscriber;
    this.stopKeeping = subscriber.isCluster ? refreshSlotsEvery(subscriber as Cluster, SUBSCRIBER_SLOTS_REFRESH_MS, wanted) : reviveWhenEnded(subscriber as Redis, wanted);
    this.subscriber = subscriber;
    return subscriber;
  }
}
