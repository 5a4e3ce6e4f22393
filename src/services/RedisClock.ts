import type { Redis } from 'ioredis';

/**
 * How much earlier than its latch expires a call's deadline falls: room for the error of the
 * clock estimate (half a round trip, the local clock's drift between measures) and for the
 * Redis clock itself, which latches expire by.
 */
export const STALE_MARGIN_MS = 10_000;

/** What a counting call asks of Redis's clock: the estimate for the server its key lives on. */
export interface RedisClocks {
  /** Redis's time `ms` from now (ms since the epoch) on the server that holds `key`, or 0 when it is not known. */
  after(ms: number, key: string): number;
  /** Measures afresh (the clock of `key`'s server; without a key, every clock): see RedisClock.ready. */
  ready(key?: string): Promise<void>;
  /** Stops listening to the connections it watches. */
  close(): void;
}

/** A measure older than this is taken again (at the next deadline asked for). */
const MEASURE_EVERY_MS = 60_000;

/** A measure whose round trip took longer is dropped: its error could reach the margin. */
const MAX_MEASURE_RTT_MS = 1_000;

/** How far the wall clock and the monotonic one may part between measures before the offset is dropped. */
const MAX_CLOCKS_APART_MS = 1_000;

/**
 * An estimate of Redis's clock (ms since the epoch, as `TIME` says), so that a call can carry a
 * deadline in Redis's own time: a script refuses a call that reaches it later (`fresh.lua`).
 *
 * Why: ioredis resends a call whose connection dropped before the reply, after the reconnect;
 * a counting call (a semaphore's release, a latch's countDown) is made safe to resend by a latch
 * that keeps its first run's answer for a while (60 s; 10 min for an `operationId`). A resend
 * that arrives after its latch expired (an outage that long, on a connection with
 * `maxRetriesPerRequest: null`) ran again: permits given back twice. A deadline just short of the
 * latch's expiry turns that into a refusal (`STALE`). The client's own clock cannot be compared
 * with Redis's (they may differ by seconds, or jump), so the estimate is the monotonic
 * `performance.now()` plus an offset measured with `TIME` each time the connection is ready and
 * again at most once a minute. Without an offset (before a first measure answers, after a
 * reconnect until the next one does, after the host was suspended, or when `TIME` is refused),
 * calls carry no deadline (0) and run as before.
 */
export class RedisClock implements RedisClocks {
  private offset: number | undefined;
  /** When the offset was measured, on the monotonic clock and on the wall clock. */
  private measuredAt = 0;
  private measuredAtWall = 0;
  /** When a deadline asked for measures again (performance.now()). */
  private nextMeasureAt = 0;
  /** The measure under way, if any: a later one (a reconnect's) makes its answer void. */
  private measuring: Promise<void> | undefined;

  /**
   * Its owner calls `ready()` whenever the connection is ready (the client's one `ready` listener).
   * `connects`: a connection not made yet (status 'wait') is made by the first measure: a
   * Cluster's node connections, which ioredis makes lazily. Not a connection the user passed in
   * with `lazyConnect`: theirs to connect (the client measures once it is ready).
   */
  constructor(
    private readonly redis: Pick<Redis, 'time' | 'status'>,
    private readonly connects = false,
  ) {
    this.measure();
  }

  /** Redis's time `ms` from now (ms since the epoch), or 0 when it is not known. */
  after(ms: number): number {
    const now = performance.now();
    // The monotonic clock stops while the host is suspended, and Redis's does not.
    if (this.offset !== undefined && Math.abs(Date.now() - this.measuredAtWall - (now - this.measuredAt)) > MAX_CLOCKS_APART_MS) {
      this.offset = undefined;
      this.nextMeasureAt = 0;
    }
    if (now >= this.nextMeasureAt) this.measure();
    return this.offset === undefined ? 0 : Math.floor(now + this.offset + ms);
  }

  /**
   * The connection is ready again, maybe to another server with another clock (or a call sent
   * once was refused as late): the offset is measured afresh, and a measure sent before (resent
   * now, its round trip long) counts for nothing. Settles when the new measure does, or after
   * MAX_MEASURE_RTT_MS (a frozen Redis answers nothing), whichever comes first.
   */
  ready(): Promise<void> {
    this.offset = undefined;
    this.measuring = undefined;
    this.nextMeasureAt = 0;
    const measured = this.measure();
    if (!measured) return Promise.resolve();
    return new Promise((resolve) => {
      // Unref'd: it only bounds a wait the connection's socket keeps alive anyway.
      const timer = setTimeout(resolve, MAX_MEASURE_RTT_MS);
      timer.unref();
      void measured.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Nothing to stop: its owner listens to the connection's `ready`. */
  close(): void {}

  /** Sends a measure unless one is under way or the connection is down; returns it (it never rejects). */
  private measure(): Promise<void> | undefined {
    if (this.measuring || (this.redis.status !== 'ready' && !(this.connects && this.redis.status === 'wait'))) return undefined;
    const sent = performance.now();
    const measuring: Promise<void> = this.redis.time().then(
      ([seconds, micros]) => {
        if (this.measuring !== measuring) return;
        this.measuring = undefined;
        const answered = performance.now();
        if (answered - sent > MAX_MEASURE_RTT_MS) {
          this.nextMeasureAt = answered + MAX_MEASURE_RTT_MS; // Redis was slow: again soon
          return;
        }
        this.offset = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (sent + answered) / 2;
        this.measuredAt = answered;
        this.measuredAtWall = Date.now();
        this.nextMeasureAt = answered + MEASURE_EVERY_MS;
      },
      () => {
        // Refused (an ACL without +time) or lost: no deadline until a measure answers; not asked
        // again before a minute passes.
        if (this.measuring !== measuring) return;
        this.measuring = undefined;
        this.nextMeasureAt = performance.now() + MEASURE_EVERY_MS;
      },
    );
    this.measuring = measuring;
    return measuring;
  }
}
