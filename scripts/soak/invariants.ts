// The invariants beyond "these two may not overlap" (checker.ts), pure logic over the records:
// at most `permits` permits held (semaphores), tokens that only grow (fenced lock), a latch that
// opens only at zero. Like checker.ts, an excuse needs a fault that removed state and, for a
// hold, an owner that was told.
import { byField, byLock, describeHold, excuse, heldUntil, type Cause } from './checker';
import { restartLostDataBetween, type Fault, type FencedWriteLine, type Force, type Hold, type Op } from './records';

export interface InvariantResult {
  /** Instants (grants, opened latches) the rule was judged at. */
  judged: number;
  excused: Partial<Record<Cause, number>>;
  violations: string[];
}

const weight = (hold: Hold): number => hold.permits ?? 1;

/**
 * At no grant may the permits held sum above `capacity`. A hold counts until its release was
 * sent or its owner was told it lost it. When a grant goes over, the holds a documented fault
 * removed before the other was granted (and whose owners were told: see `excuse`) are taken out;
 * if it is still over, that is a violation.
 */
export function checkCapacity(holds: Hold[], forces: Force[], faults: Fault[], capacity: number): InvariantResult {
  const forcesByField = byField(forces);
  const result: InvariantResult = { judged: 0, excused: {}, violations: [] };
  for (const [lock, mine] of byLock(holds)) {
    mine.sort((x, y) => x.granted - y.granted);
    let active: Hold[] = [];
    for (const b of mine) {
      result.judged++;
      active = active.filter((a) => heldUntil(a) > b.granted);
      const total = active.reduce((sum, a) => sum + weight(a), weight(b));
      if (total > capacity) {
        let causes: Cause[] = [];
        let left = total;
        for (const a of active) {
          const cause = excuse(a, b, forcesByField, faults)?.cause;
          if (cause) {
            causes.push(cause);
            left -= weight(a);
          }
        }
        const own = active.map((a) => excuse(b, a, forcesByField, faults)?.cause).find((cause) => cause !== undefined);
        if (own) {
          causes.push(own);
          left -= weight(b);
        }
        if (left > capacity) {
          causes = [];
          result.violations.push(`over capacity on ${lock}: ${total} of ${capacity} permits held at ${b.granted.toFixed(3)}: ${[...active, b].map(describeHold).join(' / ')}`);
        }
        for (const cause of causes.slice(0, 1)) result.excused[cause] = (result.excused[cause] ?? 0) + 1;
      }
      if (heldUntil(b) > b.granted) active.push(b);
    }
  }
  return result;
}

/**
 * Fencing tokens only grow: a hold whose grant reply came before another's attempt was sent was
 * granted first in Redis, so its token must be smaller. No fault excuses a smaller token: the
 * lock mints `max(last + 1, Redis TIME in µs)`, which survives force-unlocks and lost data.
 */
export function checkTokens(holds: Hold[]): InvariantResult {
  const result: InvariantResult = { judged: 0, excused: {}, violations: [] };
  const tokened = holds.filter((h): h is Hold & { token: string } => h.token !== undefined);
  afterHighest(tokened, (h) => h.granted, (lock, b, highest) => {
    result.judged++;
    if (highest && BigInt(highest.token) >= BigInt(b.token)) {
      result.violations.push(`token on ${lock} did not grow: ${describeHold(highest)} token ${highest.token} was granted before ${describeHold(b)} token ${b.token}`);
    }
  });
  return result;
}

/**
 * For each item of each lock, in the order they were sent: the item of the largest token among
 * those of its lock answered (`answeredAt`) before it was sent, which Redis surely ran first.
 */
function afterHighest<T extends { lock: string; sent: number; token: string }>(items: T[], answeredAt: (item: T) => number, visit: (lock: string, item: T, highest: T | undefined) => void): void {
  for (const [lock, mine] of byLock(items)) {
    const byAnswer = [...mine].sort((x, y) => answeredAt(x) - answeredAt(y));
    const bySent = [...mine].sort((x, y) => x.sent - y.sent);
    let i = 0;
    let highest: T | undefined;
    for (const b of bySent) {
      while (i < byAnswer.length && answeredAt(byAnswer[i]!) < b.sent) {
        if (!highest || BigInt(byAnswer[i]!.token) > BigInt(highest.token)) highest = byAnswer[i];
        i++;
      }
      visit(lock, b, highest);
    }
  }
}

/**
 * `fencedSet` keeps out older tokens: a write accepted after another accepted write had answered
 * (sent after its reply) carries a token at least as large. Excused only when Redis lost its data
 * in between (the fence went with it, and so did the data). Refusals are what it is for: a holder
 * that did not know it had lost its lock, whose successor wrote already.
 */
export function checkFencedWrites(writes: Omit<FencedWriteLine, 'k'>[], faults: Fault[]): InvariantResult {
  const result: InvariantResult = { judged: 0, excused: {}, violations: [] };
  afterHighest(writes.filter((write) => write.ok), (write) => write.replied, (lock, b, a) => {
    result.judged++;
    if (!a || BigInt(a.token) <= BigInt(b.token)) return;
    if (faults.some((fault) => restartLostDataBetween(fault, a.sent, b.replied))) {
      result.excused.restart = (result.excused.restart ?? 0) + 1;
      return;
    }
    result.violations.push(`fencedSet on ${lock} accepted token ${b.token} (worker ${b.w}, sent ${b.sent.toFixed(3)}) after token ${a.token} (worker ${a.w}) was written (answered ${a.replied.toFixed(3)})`);
  });
  return result;
}

/**
 * A latch opens only at zero: an await that saw it open (`granted`), and began after a
 * trySetCount that set it had answered, needs `count` countDowns that may have run after that
 * set (answered after it was sent, or never answered) and were sent before it saw it open.
 * Fewer is a violation, unless Redis lost its data in between (a lost count reads as open).
 * Awaits that began before any set are not judged (a latch never set is open, as in Redisson).
 */
export function checkLatch(awaits: Hold[], ops: Op[], faults: Fault[], count: number): InvariantResult {
  const result: InvariantResult = { judged: 0, excused: {}, violations: [] };
  const opsByLatch = byLock(ops);
  for (const [latch, opened] of byLock(awaits)) {
    const mine = opsByLatch.get(latch) ?? [];
    const sets = mine.filter((op) => op.op === 'set' && op.ok && op.replied !== null).sort((x, y) => x.replied! - y.replied!);
    const countDowns = mine.filter((op) => op.op === 'countDown');
    for (const hold of opened) {
      const set = sets.filter((s) => s.replied! < hold.begun).at(-1);
      if (!set) continue;
      result.judged++;
      if (faults.some((f) => restartLostDataBetween(f, set.sent, hold.granted))) {
        result.excused.restart = (result.excused.restart ?? 0) + 1;
        continue;
      }
      const counted = countDowns.filter((c) => c.sent < hold.granted && (c.replied === null || c.replied > set.sent)).length;
      if (counted < count) {
        result.violations.push(
          `latch ${latch} opened with ${counted} of ${count} countDowns: set ${set.sent.toFixed(3)}..${set.replied!.toFixed(3)} by ${set.w}, ${describeHold(hold)}`,
        );
      }
    }
  }
  return result;
}
