import type { ScriptedRedis } from './scripts';

/**
 * How much earlier than its latch expires a call's deadline falls: room for the error of the
 * clock estimate (half a round trip, the local clock's drift between measures) and for the
 * Redis clock itself, which latches expire by.
 */
export const STALE_MARGIN_MS = 10_000;

/** A measure older than this is taken again (at the next deadline asked for). */
const MEASURE_EVERY_MS = 60_000;

/** A measure whose round trip took longer is dropped: its error could reach the margin. */
const MAX_MEASURE_RTT_MS = 1_000;

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
 * `performance.now()` plus an offset measured with `TIME` when the connection is ready and again
 * at most once a minute; until a first measure answers (or if `TIME` is refused), calls carry no
 * deadline (0) and run as before.
 */
export class RedisClock {
  private offset: number | undefined;
  private measuredAt = -Infinity;
  private measuring = false;

  /** Its owner calls `measure()` whenever the connection is ready (the client's one `ready` listener). */
  constructor(private readonly redis: ScriptedRedis) {
    this.measure();
  }

  /** Redis's time `ms` from now (ms since the epoch), or 0 when it is not known. */
  after(ms: number): number {
    if (performance.now() - this.measuredAt > MEASURE_EVERY_MS) this.measure();
    return this.offset === undefined ? 0 : Math.floor(performance.now() + this.offset + ms);
  }

  /** Measures the offset now, unless a measure is under way or the connection is not ready. */
  measure(): void {
    if (this.measuring || this.redis.status !== 'ready') return;
    this.measuring = true;
    const sent = performance.now();
    this.redis.time().then(
      ([seconds, micros]) => {
        this.measuring = false;
        const answered = performance.now();
        if (answered - sent > MAX_MEASURE_RTT_MS) return;
        this.offset = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (sent + answered) / 2;
        this.measuredAt = answered;
      },
      () => {
        // Refused (an ACL without +time) or lost: no deadline until a measure answers. Not asked
        // again before a minute passes.
        this.measuring = false;
        this.measuredAt = performance.now();
      },
    );
  }
}
