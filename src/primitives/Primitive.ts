import { nanoid } from 'nanoid';
import type { WaitProtocol } from '../core/waitLoop';
import type { Hold } from '../services/Hold';
import { waitFor, whileRefused } from '../core/waitLoop';
import { type LockEvent, waitReports } from '../diagnostics';
import { RedisCommandError } from '../errors';
import { latchPrefixOf, RELEASE_LATCH_TTL_MS } from '../names';
import { checkName } from '../options';
import type { ChannelEntry, WakeDebt } from '../services/ChannelEntry';
import { type CommandBound, IDEMPOTENT, type LockContext } from '../services/LockContext';
import { STALE_MARGIN_MS } from '../services/RedisClock';
import type { PublishCommand, ScriptedRedis } from '../services/scripts';
import { OPERATION_ID_TTL_MS } from './permitOptions';

/** One attempt of a waiting call: taken now (with its send time), or not (sleep at most `ttl` ms; negative: no bound). */
export type Attempt = { held: true; sentAt: number } | { held: false; ttl: number };

/** How a primitive parks its waiter instead of the plain wake-up sleep, and what a wait that gives up leaves (see `Primitive.wait`). */
export interface WaitExtra {
  park?: (entry: ChannelEntry, ms: number, stops: AbortSignal[], deadline: number, debt: WakeDebt) => Promise<Hold | undefined> | undefined;
  giveUp?: () => Promise<void>;
}

/**
 * A primitive's own steps, bound to it once (`Primitive.steps`), for the parts a primitive is
 * composed of (its acquire, its release), so that they stay its protected business.
 */
export interface PrimitiveSteps {
  readonly context: LockContext;
  readonly name: string;
  readonly key: string;
  event(ownerId: string): LockEvent;
  publishCommand(): Promise<PublishCommand>;
  newId(): string;
  requestLatch(suffix?: string): string;
  counted<T>(name: string, windowMs: number, call: (redis: ScriptedRedis, notAfter: number) => Promise<T>, bound?: CommandBound): Promise<T>;
  wait(ownerId: string, channel: string, attempt: (listening: ChannelEntry | undefined, bound: CommandBound) => Promise<Attempt>, waitTime: number, signal: AbortSignal | undefined, extra?: WaitExtra): Promise<Hold | undefined>;
  stoppedReason(signal: AbortSignal | undefined): unknown;
}

/**
 * What the semaphores and the latch share: name and key, the client's context, diagnostics,
 * and a wait through the shared `waitFor` loop whose sleep is a wake-up by message (counted
 * messages, see ChannelEntry.deliver) unless the primitive parks its waiter otherwise.
 */
export abstract class Primitive {
  readonly name: string;
  /** The primitive's main Redis key, `<keyPrefix><name>`; its other keys carry it as a hash tag. */
  readonly key: string;

  protected constructor(
    protected readonly context: LockContext,
    name: unknown,
  ) {
    this.name = checkName(name, context.keyPrefix);
    this.key = context.keyPrefix + this.name;
  }

  /** The common part of its diagnostics messages; `ownerId` names the call (or permit). */
  protected event(ownerId: string): LockEvent {
    return { name: this.name, key: this.key, clientId: this.context.clientId, ownerId };
  }

  protected publishCommand(): Promise<PublishCommand> {
    return this.context.publishCommand();
  }

  /** A fresh id for a call or a permit. */
  protected newId(): string {
    return nanoid();
  }

  /**
   * The latch key of one request (see includes/releaseHold.lua): `suffix` names the request,
   * unique within this client; by default a fresh id. It keeps the request's answer for a resend.
   */
  protected requestLatch(suffix = `${this.context.clientId}:${this.newId()}`): string {
    return (this.latchPrefix ??= latchPrefixOf(this.context.keyPrefix, this.key)) + suffix;
  }

  private latchPrefix: string | undefined;

  /**
   * Runs a counting call with a deadline (Redis ms; 0: none) `windowMs` less STALE_MARGIN_MS after
   * its send: a resend later than that is refused with STALE (fresh.lua). `windowMs` is what the
   * call's record surely outlives from its send: its own latch's TTL, or for a caller's
   * `operationId` (whose record dates from the id's first run, maybe minutes before this retry)
   * a request latch's. A refusal of a call sent once (the connection never dropped since, so
   * ioredis resent nothing: Redis was stalled past the deadline, or the clock's estimate is
   * wrong) wrote nothing: the clock is measured again and the call goes once more, with a fresh
   * deadline; refused again, it fails.
   */
  protected async counted<T>(name: string, windowMs: number, call: (redis: ScriptedRedis, notAfter: number) => Promise<T>, bound?: CommandBound): Promise<T> {
    const { context } = this;
    let epoch = -1;
    const send = (redis: ScriptedRedis): Promise<T> => {
      epoch = context.connectionEpoch();
      return call(redis, context.redisTimeAfter(windowMs - STALE_MARGIN_MS, this.key));
    };
    // A give-back (no lateReply: not an attempt, which its wait retries) rides out a slot in flux,
    // its latch answering a resend; within its window less the margins of its deadline.
    const sendRiding = (): Promise<T> => (bound?.lateReply ? context.command(name, send, bound) : whileRefused(context, () => context.command(name, send, bound), windowMs - 2 * STALE_MARGIN_MS));
    try {
      return await sendRiding();
    } catch (error) {
      if (!(error instanceof RedisCommandError && error.code === 'STALE' && epoch === context.connectionEpoch())) throw error;
      await context.remeasureRedisClock(this.key);
      return context.command(name, send, bound);
    }
  }

  /**
   * The latch of a call that adds permits (see requestLatch), its TTL and its bound. With the
   * caller's `operationId`, the id's latch, kept OPERATION_ID_TTL_MS, and a call whose connection
   * drops ends at offlineTimeout, since a retry with the id is safe. Otherwise a fresh latch,
   * which answers ioredis's resend only, and the call waits for ioredis (a retry would add again).
   */
  protected operationLatch(operationId: string | undefined): [latch: string, ttlMs: number, bound: CommandBound | undefined] {
    if (operationId === undefined) return [this.requestLatch(), RELEASE_LATCH_TTL_MS, undefined];
    // Not `<clientId>:`: any process may retry; clientIds never spell `op`.
    return [this.requestLatch(`op:${operationId}`), OPERATION_ID_TTL_MS, IDEMPOTENT];
  }

  /**
   * Waits through `waitFor`: `attempt` until it takes, sleeping between attempts until a message
   * on `channel` (or the bound the attempt gave). `park`, when given, replaces the plain wake-up
   * sleep (the semaphore's waiters: a grant, or permits handed over in-process). Resolves with the hold
   * taken (the send time of the attempt that took it, or of the handoff, and when Redis may end it
   * at the earliest if sooner than a full lease), undefined when `waitTime` ran out.
   */
  protected async wait(
    ownerId: string,
    channel: string,
    attempt: (listening: ChannelEntry | undefined, bound: CommandBound) => Promise<Attempt>,
    waitTime: number,
    signal: AbortSignal | undefined,
    extra: WaitExtra = {},
  ): Promise<Hold | undefined> {
    const protocol: WaitProtocol = {
      channel,
      attempt,
      sleep: async (entry, ms, stops, deadline, debt) => {
        const parked = extra.park?.(entry, ms, stops, deadline, debt);
        if (parked) return parked;
        await entry.untilReleased(ms, stops, undefined, debt);
        return undefined;
      },
      giveUp: extra.giveUp,
      ...waitReports(() => this.event(ownerId)),
    };
    return waitFor(this.context, protocol, waitTime, signal);
  }

  /** This primitive's steps for the parts it is composed of (made on first use: a handle that only reads never needs them). */
  protected get steps(): PrimitiveSteps {
    return (this.stepsMade ??= {
      context: this.context,
      name: this.name,
      key: this.key,
      event: (ownerId) => this.event(ownerId),
      publishCommand: () => this.publishCommand(),
      newId: () => this.newId(),
      requestLatch: (suffix) => this.requestLatch(suffix),
      counted: (name, windowMs, call, bound) => this.counted(name, windowMs, call, bound),
      wait: (ownerId, channel, attempt, waitTime, signal, extra) => this.wait(ownerId, channel, attempt, waitTime, signal, extra),
      stoppedReason: (signal) => this.stoppedReason(signal),
    });
  }

  private stepsMade: PrimitiveSteps | undefined;

  /** Throws the reason of the first stop (the caller's signal, `close()`) that aborted, if any. */
  protected stoppedReason(signal: AbortSignal | undefined): unknown {
    return [signal, this.context.closedSignal].find((stop) => stop?.aborted)?.reason;
  }
}
