import { RedisCommandError } from '../errors';
import { boundedWait, CallCutShort, settledWithinGrace, TRANSIENT_RETRY_MS } from '../services/bounds';
import type { ChannelEntry, WakeDebt } from '../services/ChannelEntry';
import type { Hold } from '../services/Hold';
import type { CommandBound, LockContext } from '../services/LockContext';
import type { LockOwner } from '../services/LockOwner';
import type { ScriptedRedis } from '../services/scripts';

/**
 * How long a new waiter waits for its SUBSCRIBE to be answered before it asks again anyway: a
 * subscription that is slow to come (a Cluster slot just moved) must not keep it out of a
 * queue whose heartbeat would wake it.
 */
const SUBSCRIBE_WAIT_MS = 1000;

/** What one attempt found: the primitive is held now, or not (sleep at most `ttl`; negative: no bound). */
export type AttemptResult = ({ held: true } & Hold) | { held: false; ttl: number };

/**
 * What a primitive tells the shared waiting loop: how to try, where its wake-ups come from,
 * and what a wake-up means. RLock's waiters retry on a broadcast release message; the fair
 * lock's are handed the lock by the release itself (the wake-up is the grant).
 */
export interface WaitProtocol {
  /** The pub/sub channel whose messages wake this waiter (joined once the first attempt failed). */
  readonly channel: string;
  /**
   * One attempt. `listening`: the channel entry the waiter has joined, subscribed: from now on
   * its wake-ups reach it, so it may queue itself. Undefined for the first attempt of a caller
   * whose client was not subscribed yet. An attempt that passes `bound` on with a `lateReply`
   * (CommandBound) ends with the wait's deadline or stops even while Redis has not answered.
   */
  attempt(listening: ChannelEntry | undefined, bound: CommandBound): Promise<AttemptResult>;
  /**
   * Sleeps until a wake-up or `ms`; resolves with a hold when the wake-up itself handed the lock
   * over (no attempt needed), undefined to attempt again. `deadline` (performance.now() ms,
   * Infinity for none) is the wait's own: a handover Redis leaves unanswered ends the wait then
   * (CallCutShort), no sooner than IN_FLIGHT_GRACE_MS after the claim.
   */
  sleep(entry: ChannelEntry, ms: number, stops: AbortSignal[], deadline: number, debt: WakeDebt): Promise<Hold | undefined>;
  /** Called once when the loop ends without the lock after having joined the channel. */
  giveUp?(): Promise<void>;
  /** Diagnostics: the first attempt failed and the caller starts waiting; and how that wait ended. */
  waitStarted?(): void;
  waitEnded?(durationMs: number, acquired: boolean): void;
}

/**
 * The waiting loop every primitive shares: try; subscribe; try again; sleep until a message or
 * the bound the attempt gave; repeat; within `waitTime`, until a stop aborts (the caller's signal
 * or `client.close()`). Resolves with the hold, or undefined when `waitTime` ran out.
 *
 * `attemptDeadline` (performance.now() ms) bounds a single attempt (`waitTime` 0, which otherwise
 * ends only when Redis answers) as a wait's attempt is bounded: cut short as refused, no sooner
 * than IN_FLIGHT_GRACE_MS after it was sent, what it took given back when Redis answers. A
 * MultiLock's round tries each member once within the caller's `waitTime`: a frozen member's
 * Redis held the whole call for as long as it was frozen.
 */
export async function waitFor(context: LockContext, protocol: WaitProtocol, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
  signal?.throwIfAborted();
  const deadline = performance.now() + waitTime;
  // Already subscribed by other waiters of this client: every release from now on reaches us, so
  // the waiter joins them before its first attempt, which may then already queue (the fair
  // lock), and needs no second attempt after joining.
  // A wait for a connection that is down ends with the waitTime (a single attempt: with the
  // client's offlineTimeout), the caller's signal or close().
  // Set when Redis left an attempt unanswered until the wait's end: a leave is then not waited for.
  let unanswered = false;
  // Stopped by the caller's signal or by client.close(); no controller of its own, as a process
  // may park 10 000s of waiters. One array for the calls' bound and the sleeps (neither changes it).
  const stops = stopsOf(context, signal);
  const callBound: CommandBound = {
    deadline: waitTime > 0 ? deadline : attemptDeadline,
    signals: stops,
    cutShort: () => {
      unanswered = true;
    },
  };
  const subscribed = waitTime > 0 && context.pubsub.peek(protocol.channel)?.confirmed === true;
  let entry = subscribed ? context.pubsub.join(protocol.channel) : undefined;
  let got = false;
  const debt: WakeDebt = { owed: false };
  let waitFrom: number | undefined;
  let untrack: (() => void) | undefined;
  try {
    // A call that may wait rides out a failover; one that may not, reports it.
    const first = waitTime > 0 ? await attemptWhileWaiting(protocol, entry, callBound) : await protocol.attempt(undefined, callBound);
    if (first.held) {
      got = true;
      return first;
    }
    if (waitTime <= 0) return undefined;

    untrack = context.trackWaiter();
    waitFrom = performance.now();
    protocol.waitStarted?.();
    let ttl = first.ttl;
    const bound = (): number => Math.min(ttl < 0 ? Infinity : ttl, deadline - performance.now());
    let woken: Hold | undefined;
    if (entry) {
      woken = await protocol.sleep(entry, bound(), stops, deadline, debt);
    } else {
      // Retrying only once subscribed closes the race with a release published before that.
      entry = context.pubsub.join(protocol.channel);
      await entry.untilSubscribed(Math.min(bound(), SUBSCRIBE_WAIT_MS), stops);
      // Asked before the SUBSCRIBE was confirmed: a message between that attempt and the
      // confirmation reached nobody, so the waiters try once more when it comes.
      if (!entry.confirmed) {
        const joined = entry;
        void joined.subscribed.then((subscribed) => subscribed && joined.wakeAll());
      }
    }
    for (;;) {
      if (woken) {
        got = true;
        return woken;
      }
      const result = await attemptWhileWaiting(protocol, entry, callBound);
      debt.owed = false;
      if (result.held) {
        got = true;
        return result;
      }
      ttl = result.ttl;
      if (deadline - performance.now() <= 0) return undefined;
      // A lost message costs at most the bound, never liveness.
      woken = await protocol.sleep(entry, bound(), stops, deadline, debt);
    }
  } catch (error) {
    if (endsAsTimedOut(error, stops)) return undefined;
    throw error;
  } finally {
    if (entry) context.pubsub.leave(protocol.channel, entry);
    if (!got && debt.owed) context.pubsub.peek(protocol.channel)?.wakeOne();
    untrack?.();
    // Leaving a queue in Redis is waited for (so that a caller told "timed out" finds the queue
    // without it), but not for longer than an attempt is: Redis frozen, it runs when Redis
    // answers (or the entry runs out after queueTimeout), and the wait ends now. Not at all once
    // Redis has left an attempt of this wait unanswered: sent after that attempt on the same
    // connection, the leave runs before anything the caller sends next, and waiting for it would
    // only add its grace to the attempt's.
    if (!got && protocol.giveUp) {
      const leaving = protocol.giveUp();
      if (unanswered) leaving.catch(() => undefined);
      else await settledWithinGrace(leaving);
    }
    if (waitFrom !== undefined) protocol.waitEnded?.(performance.now() - waitFrom, got);
  }
}

/**
 * A refusal Redis will not repeat for long (`RedisCommandError.transient`: failover, loading, a
 * slot in flux; refused, not run) does not end a wait: it is retried after a short pause.
 */
async function attemptWhileWaiting(protocol: WaitProtocol, listening: ChannelEntry | undefined, bound: CommandBound): Promise<AttemptResult> {
  try {
    return await protocol.attempt(listening, bound);
  } catch (error) {
    if (refusedForNow(error)) return { held: false, ttl: TRANSIENT_RETRY_MS };
    throw error;
  }
}

/** What stops a wait or a call: the caller's signal, if any, and the client's close(). */
export function stopsOf(context: Pick<LockContext, 'closedSignal'>, signal: AbortSignal | undefined): AbortSignal[] {
  return signal ? [signal, context.closedSignal] : [context.closedSignal];
}

/**
 * An attempt Redis did not answer by its deadline (`CallCutShort`): the wait is over, not failed
 * (whatever the attempt took when Redis answers is given back by its `lateReply`), unless one of
 * `stops` came meanwhile, whose reason is thrown. False for any other error.
 */
export function endsAsTimedOut(error: unknown, stops: readonly AbortSignal[]): boolean {
  if (!(error instanceof CallCutShort)) return false;
  const stopped = stops.find((stop) => stop.aborted);
  if (stopped) throw stopped.reason;
  return true;
}

/** A refusal Redis will not repeat for long (`RedisCommandError.transient`: a failover, loading, a slot in flux): waited out, not thrown. */
export function refusedForNow(error: unknown): boolean {
  return error instanceof RedisCommandError && error.transient;
}

/**
 * A refusal that a give-back rides out (`whileRefused`): one for now, or `READONLY` from a master
 * that a failover demoted and that the client has not left yet (Sentinel's switch comes a moment
 * later). Not for a wait's attempts: `READONLY` from a replica the client was pointed at never
 * ends, and a `lock()` without `waitTime` would wait for good instead of failing.
 */
export function refusedUntilFailover(error: unknown): boolean {
  return refusedForNow(error) || (error instanceof RedisCommandError && error.code === 'READONLY');
}

/**
 * Sends a give-back (a release, a countDown: a call under a latch, which answers what a first run
 * did, so sending it again is safe) again while Redis refuses it for now or until a failover ends
 * (`refusedUntilFailover`), every TRANSIENT_RETRY_MS for up to `offlineTimeout` after the first
 * send, unless the client closes. A Cluster slot being migrated refuses every script whose keys
 * are not all on one side (TRYAGAIN) for as long as the migration of that slot lasts, and ioredis
 * gives up after its redirections (~1 s); a demoted master answers READONLY until Sentinel's
 * switch: an `unlock()` then failed, and the lock stayed taken for its lease, a semaphore's permit
 * or a latch's count for good.
 */
export function whileRefused<T>(context: Pick<LockContext, 'offlineTimeout' | 'closedSignal'>, send: (again: boolean) => Promise<T>, maxMs = Infinity, resendable?: () => boolean): Promise<T> {
  const until = performance.now() + Math.min(context.offlineTimeout, maxMs);
  // The first send as it is (every release goes through here); the loop only after a refusal.
  return send(false).catch((error: unknown) => sendAgainWhileRefused(context, send, error, until, resendable));
}

/**
 * `resendable`, when given, is asked before each resend (after the pause): false ends the loop
 * with the last refusal. A give-back that no latch guards is sent again only while a resend can
 * do no more than its first send would have (see `forceWhileRefused`, `leaveWhileRefused`).
 */
async function sendAgainWhileRefused<T>(context: Pick<LockContext, 'closedSignal'>, send: (again: boolean) => Promise<T>, refusal: unknown, until: number, resendable?: () => boolean): Promise<T> {
  for (let error = refusal; ; ) {
    if (!refusedUntilFailover(error) || context.closedSignal.aborted || performance.now() + TRANSIENT_RETRY_MS > until) throw error;
    // Ends at once with close()'s reason: no timer outlives the client.
    await boundedWait(TRANSIENT_RETRY_MS, [context.closedSignal], () => undefined);
    if (resendable && !resendable()) throw error;
    try {
      return await send(true);
    } catch (next) {
      error = next;
    }
  }
}

/**
 * A force-unlock's script call (`call`), sent again while Redis refuses it for now or until a
 * failover ends (a slot in flux past ioredis's redirections, a demoted master: see
 * `whileRefused`), for up to `offlineTimeout`: an admin's call that rides out what an unlock
 * rides out. No latch guards it, and a second run would remove whoever took the lock since:
 * a refusal is sent again only when the command connection never dropped while it was out
 * (ioredis resends what a dropped connection left unanswered, so an earlier copy may have run).
 */
export function forceWhileRefused<T>(context: LockContext, call: (redis: ScriptedRedis) => Promise<T>): Promise<T> {
  let sentIn = 0;
  let refusedIn = 0;
  const send = (): Promise<T> => {
    sentIn = context.connectionEpoch();
    return context.command('forceUnlock', call).catch((error: unknown) => {
      refusedIn = context.connectionEpoch();
      throw error;
    });
  };
  return whileRefused(context, send, Infinity, () => refusedIn === sentIn);
}

/**
 * A waiter's leave of its queue (`call`: the fair lock's queue, a read-write lock's waiting
 * writers) after its wait ended, sent again while Redis refuses it as a give-back is (see
 * `whileRefused`): left in line, the entry stayed until `queueTimeout`, a fair lock granted
 * to the departed waiter and the next one waited out the grant, a writer's kept new readers
 * out. No latch guards it: sent again only while `owner` asked for nothing since the first
 * send, whose leave could take out the entry (or the grant) of the owner's newer wait.
 */
export function leaveWhileRefused<T>(context: LockContext, owner: LockOwner, call: (redis: ScriptedRedis) => Promise<T>): Promise<T> {
  const asked = owner.asked;
  return whileRefused(context, () => context.command('leave', call), Infinity, () => owner.asked === asked);
}
