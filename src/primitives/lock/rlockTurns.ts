import type { LockContext } from '../../services/LockContext';

/** How long a client's new callers let another client's waiter, woken by its release, ask first. */
const TURN_PASSED_MS = 50;

/** Per client: the locks whose turn one of its releases just passed to another client, until when (performance.now()). */
const passed = new WeakMap<LockContext, Map<string, number>>();

/** A release of this client woke another client's waiter for `key` (see RLock's acquireFor). */
export function passTurn(context: LockContext, key: string): void {
  let turns = passed.get(context);
  if (!turns) passed.set(context, (turns = new Map()));
  const now = performance.now();
  // Per lock name: a process locking many names (order:<id>) must not keep one entry per name.
  if (turns.size >= 64) for (const [name, until] of turns) if (until <= now) turns.delete(name);
  turns.set(key, now + TURN_PASSED_MS);
}

/** Whether this client's new callers of `key` still let the waiter its release woke ask first. */
export function turnPassed(context: LockContext, key: string): boolean {
  const until = passed.get(context)?.get(key);
  return until !== undefined && until > performance.now();
}

/**
 * How long this client's new callers of `key` still let the waiter its release woke ask first,
 * in ms: undefined when no release passed the turn; 0 or less once it ran out, and then it is forgotten.
 */
export function turnLeft(context: LockContext, key: string): number | undefined {
  const turns = passed.get(context);
  const passedUntil = turns?.get(key);
  if (passedUntil === undefined) return undefined;
  const left = passedUntil - performance.now();
  if (left <= 0) turns!.delete(key);
  return left;
}
