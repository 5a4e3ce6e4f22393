// The verdict on a run's records, pure logic (no Redis): merges the worker lines into holds and
// runs the checker and the figures. The harness adds the checks that ask Redis; rejudge.ts runs
// this again on a saved --lines file.
import { checkExclusion, checkFifo, type Cause, type ExclusionResult, type Invariant } from './checker';
import type { FaultRecords } from './faults';
import { duringFault, toldAfterFault, waitsAfterFaults, waitsOf, type Spread } from './figures';
import type { SoakOptions } from './records';
import { checkCapacity, checkFencedWrites, checkLatch, checkTokens, type InvariantResult } from './invariants';
import type { DeafLine, DoneLine, EndLine, ErrorLine, FencedWriteLine, GrantLine, Hold, MissLine, Op, OpLine, OpReplyLine, WorkerLine } from './records';

export interface SoakReport {
  options: SoakOptions;
  holds: number;
  holdsPerLock: Record<string, number>;
  misses: Record<string, number>;
  /** Force-unlocks sent, and those that removed a holder. */
  forces: { sent: number; removed: number };
  faults: Record<string, number>;
  overlaps: { total: number; excused: Record<Cause, number>; unexplained: number };
  /** The primitive's own rule beyond pairs (capacity, tokens, latch), when it has one. */
  invariant?: { rule: string; judged: number; excused: Partial<Record<Cause, number>>; unexplained: number };
  /** ms from a fault to the owner of a hold it removed being told, per fault kind. */
  toldAfter: Record<string, Spread>;
  /** Holds whose owner was told of a loss that no fault explains (a starved process: lease ran out); each a violation in a run without faults. */
  toldWithoutFault: { count: number; examples: string[] };
  /** Holds a force named as removed whose owner was never told (its release reported success). */
  forcedButNotTold: number;
  /** Holds the library gave back at once because the call's signal aborted as the grant came in. */
  abortedAsGranted: number;
  /** Holds in flight in a worker killed -9 (left out of the overlap check). */
  killedInFlight: number;
  /** ms the waits under way at a fault still waited, per fault kind, and at quiet instants. */
  waitsAfter: Record<string, Spread>;
  maxWaitOvershootMs: { quiet: number; nearFaults: number };
  /** Worker errors while a fault was on (or within a second after it), by message. */
  errorsNearFaults: Record<string, number>;
  injectionFailures: string[];
  violations: string[];
}

export interface JudgeInput {
  options: SoakOptions;
  lines: WorkerLine[];
  records: FaultRecords;
  killedAt: Map<number, number>;
  locks: string[];
  start: number;
  deadline: number;
  invariant: Invariant;
  /** Workers started, replacements of killed ones included. */
  workerCount: number;
}

export function judgeRecords(input: JudgeInput): { report: SoakReport; holds: Hold[]; exclusion: ExclusionResult } {
  const { options, lines, records, killedAt, locks } = input;
  const violations: string[] = [];
  const { forces, faults } = records;
  // Worker kills are faults too; their `at` is the kill.
  const grants = new Map<string, GrantLine>();
  const ends = new Map<string, EndLine>();
  const misses: MissLine[] = [];
  const errors: ErrorLine[] = [];
  const done: DoneLine[] = [];
  const opLines: OpLine[] = [];
  const opReplies = new Map<string, OpReplyLine>();
  const deaf: DeafLine[] = [];
  const fencedWrites: FencedWriteLine[] = [];
  for (const line of lines) {
    if (line.k === 'g') grants.set(`${line.w}.${line.id}`, line);
    else if (line.k === 'e') ends.set(`${line.w}.${line.id}`, line);
    else if (line.k === 'x') misses.push(line);
    else if (line.k === 'err') errors.push(line);
    else if (line.k === 'op') opLines.push(line);
    else if (line.k === 'opr') opReplies.set(`${line.w}.${line.id}`, line);
    else if (line.k === 'deaf') deaf.push(line);
    else if (line.k === 'fw') fencedWrites.push(line);
    else if (line.k === 'done') done.push(line);
  }
  const holds: Hold[] = [];
  for (const [key, g] of grants) {
    const grant = { w: g.w, id: g.id, lock: g.lock, field: g.field, via: g.via, begun: g.begun, queuedSent: g.queuedSent, queuedReplied: g.queuedReplied, sent: g.sent, granted: g.granted, waitTime: g.waitTime };
    const e = ends.get(key);
    if (g.permits !== undefined) Object.assign(grant, { permits: g.permits });
    if (e) {
      holds.push({ ...grant, end: e.end, released: e.released, outcome: e.outcome, toldAt: e.toldAt, counted: e.counted, ...(e.token === undefined ? {} : { token: e.token }) });
    } else if (killedAt.has(g.w)) {
      // In flight when its worker was killed -9: held until the kill, then by nobody alive.
      const at = killedAt.get(g.w)!;
      holds.push({ ...grant, end: at, released: at, outcome: 'killed', toldAt: null, counted: false });
    } else {
      violations.push(`hold ${key} on ${g.lock} never ended`);
    }
  }

  // Exclusion, attributed exactly; FIFO order for fair primitives.
  // A killed worker's hold in flight is left out: whether its release was sent before the kill
  // is unknown (it died before printing), and after the kill nobody alive believes it.
  const alive = holds.filter((h) => h.outcome !== 'killed');
  const exclusion = checkExclusion(alive, forces, faults, input.invariant);
  violations.push(...exclusion.violations);
  if (input.invariant.fifo) violations.push(...checkFifo(alive, forces, faults, deaf));
  const ops: Op[] = opLines.map(({ k: _, ...op }) => {
    const reply = opReplies.get(`${op.w}.${op.id}`);
    return { ...op, replied: reply?.replied ?? null, ok: reply?.ok ?? false };
  });
  const invariant = checkInvariant(input.invariant, alive, ops, forces, faults, fencedWrites);
  if (invariant) violations.push(...invariant.result.violations);

  // Errors: expected only while a fault is on (or just after it).
  const errorsNearFaults: Record<string, number> = {};
  for (const e of errors) {
    if (duringFault(faults, e.at, e.at, 1000)) {
      const key = e.message.replace(/[0-9a-zA-Z_-]{21}/g, '<id>').slice(0, 160);
      errorsNearFaults[key] = (errorsNearFaults[key] ?? 0) + 1;
    } else violations.push(`worker ${e.w} on ${e.lock} at ${e.at.toFixed(3)}: ${e.message}`);
  }
  for (const d of done) {
    if (Object.values(d.stats).some((n) => n !== 0)) violations.push(`worker ${d.w} ended with internal state left: ${JSON.stringify(d.stats)}`);
  }
  const finished = new Set(done.map((d) => d.w));
  for (let w = 0; w < input.workerCount; w++) if (!killedAt.has(w) && !finished.has(w)) violations.push(`worker ${w} did not finish`);

  const holdsPerLock: Record<string, number> = {};
  for (const lock of locks) holdsPerLock[lock] = holds.filter((h) => h.lock === lock).length;

  // Every bounded wait away from faults ended within its bound plus the slack.
  let quiet = 0;
  let nearFaults = 0;
  const bounded = [
    ...holds.filter((h) => h.waitTime !== null).map((h) => ({ lock: h.lock, begun: h.begun, ended: h.granted, waitTime: h.waitTime! })),
    ...misses.filter((m) => m.waitTime !== null).map((m) => ({ lock: m.lock, begun: m.begun, ended: m.ended, waitTime: m.waitTime! })),
  ];
  for (const wait of bounded) {
    const overshoot = wait.ended - wait.begun - wait.waitTime;
    if (duringFault(faults, wait.begun, wait.ended, 1000)) nearFaults = Math.max(nearFaults, overshoot);
    else {
      quiet = Math.max(quiet, overshoot);
      if (overshoot > options.waitSlackMs) violations.push(`a wait of ${wait.waitTime} ms on ${wait.lock} took ${(wait.ended - wait.begun).toFixed(1)} ms`);
    }
  }

  const told = toldAfterFault(holds, forces, faults);
  // With no fault at all, nothing takes a hold from its owner (the watchdog renews it far inside
  // its lease): a loss told then is a false alarm, which aborts an owner's work for nothing, or a
  // renewal that failed unseen. With faults, a starved process may lose a hold for real: counted only.
  if (options.faults.length === 0) for (const h of told.none) violations.push(`${h.w}.${h.id} on ${h.lock} (${h.via}) was told its hold was lost with no fault to explain it`);
  // Which forces removed each owner field. A force counts against a hold only if it could have
  // removed that hold: done after the hold's successful attempt was sent, sent before its release.
  // (A fair-lock waiter whose grant a force removed before it took the grant up asks again and
  // may be granted later under the same field: that later hold was never forced.)
  const forcesByField = new Map<string, FaultRecords['forces']>();
  for (const f of forces) for (const field of f.holders) forcesByField.set(field, [...(forcesByField.get(field) ?? []), f]);
  const forced = (h: Hold): boolean => (forcesByField.get(h.field) ?? []).some((f) => f.done >= h.sent && f.sent <= h.end);
  const faultCounts: Record<string, number> = {};
  for (const f of faults) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
  const missCounts: Record<string, number> = {};
  for (const m of misses) missCounts[m.reason] = (missCounts[m.reason] ?? 0) + 1;
  const report: SoakReport = {
    options,
    holds: holds.length,
    holdsPerLock,
    misses: missCounts,
    forces: { sent: forces.length, removed: forces.filter((f) => f.holders.length > 0).length },
    faults: faultCounts,
    overlaps: { total: exclusion.overlaps.length, excused: exclusion.excused, unexplained: exclusion.violations.length },
    ...(invariant && {
      invariant: { rule: invariant.rule, judged: invariant.result.judged, excused: invariant.result.excused, unexplained: invariant.result.violations.length },
    }),
    toldAfter: told.byKind,
    toldWithoutFault: {
      count: told.none.length,
      examples: told.none.slice(0, 5).map((h) => `${h.w}.${h.id} on ${h.lock} (${h.via}) granted ${h.granted.toFixed(3)} ${h.outcome} told ${h.toldAt!.toFixed(3)}`),
    },
    forcedButNotTold: holds.filter((h) => h.toldAt === null && h.outcome === 'released' && forced(h)).length,
    abortedAsGranted: holds.filter((h) => h.outcome === 'aborted').length,
    killedInFlight: holds.length - alive.length,
    waitsAfter: waitsAfterFaults(waitsOf(holds, misses), forces, faults, input.start + 1000, input.deadline),
    maxWaitOvershootMs: { quiet: Math.round(quiet * 10) / 10, nearFaults: Math.round(nearFaults * 10) / 10 },
    errorsNearFaults,
    injectionFailures: records.failures.slice(0, 20),
    violations,
  };
  return { report, holds, exclusion };
}


/** The primitive's rule beyond pairs of holds, if it has one. */
function checkInvariant(invariant: Invariant, holds: Hold[], ops: Op[], forces: FaultRecords['forces'], faults: FaultRecords['faults'], fencedWrites: FencedWriteLine[]): { rule: string; result: InvariantResult } | undefined {
  if (invariant.capacity !== undefined) return { rule: `at most ${invariant.capacity} permits held`, result: checkCapacity(holds, forces, faults, invariant.capacity) };
  if (invariant.tokens) {
    const tokens = checkTokens(holds);
    const writes = checkFencedWrites(fencedWrites, faults);
    const result = { judged: tokens.judged + writes.judged, excused: { ...tokens.excused, ...writes.excused }, violations: [...tokens.violations, ...writes.violations] };
    return { rule: `tokens grow; fencedSet wrote ${fencedWrites.filter((w) => w.ok).length} and refused ${fencedWrites.filter((w) => !w.ok).length}, never an older token after a newer one`, result };
  }
  if (invariant.latchCount !== undefined) return { rule: `opens only after ${invariant.latchCount} countDowns`, result: checkLatch(holds, ops, faults, invariant.latchCount) };
  return undefined;
}
