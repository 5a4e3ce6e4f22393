import { LinkedList } from './LinkedList';

/**
 * Every signal a wait listens to (the client's close signal, a caller's signal that outlives
 * many calls) gets one EventTarget listener, made once, that tells a LinkedList: Node's
 * EventTarget keeps its listeners in a linked list whose removed nodes keep pointing at their
 * neighbours, so a listener added and removed per wait on a long-lived signal kept the next
 * waiter's closures alive through scavenges, as a churning Set does (see LinkedList).
 */
const listenersOf = new WeakMap<AbortSignal, LinkedList<(signal: AbortSignal) => void>>();

/** Calls `listener` once when `signal` aborts (not when it already has); returns the undo. */
export function onAbort(signal: AbortSignal, listener: (signal: AbortSignal) => void): () => void {
  let listeners = listenersOf.get(signal);
  if (!listeners) {
    const made = new LinkedList<(signal: AbortSignal) => void>();
    listenersOf.set(signal, made);
    signal.addEventListener('abort', () => made.drain().forEach((tell) => tell(signal)), { once: true });
    listeners = made;
  }
  const list = listeners;
  const link = list.push(listener);
  return () => void list.remove(link);
}
