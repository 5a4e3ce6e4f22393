/** The q-quantile (0..1) of `samples`, nearest rank. */
export function quantile(samples: number[], q: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Jain's fairness index: 1 when every task got the same share, 1/n when one got everything. */
export function jain(shares: number[]): number {
  const sum = shares.reduce((a, b) => a + b, 0);
  const squares = shares.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? NaN : (sum * sum) / (shares.length * squares);
}

export const round = (value: number, digits = 2): number => Number(value.toFixed(digits));

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The longest stretch of time in which at least one task waited while fewer than `permits` were
 * held (a permit sat free with somebody waiting for it), from each acquisition's
 * [asked, acquired, releasing] on one clock: a hold counts from acquired until its release
 * starts, so a release's own round trip counts as free (a slight overestimate).
 */
export function longestFreeWhileWaiting(timeline: readonly (readonly [number, number, number])[], permits: number): number {
  const events: [number, number, number][] = []; // [time, Δwaiting, Δheld]
  for (const [asked, acquired, releasing] of timeline) {
    events.push([asked, 1, 0], [acquired, -1, 1], [releasing, 0, -1]);
  }
  // At one instant, the ends before the starts: a handoff at an instant leaves no stretch.
  events.sort((a, b) => a[0] - b[0] || a[1] + a[2] - (b[1] + b[2]));
  let waiting = 0;
  let held = 0;
  let since: number | undefined;
  let longest = 0;
  for (const [time, dWaiting, dHeld] of events) {
    waiting += dWaiting;
    held += dHeld;
    const starved = waiting > 0 && held < permits;
    if (starved && since === undefined) since = time;
    if (!starved && since !== undefined) {
      longest = Math.max(longest, time - since);
      since = undefined;
    }
  }
  return longest;
}
