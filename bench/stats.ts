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
