// The report's figures beyond exclusion, pure logic over the records: how long after each kind
// of fault owners were told, how long waiters waited after a fault against quiet instants, and
// how far bounded waits overshot their bound.
import type { Fault, Force, Hold, MissLine } from './records';

export interface Spread {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function spread(values: number[]): Spread {
  if (values.length === 0) return { n: 0, p50: 0, p99: 0, max: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 10) / 10;
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}

/** Faults as a list of (kind, at), force-unlocks that removed someone included. */
function allFaults(forces: Force[], faults: Fault[]): { kind: string; at: number; end: number }[] {
  return [...forces.filter((f) => f.holders.length > 0).map((f) => ({ kind: 'force', at: f.sent, end: f.done })), ...faults];
}

/**
 * For every hold whose owner was told it lost it: which fault removed it (the force that named
 * its field, else the latest fault between its attempt and the telling) and how long after that
 * fault the owner was told. Holds told with no fault to blame are counted under "none".
 */
export function toldAfterFault(holds: Hold[], forces: Force[], faults: Fault[]): { byKind: Record<string, Spread>; none: Hold[] } {
  const forceOf = new Map<string, Force>();
  for (const force of forces) for (const field of force.holders) if (!forceOf.has(field)) forceOf.set(field, force);
  const lags: Record<string, number[]> = {};
  const none: Hold[] = [];
  const sorted = [...faults].sort((a, b) => a.at - b.at);
  for (const hold of holds) {
    if (hold.toldAt === null) continue;
    const force = forceOf.get(hold.field);
    let kind: string | undefined;
    let at = 0;
    if (force && force.lock === hold.lock) {
      kind = 'force';
      at = force.sent;
    } else {
      // A fault under way while the attempt was sent counts too: a grant whose request waited
      // out a pause is declared lost at once (its lease is counted from the send).
      const fault = sorted.filter((f) => f.end >= hold.sent && f.at <= hold.toldAt!).at(-1);
      if (fault) {
        kind = fault.kind;
        at = fault.at;
      }
    }
    if (kind === undefined) none.push(hold);
    else (lags[kind] ??= []).push(hold.toldAt - at);
  }
  return { byKind: Object.fromEntries(Object.entries(lags).map(([kind, values]) => [kind, spread(values)])), none };
}

interface Wait {
  begun: number;
  ended: number;
}

/** Acquiring calls as waits: granted (begun → grant) or not (begun → gave up). */
export function waitsOf(holds: Hold[], misses: MissLine[]): Wait[] {
  return [...holds.map((h) => ({ begun: h.begun, ended: h.granted })), ...misses.map((m) => ({ begun: m.begun, ended: m.ended }))].sort(
    (a, b) => a.begun - b.begun,
  );
}

/** ms each wait under way at `t` still waited after it (waits are looked up within `lookbackMs`). */
function waitedAfter(waits: Wait[], t: number, lookbackMs: number): number[] {
  let hi = waits.length;
  let lo = 0;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (waits[mid]!.begun <= t) lo = mid + 1;
    else hi = mid;
  }
  const out: number[] = [];
  for (let i = lo - 1; i >= 0 && waits[i]!.begun >= t - lookbackMs; i--) {
    if (waits[i]!.ended > t) out.push(waits[i]!.ended - t);
  }
  return out;
}

/**
 * Per fault kind, how long the waits under way when the fault began still waited; "baseline":
 * the same at quiet instants (every 100 ms, none within 3 s after a fault or 0.5 s before one).
 */
export function waitsAfterFaults(waits: Wait[], forces: Force[], faults: Fault[], from: number, to: number): Record<string, Spread> {
  const lookback = 60_000;
  const byKind: Record<string, number[]> = {};
  const instants = allFaults(forces, faults);
  for (const kind of new Set(instants.map((f) => f.kind))) {
    // At most 500 instants a kind (a long run has ten thousand force-unlocks), evenly spread.
    const mine = instants.filter((f) => f.kind === kind);
    const step = Math.max(1, Math.ceil(mine.length / 500));
    for (let i = 0; i < mine.length; i += step) (byKind[kind] ??= []).push(...waitedAfter(waits, mine[i]!.at, lookback));
  }
  const baseline: number[] = [];
  for (let t = from; t < to; t += 100) {
    if (faults.some((f) => f.at - 500 <= t && t <= f.end + 3000)) continue;
    baseline.push(...waitedAfter(waits, t, lookback));
  }
  byKind.baseline = baseline;
  return Object.fromEntries(Object.entries(byKind).map(([kind, values]) => [kind, spread(values)]));
}

/** Whether [from, to] meets a fault's window (its span plus `graceMs` after). */
export function duringFault(faults: Fault[], from: number, to: number, graceMs: number): boolean {
  return faults.some((f) => f.at <= to && from <= f.end + graceMs);
}
