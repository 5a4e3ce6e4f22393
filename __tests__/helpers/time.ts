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
 * Reads `read` until its value (compared as JSON) stays the same for `quietMs`: work still on its
 * way from other processes has landed. Resolves with that value; rejects when it still moves
 * after `timeoutMs`.
 */
export async function settled<T>(what: string, read: () => Promise<T>, quietMs: number, timeoutMs = 15_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last = JSON.stringify(await read());
  for (;;) {
    if (performance.now() > deadline) throw new Error(`${what} still moved after ${timeoutMs} ms`);
    await sleep(quietMs);
    const value = await read();
    const now = JSON.stringify(value);
    if (now === last) return value;
    last = now;
  }
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
