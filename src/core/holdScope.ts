import { LockLostError } from '../errors';
import { onAbort } from '../services/abortListeners';

/**
 * Aborts `scope` (the signal a `withLock`/`withPermit` callback gets) when one of `sources`
 * aborts (the caller's signal, the watchdog's lost signal), or, for a hold taken with an
 * explicit lease, when that lease runs out. Returns the undo.
 */
export function watchHold(
  scope: AbortController,
  sources: (AbortSignal | undefined)[],
  lease?: { name: string; leaseTime: number; sentAt: number; watchdog?: () => AbortSignal | undefined },
): () => void {
  const undo: (() => void)[] = [];
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    undo.forEach((fn) => fn());
  };
  // Once the scope has ended (lost, lease out, the client closed), nothing more can end it: the
  // caller's signal lets go of it at once. A long-lived one (an app's shutdown signal, given to
  // holds that are never released before their client closes) kept every closed client alive.
  undo.push(onAbort(scope.signal, stop));
  const follow = (source: AbortSignal | undefined): void => {
    if (!source || stopped) return;
    if (source.aborted) {
      scope.abort(source.reason);
      return;
    }
    undo.push(onAbort(source, () => scope.abort(source.reason)));
  };
  sources.forEach(follow);
  if (lease && !stopped) {
    const timer = atLeaseEnd(lease.sentAt, lease.leaseTime, () => {
      // Entered again since without a leaseTime: the watchdog keeps the hold now (a re-entry
      // only lengthens it), so from here its loss is what ends the scope, not this lease.
      const kept = lease.watchdog?.();
      if (kept) follow(kept);
      else scope.abort(leaseRanOut(lease.name, lease.leaseTime));
    });
    undo.push(() => clearTimeout(timer));
  }
  return stop;
}

/**
 * Calls `ranOut` when a hold's lease ends, counted from `sentAt` (performance.now()), the send of
 * the call that set it: Redis's TTL started later, so this fires first. The timer is unref'd.
 */
export function atLeaseEnd(sentAt: number, leaseTime: number, ranOut: () => void): NodeJS.Timeout {
  return setTimeout(ranOut, Math.max(0, sentAt + leaseTime - performance.now())).unref();
}

/** What a scope's signal aborts with when its hold's own lease ran out (`what`: see `LockLostError`). */
export function leaseRanOut(name: string, leaseTime: number, what?: string): LockLostError {
  return new LockLostError(name, `its lease of ${leaseTime} ms ran out`, what);
}

/** How a scope's callback ended: its value, or what it threw. */
export type Outcome<T> = { value: T } | { error: unknown };

/**
 * Runs a scope's callback to its end and says how it ended instead of throwing, then stops
 * watching the hold: the scope gives its hold back either way before it reports anything.
 */
export async function outcomeOf<T>(run: () => T | Promise<T>, stopWatching: () => void): Promise<Outcome<T>> {
  try {
    return { value: await run() };
  } catch (error) {
    return { error };
  } finally {
    stopWatching();
  }
}
