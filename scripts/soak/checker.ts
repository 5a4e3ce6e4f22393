// The soak checker: pure logic over the records (no Redis, no clock), so it can be tested on
// synthetic event lists. It proves exclusion from the holders' own records and attributes every
// overlap exactly: an overlap is excused only by a fault that removed one of the two holds
// before the other was granted, and only when that hold's owner was told.
import { restartLostDataBetween, type DeafLine, type Fault, type Force, type Hold } from './records';

/** A worker's subscriber down from `from` to `to` (null: until the end). */
export type Deafness = Omit<DeafLine, 'k'>;

/** What a primitive promises about its holds on one resource (see invariants.ts for the rest). */
export interface Invariant {
  /** Whether `a` and `b` may not be held at the same time (locks: always; read-write: a writer is involved). */
  conflicts(a: Hold, b: Hold): boolean;
  /** Grants must follow the order in which waiters were queued (fair lock): see checkFifo. */
  fifo: boolean;
  /** Semaphores: the permits; holds weigh their `permits` and must never sum above it (checkCapacity), instead of `conflicts`. */
  capacity?: number;
  /** Fenced lock: a hold granted after another was must carry a larger token (checkTokens). */
  tokens?: boolean;
  /** Count-down latch: an await opens only once the count reached zero (checkLatch), with this count. */
  latchCount?: number;
  /** Whether each critical section adds one to a counter that must match the holds (not for a latch's awaits). */
  counters: boolean;
}

/** Faults the primitive documents as able to break exclusion (removing a hold without its owner). */
export type Cause = 'force' | 'restart' | 'pause';

export interface Overlap {
  lock: string;
  /** The two holds, earlier-granted first. */
  a: Hold;
  b: Hold;
  /** What removed one of them first, when something did (and its owner was told). */
  cause?: Cause;
  /** Which of the two was removed. */
  removed?: Hold;
  /** ms from the fault to the removed owner being told; null when its worker was killed. */
  toldAfter?: number | null;
}

export interface ExclusionResult {
  overlaps: Overlap[];
  excused: Record<Cause, number>;
  /** Unexcused overlaps, described. */
  violations: string[];
}

/** When a hold stops counting as held: its release, or earlier when its owner was told it lost it. */
export function heldUntil(hold: Hold): number {
  return Math.min(hold.end, hold.toldAt ?? Infinity);
}

/** Whether the owner knew: told it lost the hold, or never believed it had it (aborted as granted). */
const told = (hold: Hold): boolean => hold.toldAt !== null || hold.outcome === 'aborted';
const toldAfter = (hold: Hold, at: number): number | null => (hold.toldAt === null ? null : hold.toldAt - at);

/**
 * Why `removed`'s hold may have ended in Redis before `other` was granted, or undefined.
 *  - force: a force-unlock on the lock named `removed`'s owner field among the holders it
 *    deleted, and was sent before `other`'s grant reply (so the deletion can precede the grant);
 *  - restart: Redis was killed (and came back without data) after `removed`'s successful
 *    attempt was sent and before `other`'s grant reply;
 *  - pause: Redis was frozen past the lease after `removed`'s attempt was sent and before
 *    `other`'s grant reply, so `removed`'s lease ran out at the resume.
 * In each case the removed owner must have been told (lost event, LockLostError or
 * NotLockOwnerError), or never have seen the hold (its call aborted as the grant came in).
 */
export function excuse(
  removed: Hold,
  other: Hold,
  forcesByField: Map<string, Force[]>,
  faults: Fault[],
): Pick<Overlap, 'cause' | 'toldAfter'> | undefined {
  if (!told(removed)) return undefined;
  const force = forcesByField.get(removed.field)?.find((f) => f.lock === removed.lock && f.done >= removed.sent && f.sent < other.granted);
  if (force) return { cause: 'force', toldAfter: toldAfter(removed, force.sent) };
  for (const fault of faults) {
    // A restart: the killed server may still have granted `removed` after the kill was sent
    // (until it was seen gone). An attempt sent in those few ms whose reply was lost to the kill
    // and that ioredis resent to the new server would be excused too: the price of not knowing
    // which server answered.
    if (restartLostDataBetween(fault, removed.sent, other.granted)) {
      return { cause: 'restart', toldAfter: toldAfter(removed, fault.at) };
    }
    if (fault.at <= removed.sent || fault.at >= other.granted) continue;
    if (fault.kind === 'pause') return { cause: 'pause', toldAfter: toldAfter(removed, fault.at) };
  }
  return undefined;
}

/** The force-unlocks that named each owner field. */
export function byField(forces: Force[]): Map<string, Force[]> {
  const forcesByField = new Map<string, Force[]>();
  for (const force of forces) {
    for (const field of force.holders) {
      const list = forcesByField.get(field);
      if (list) list.push(force);
      else forcesByField.set(field, [force]);
    }
  }
  return forcesByField;
}

/** Holds grouped by lock. */
export function byLock<T extends { lock: string }>(items: T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const list = groups.get(item.lock);
    if (list) list.push(item);
    else groups.set(item.lock, [item]);
  }
  return groups;
}

/** Every pair of conflicting holds of a lock whose held intervals overlap, judged. */
export function checkExclusion(holds: Hold[], forces: Force[], faults: Fault[], invariant: Invariant): ExclusionResult {
  const forcesByField = byField(forces);
  const overlaps: Overlap[] = [];
  const excused: Record<Cause, number> = { force: 0, restart: 0, pause: 0 };
  const violations: string[] = [];
  for (const [lock, mine] of byLock(holds)) {
    mine.sort((x, y) => x.granted - y.granted);
    // Holds still held at the current grant; every one of them is compared, not only the latest.
    let active: Hold[] = [];
    for (const b of mine) {
      active = active.filter((a) => heldUntil(a) > b.granted);
      for (const a of active) {
        if (!invariant.conflicts(a, b)) continue;
        const overlap: Overlap = { lock, a, b };
        const first = excuse(a, b, forcesByField, faults);
        const second = first ? undefined : excuse(b, a, forcesByField, faults);
        if (first || second) {
          Object.assign(overlap, first ?? second, { removed: first ? a : b });
          excused[overlap.cause!]++;
        } else {
          violations.push(describe(overlap, forces, faults));
        }
        overlaps.push(overlap);
      }
      if (heldUntil(b) > b.granted) active.push(b);
    }
  }
  return { overlaps, excused, violations };
}

const t = (ms: number | null): string => (ms === null ? '-' : ms.toFixed(3));

export function describeHold(h: Hold): string {
  return `${h.w}.${h.id} ${h.field} (${h.via}) sent ${t(h.sent)} granted ${t(h.granted)} until ${t(h.end)} ${h.outcome}${h.toldAt === null ? '' : ` told ${t(h.toldAt)}`}`;
}

/** An unexcused overlap with what happened near it, so that the report says where to look. */
export function describe({ lock, a, b }: Overlap, forces: Force[], faults: Fault[]): string {
  const from = Math.min(a.sent, b.sent) - 50;
  const to = Math.max(heldUntil(a), heldUntil(b)) + 50;
  const near = [
    ...forces
      .filter((f) => f.lock === lock && f.done >= from && f.sent <= to)
      .map((f) => `force ${t(f.sent)}..${t(f.done)} removed [${f.holders.join(', ')}]`),
    ...faults.filter((f) => f.end >= from && f.at <= to).map((f) => `${f.kind} ${t(f.at)}..${t(f.end)}`),
  ];
  return `overlap on ${lock}: ${describeHold(a)} / ${describeHold(b)}; ${near.join('; ') || 'no fault near'}`;
}

/**
 * FIFO order of grants (fair lock). Under exclusion the grant replies come in the order Redis
 * granted: a holder releases only after its own grant reply, so the next grant comes later.
 * A waiter queued strictly before another (its last queueing reply came before the other's
 * first queueing attempt was sent) must then be granted before it, unless a fault fell between
 * its queueing and its grant (a restart empties the queue, a pause or a killed connection can
 * let its entry run out, a force hands the lock on), or its worker's subscriber was down in
 * between (`deaf`): a release passes over a waiter that cannot hear its grant, which keeps its
 * place for the release after it hears again. A fault's record ends when it was made, while
 * the subscribers it cut reconnect up to a few hundred ms later.
 */
export function checkFifo(holds: Hold[], forces: Force[], faults: Fault[], deaf: Deafness[] = []): string[] {
  const violations: string[] = [];
  const queuedHolds = holds.filter((hold) => hold.queuedSent !== null && hold.queuedReplied !== null); // others never queued
  const faultBetween = (lock: string, from: number, to: number): boolean =>
    forces.some((f) => f.lock === lock && f.holders.length > 0 && f.done >= from && f.sent <= to) ||
    faults.some((f) => f.end >= from && f.at <= to);
  const deafBetween = (worker: number, from: number, to: number): boolean => deaf.some((d) => d.w === worker && (d.to ?? Infinity) >= from && d.from <= to);
  for (const [lock, queued] of byLock(queuedHolds)) {
    const byQueued = [...queued].sort((x, y) => x.queuedReplied! - y.queuedReplied!);
    const byQueueSent = [...queued].sort((x, y) => x.queuedSent! - y.queuedSent!);
    // Walk the later waiters in order of their queueing; `latest` is the waiter granted latest
    // among those queued strictly before the current one.
    let i = 0;
    let latest: Hold | undefined;
    for (const b of byQueueSent) {
      while (i < byQueued.length && byQueued[i]!.queuedReplied! < b.queuedSent!) {
        if (!latest || byQueued[i]!.granted > latest.granted) latest = byQueued[i];
        i++;
      }
      if (latest && latest.granted > b.granted && !faultBetween(lock, latest.queuedSent!, latest.granted) && !deafBetween(latest.w, latest.queuedSent!, latest.granted)) {
        violations.push(`FIFO on ${lock}: ${describeHold(latest)} was queued before ${describeHold(b)} but granted after it`);
      }
    }
  }
  return violations;
}
