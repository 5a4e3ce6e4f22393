import { LinkedList } from './LinkedList';

/**
 * The waits on one signal share one EventTarget listener, which tells a LinkedList. Node's
 * EventTarget keeps its listeners in a linked list whose removed nodes keep pointing at their
 * neighbours, so a listener added and removed per wait on a signal that outlives the waits kept
 * the next waiter's closures alive through V8's scavenges, as a churning Set does (see LinkedList).
 *
 * The shared listener goes when the last wait on the signal ends (a signal that has a listener
 * is not collected before it aborts: `AbortSignal.any` and `AbortSignal.timeout` ones would
 * pile up), except on a signal marked `keepListening` (a client's own close signal, which lives
 * as long as the client).
 */
interface Listeners {
  readonly list: LinkedList<(signal: AbortSignal) => void>;
  readonly shared: () => void;
}

const listenersOf = new WeakMap<AbortSignal, Listeners>();
const kept = new WeakSet<AbortSignal>();

/** The shared listener on `signal` stays when no wait is left (the signal lives as long as its client). */
export function keepListening(signal: AbortSignal): void {
  kept.add(signal);
}

/** `onAbort` on each of `signals` (none of them aborted yet); returns one undo for all. */
export function onAbortOfAny(signals: readonly AbortSignal[], listener: (signal: AbortSignal) => void): () => void {
  const undos = signals.map((signal) => onAbort(signal, listener));
  return () => {
    for (const undo of undos) undo();
  };
}

/** Calls `listener` once when `signal` aborts (not when it already has); returns the undo. */
export function onAbort(signal: AbortSignal, listener: (signal: AbortSignal) => void): () => void {
  let listeners = listenersOf.get(signal);
  if (!listeners) {
    const list = new LinkedList<(signal: AbortSignal) => void>();
    // Each is taken out as it is told: one undone by an earlier one (a wait it ended) is not told.
    const shared = (): void => {
      listenersOf.delete(signal);
      for (const link of list.links()) {
        const tell = link.value;
        if (!list.remove(link) || !tell) continue;
        try {
          tell(signal);
        } catch (error) {
          // As EventTarget does: reported as uncaught, and the other waits are told all the same.
          process.nextTick(() => {
            throw error;
          });
        }
      }
    };
    listeners = { list, shared };
    listenersOf.set(signal, listeners);
    signal.addEventListener('abort', shared, { once: true });
  }
  const { list, shared } = listeners;
  const link = list.push(listener);
  return () => {
    if (!list.remove(link) || list.size > 0 || kept.has(signal) || signal.aborted) return;
    listenersOf.delete(signal);
    signal.removeEventListener('abort', shared);
  };
}
