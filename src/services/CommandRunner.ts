import { AsyncResource } from 'node:async_hooks';
import type { Cluster, Redis } from 'ioredis';
import { ClientClosedError, RedisCommandError, RedisUnreachableError } from '../errors';
import { redactError } from '../redact';
import { CallCutShort, IN_FLIGHT_GRACE_MS, OUTCOME_UNKNOWN } from './bounds';
import { onAbort, onAbortOfAny } from './abortListeners';
import { addressOf } from './connection';
import { LinkedList } from './LinkedList';
import type { CommandBound } from './LockContext';
import type { ScriptedRedis } from './scripts';

/** The undo of a wait that set nothing up. */
const NOTHING_TO_UNDO = (): void => undefined;

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

/**
 * Every Redis call of one client goes through here: a call waits (bounded) for a connection
 * that is down instead of going to ioredis's offline queue, ends at its bound when Redis does not
 * answer (its late reply given back), settles at once on close(), and close() can wait for the
 * replies of the calls it settled (`answersIn`).
 */
export class CommandRunner {
  /** Rejecters of the calls under way, so that `close()` can settle them at once (a list, not a Set: see LinkedList). */
  private readonly inFlight = new LinkedList<(error: Error) => void>();
  /**
   * Calls sent and not answered yet, settled or not: close() waits for their replies (bounded)
   * before QUIT, so that what an acquire took for a caller that close() settled is given back.
   */
  private unanswered = 0;
  private closed = false;
  /** Connected (ready) at least once: from then on an outage is waited out, not reported at once. */
  private everReady: boolean;
  /** The last connection error of a connection we own (we do not listen on one passed in). */
  private lastError: Error | undefined;
  /**
   * Idempotent calls sent (releases, give-backs, reads: `CommandBound.idempotent`) whose reply has
   * not come: when the connection drops under them, ioredis keeps them to resend, and gives them
   * up only after `maxRetriesPerRequest` reconnects (never, with null), so each then ends at
   * `offlineTimeout`, its outcome unknown (a release's latch tells a retry what it did). Not the
   * others: a semaphore's release abandoned so, then retried by its caller, and resent by
   * ioredis, gave its permits back twice.
   */
  private readonly sentIdempotent = new LinkedList<SentCall>();
  private readonly onClose = (): void => {
    for (const link of this.sentIdempotent.links()) {
      const call = link.value;
      if (!call) continue;
      call.dropTimer ??= setTimeout(() => {
        const cause = Object.assign(new Error(`the connection dropped before the reply, and none came within ${this.offlineTimeout} ms: whether Redis ran it is unknown`), { code: 'ETIMEDOUT' });
        call.settle(this.unreachable(call.name, cause));
      }, this.offlineTimeout);
    }
  };
  /** Calls waiting for the connection to be ready: told on ready, and on a first attempt's failure. */
  private readonly waitingForReady = new LinkedList<(error?: Error) => void>();
  private readonly onReady = (): void => {
    this.everReady = true;
    this.lastError = undefined;
    for (const wake of this.waitingForReady.drain()) wake();
  };

  constructor(
    private readonly redis: Redis | Cluster,
    /** The client made this connection: it listens to its errors and it remakes it when ended. */
    private readonly owned: boolean,
    private readonly offlineTimeout: number,
    /** The client's close signal: close() settles every call at once, so a call need not listen to it. */
    private readonly closing: AbortSignal,
  ) {
    this.everReady = redis.status === 'ready';
    redis.on('ready', this.onReady);
    redis.on('close', this.onClose);
    // Only on a connection we own: a listener on the user's would silence ioredis's own
    // "Unhandled error event" report for them. ioredis retries; calls report their own failures.
    if (owned) {
      redis.on('error', (error: Error) => {
        this.lastError = error;
        // ioredis reconnects; waiting calls keep waiting, unless a connection that was never ready
        // met an error that says it will not be (refused, no such host, bad password, certificate).
        if (this.everReady || !isDefinitive(error)) return;
        for (const wake of this.waitingForReady.drain()) wake(error);
      });
    }
  }

  /**
   * From now on an attempt is refused and a call that fails says `ClientClosedError`; calls
   * already sent go on, their late replies given back. Calls are settled by `settleAll`.
   */
  close(): void {
    this.closed = true;
    this.redis.off('ready', this.onReady);
    this.redis.off('close', this.onClose);
  }

  /** Settles every call under way with `error` (close()). */
  settleAll(error: Error): void {
    for (const reject of this.inFlight.drain()) reject(error);
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
  run<T>(name: string, call: (redis: ScriptedRedis) => Promise<T>, bound?: CommandBound): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // An attempt (it carries lateReply) that a primitive sends after close() settled its
      // caller (it awaited something first) must not take anything: refused, not sent.
      if (this.closed && bound?.lateReply) return reject(new ClientClosedError());
      let stopWaiting = NOTHING_TO_UNDO;
      const settle = (error: Error): void => {
        stopWaiting();
        this.inFlight.remove(inFlight);
        reject(error);
      };
      const inFlight = this.inFlight.push(settle);
      const send = (): void => {
        const lateReply = bound?.lateReply;
        let cut = false;
        if (lateReply) {
          stopWaiting = this.cutWhenDue(name, bound, (error) => {
            cut = true;
            bound.cutShort?.();
            settle(error);
          });
        } else if (bound?.idempotent) {
          stopWaiting = this.watchDrop(name, settle);
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
            if (!this.inFlight.remove(inFlight)) {
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
            if (!this.inFlight.remove(inFlight)) {
              // Settled before, by its bound or close(), and failed without Redis's answer (a
              // dropped connection): it may have run, and what it took would stay for its lease.
              // An error reply means the script did not run (ours refuse before they write).
              if ((cut || this.closed) && (error as { name?: unknown } | undefined)?.name !== 'ReplyError') {
                try {
                  lateReply?.(OUTCOME_UNKNOWN)?.catch(() => undefined);
                } catch {
                  // Nothing to give back.
                }
              }
              return;
            }
            stopWaiting();
            // A failed AUTH carries the password in its `command.args`.
            reject(this.closed ? new ClientClosedError() : new RedisCommandError(name, redactError(error)));
          },
        );
      };
      const status = this.redis.status;
      if (status === 'ready') return send();
      // A lazyConnect connection (passed in) connects on its first command, which would go to
      // ioredis's offline queue meanwhile: connected here, and the call waits as for any other
      // connection being made (offlineTimeout), never sent to be run whenever it comes up.
      if (status === 'wait') this.redis.connect().catch(() => undefined);
      // A give-back sent while close() drains: no connection to wait for.
      if (this.closed) return settle(new ClientClosedError());
      if (this.owned && !this.everReady && this.lastError && isDefinitive(this.lastError)) return settle(this.unreachable(name, this.lastError));
      // Ours is being made again after ioredis ended it (reviveWhenEnded); one passed in is not.
      if (status === 'end' && (!this.owned || this.redis.isCluster)) return settle(this.unreachable(name, this.lastError ?? new Error('the connection was closed')));
      stopWaiting = this.whenReady(name, bound, send, settle);
    });
  }

  /**
   * Waits until every call sent before close() settled it has its reply, and so have the calls
   * those replies set off (the give-backs of `lateReply`, of a local handoff to a waiter that
   * close() woke), or until `deadline`. Without it, an acquire that Redis ran just as close()
   * came took its hold or permits for nobody: a lock then stayed taken for its lease, a plain
   * semaphore's permits for good. Everything before QUIT on the connection is answered first.
   */
  async answersIn(deadline: number): Promise<void> {
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
    const own = this.closing;
    const signals = bound.signals ?? [];
    const dueIn = bound.deadline === undefined ? Infinity : Math.max(bound.deadline - performance.now(), IN_FLIGHT_GRACE_MS);
    if (dueIn === Infinity && signals.every((signal) => signal === own)) return NOTHING_TO_UNDO;
    const deadlineTimer = Number.isFinite(dueIn) ? setTimeout(() => cut(new CallCutShort(name)), dueIn) : undefined;
    let abortTimer: NodeJS.Timeout | undefined;
    const aborted = (signal: AbortSignal): void => {
      abortTimer ??= setTimeout(() => cut(signal.reason as Error), IN_FLIGHT_GRACE_MS);
    };
    const unlisten: (() => void)[] = [];
    for (const signal of signals) {
      if (signal === own) continue;
      if (signal.aborted) aborted(signal);
      else unlisten.push(onAbort(signal, aborted));
    }
    return () => {
      clearTimeout(deadlineTimer);
      clearTimeout(abortTimer);
      for (const undo of unlisten) undo();
    };
  }

  /** Ends a sent idempotent call at `offlineTimeout` after its connection dropped under it (see `sentIdempotent`); returns the undo. */
  private watchDrop(name: string, settle: (error: Error) => void): () => void {
    const call: SentCall = { name, settle, dropTimer: undefined };
    const link = this.sentIdempotent.push(call);
    return () => {
      this.sentIdempotent.remove(link);
      if (call.dropTimer !== undefined) clearTimeout(call.dropTimer);
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
    const stop = (): void => {
      clearTimeout(timer);
      this.waitingForReady.remove(waiting);
      unlisten();
    };
    // Sent from the connection's `ready` event: in the caller's async context, not the
    // reconnect's, so that what follows the caller's context (AsyncLocalStorage: a tracing span,
    // a request id) stays with the call. Off the hot path: only calls that waited pay for it.
    const waiting = this.waitingForReady.push(
      AsyncResource.bind((error?: Error): void => {
        stop();
        if (error) fail(this.unreachable(name, error));
        else send();
      }),
    );
    const unlisten = onAbortOfAny(signals, (aborted) => fail(aborted.reason as Error));
    return stop;
  }

  private unreachable(name: string, cause: Error): RedisUnreachableError {
    return new RedisUnreachableError(name, addressOf(this.redis), redactError(cause));
  }
}

/** An idempotent call sent, watched for its connection dropping before the reply. */
interface SentCall {
  readonly name: string;
  readonly settle: (error: Error) => void;
  dropTimer: NodeJS.Timeout | undefined;
}
