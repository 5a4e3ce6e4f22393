export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 10 ms until it is truthy; rejects after `timeoutMs` with `what` in the message. */
export async function until(what: string, check: () => unknown, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

/** Resolves when `signal` aborts, with its reason. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

/**
 * Resolves with what `promise` resolves with, or with `otherwise` after `ms`. Its timer is cleared
 * either way: a bare `Promise.race([p, sleep(ms)])` leaves a timer that keeps the test worker
 * alive past its suite (jest then force-exits it).
 */
export async function orAfter<T, U>(promise: Promise<T>, ms: number, otherwise: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<U>((resolve) => (timer = setTimeout(() => resolve(otherwise), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
