// Scopes nested without await (`items.forEach(async (item) => lock.withLock(...))`): the outer
// one ends while the inner one still runs, for the scope tests of rlock, multiLock and redLock.
import { until } from './time';

/** Anything with a `withLock` scope: a lock, a composite, a hold() as a scope. */
export type Scoped = { withLock<T>(fn: () => Promise<T>): Promise<T> };

/** An outer withLock whose `fn` (after `first`) starts `inner`'s, unawaited; resolves once the outer ended with the inner inside. */
export async function outerEndsFirst(outer: Scoped, inner: Scoped, first?: () => Promise<unknown>): Promise<{ open: () => void; innerEnded: Promise<void> }> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let innerEnded: Promise<void> | undefined;
  let innerInside = false;
  await outer.withLock(async () => {
    await first?.();
    innerEnded = inner.withLock(async () => {
      innerInside = true;
      await gate;
    });
    await until('the inner scope is inside', () => innerInside);
  });
  return { open, innerEnded: innerEnded! };
}
