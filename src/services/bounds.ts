/** The bounds every wait and every unanswered call share. */
import { onAbortOfAny } from './abortListeners';

/**
 * The least time an unanswered call is given before its deadline or an abort may end it: a reply
 * that a loaded machine delays past a short `waitTime` is still taken, not cut off and given back.
 */
export const IN_FLIGHT_GRACE_MS = 1000;

/** How long a waiter pauses after Redis refused an attempt during a failover (or a semaphore's ask failed, see ChannelEntry.askFailed). */
export const TRANSIENT_RETRY_MS = 200;

/**
 * A call's outcome is unknown: ioredis rejected it (its `commandTimeout`, a dropped connection)
 * while Redis may have run it or may still run it. What `CommandBound.lateReply` is given for a
 * call cut short whose command then failed so (what it may have taken goes back, for an owner
 * that books nothing); and what a release tells a waiter it claimed for a handoff (the lock may
 * be handed to the waiter later, when Redis runs it: see LocalHandoff).
 */
export const OUTCOME_UNKNOWN = Symbol('outcome unknown');

/** A call ended at its deadline while Redis had not answered it (see `CommandBound.lateReply`). */
export class CallCutShort extends Error {
  constructor(name: string) {
    super(`${name}: Redis did not answer before the deadline`);
    this.name = 'CallCutShort';
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
      unlisten();
      cleanup.end?.();
      if (error === undefined) resolve();
      else reject(error);
    };
    const aborted = (stop: AbortSignal): void => finish(stop.reason ?? new Error('aborted'));
    const timer = Number.isFinite(ms) ? setTimeout(() => finish(), Math.max(0, ms)) : undefined;
    const unlisten = onAbortOfAny(stops, aborted);
    cleanup.end = start(() => finish());
    if (finished) cleanup.end?.();
  });
}

/**
 * Waits for `work` to settle, at most `ms` or until one of `stops` aborts (rejects with its
 * reason); true when it settled in time. The work goes on either way.
 */
export async function settledWithin(work: Promise<unknown>, ms: number, stops: AbortSignal[]): Promise<boolean> {
  let settled = false;
  await boundedWait(ms, stops, (done) => {
    const settle = (): void => {
      settled = true;
      done();
    };
    work.then(settle, settle);
    return undefined;
  });
  return settled;
}

/**
 * Waits for `work` to settle, at most IN_FLIGHT_GRACE_MS: a give-back or a leave that a wait
 * ending must not outlast by more (Redis frozen). The work goes on; Redis runs it when it answers.
 */
export async function settledWithinGrace(work: Promise<unknown>): Promise<void> {
  await settledWithin(work, IN_FLIGHT_GRACE_MS, []);
}
