// The soak checker (scripts/soak/checker.ts) on synthetic records: it is pure logic, so each rule
// is shown on the smallest event list that needs it, next to the case it must not excuse.
import { checkExclusion, checkFifo } from '../scripts/soak/checker';
import { checkCapacity, checkFencedWrites, checkLatch, checkTokens } from '../scripts/soak/invariants';
import { readWriteLock } from '../scripts/soak/primitives/readWriteLock';
import { exclusive } from '../scripts/soak/primitives/rlock';
import type { Fault, Force, Hold, Op } from '../scripts/soak/records';

let next = 0;
/** A hold on lock L: attempt sent at `sent`, grant reply at `granted`, release sent at `end`. */
function hold(sent: number, granted: number, end: number, more: Partial<Hold> = {}): Hold {
  const id = next++;
  return {
    w: 0, id, lock: 'L', field: `c:${id}`, via: 'test', begun: sent, queuedSent: null, queuedReplied: null, sent, granted,
    waitTime: null, end, released: end + 1, outcome: 'released', toldAt: null, counted: true, ...more,
  };
}
const told = (at: number): Partial<Hold> => ({ outcome: 'notOwner', toldAt: at });
const force = (sent: number, done: number, ...removed: Hold[]): Force => ({ lock: 'L', sent, done, holders: removed.map((h) => h.field) });
const check = (holds: Hold[], forces: Force[] = [], faults: Fault[] = []) => checkExclusion(holds, forces, faults, exclusive);

test('a double hold next to a force that removed someone else is a violation', () => {
  const a = hold(0, 1, 10);
  const b = hold(4, 5, 12);
  // Removed by the force just before a's grant, and told at its release.
  const bystander = hold(-20, -19, 0.5, told(0.6));
  const result = check([bystander, a, b], [force(0.1, 0.2, bystander)]);
  expect(result.violations).toHaveLength(1);
  expect(result.violations[0]).toContain(`${a.field}`);
  expect(result.violations[0]).toContain(`${b.field}`);
  expect(result.excused.force).toBe(0);
});

test('an overlap is excused when a force removed one of the two before the other was granted, and its owner was told', () => {
  const a = hold(0, 1, 10, told(11));
  const b = hold(4, 5, 12);
  const result = check([a, b], [force(3, 4, a)]);
  expect(result.violations).toEqual([]);
  expect(result.excused.force).toBe(1);
  expect(result.overlaps[0]).toMatchObject({ cause: 'force', removed: a, toldAfter: 8 });
});

test('the force must be sent before the other hold was granted', () => {
  const a = hold(0, 1, 10, told(11));
  const b = hold(4, 5, 12);
  expect(check([a, b], [force(6, 7, a)]).violations).toHaveLength(1);
});

test('a removed owner that was never told does not excuse the overlap', () => {
  const a = hold(0, 1, 10); // released "successfully" although a force named it
  const b = hold(4, 5, 12);
  expect(check([a, b], [force(3, 4, a)]).violations).toHaveLength(1);
});

test('the removed hold may be the later-granted one (its reply came late): the case of issue 20', () => {
  // 1.7's attempt ran before the force, the force removed it, 3.12 took the free lock, and
  // 1.7's reply reached its busy process after 3.12's.
  const late = hold(861.784, 870.884, 873, told(873.5));
  const early = hold(870.418, 870.853, 872.956);
  const result = check([early, late], [force(870.07, 870.364, late)]);
  expect(result.violations).toEqual([]);
  expect(result.overlaps[0]).toMatchObject({ cause: 'force', removed: late });
});

test('every overlapping pair is judged, not only the one with the latest-ending earlier hold', () => {
  const a = hold(0, 1, 100, told(100)); // removed by the force, told at its unlock
  const b = hold(9, 10, 50); // never removed
  const c = hold(29, 30, 40); // overlaps a (excused) and b (not)
  const result = check([a, b, c], [force(8, 9, a)]);
  expect(result.excused.force).toBe(2); // a–b, a–c
  expect(result.violations).toHaveLength(1);
  expect(result.violations[0]).toContain(b.field);
  expect(result.violations[0]).toContain(c.field);
});

test('a hold ends where its owner was told it lost it', () => {
  const a = hold(0, 1, 30, { outcome: 'lost', toldAt: 15 });
  const b = hold(19, 20, 40);
  expect(check([a, b]).overlaps).toEqual([]);
});

test('a restart that lost the data excuses a hold granted before the kill against one granted after, if told', () => {
  const restart: Fault = { kind: 'restart', at: 10, end: 12, lostData: true };
  const a = hold(0, 1, 30, told(31));
  const b = hold(12, 13, 20);
  expect(check([a, b], [], [restart])).toMatchObject({ violations: [], excused: { restart: 1 } });
  // The same restart, but Redis kept its data: no excuse.
  expect(check([a, b], [], [{ ...restart, kind: 'restart-persist', lostData: false }]).violations).toHaveLength(1);
  // Told nothing: no excuse either.
  expect(check([hold(0, 1, 30), b], [], [restart]).violations).toHaveLength(1);
});

test('a restart excuses a hold the killed server granted after the kill was sent, before it was seen gone (the fenced soak found one)', () => {
  const restart: Fault = { kind: 'restart', at: 10, end: 12, lostData: true, killed: 10.5 };
  const a = hold(10.2, 10.4, 30, told(31));
  const b = hold(12, 13, 20);
  expect(check([a, b], [], [restart])).toMatchObject({ violations: [], excused: { restart: 1 } });
  // Sent once the server was gone: granted by the new one, whose data no restart lost.
  expect(check([hold(10.6, 12.5, 30, told(31)), b], [], [restart]).violations).toHaveLength(1);
});

test('a pause past the lease excuses an owner told late', () => {
  const pause: Fault = { kind: 'pause', at: 10, end: 20 };
  const a = hold(0, 1, 30, { outcome: 'lost', toldAt: 25 });
  const b = hold(20, 21, 28);
  expect(check([a, b], [], [pause])).toMatchObject({ violations: [], excused: { pause: 1 } });
});

test('a hold the library gave back as its call aborted counts as known to its owner', () => {
  // lock({ signal }) aborted as the grant came in: the caller never held it.
  const aborted = hold(0, 50, 52, { outcome: 'aborted' });
  const other = hold(44, 51, 60);
  expect(check([aborted, other], [force(40, 41, aborted)])).toMatchObject({ violations: [], excused: { force: 1 } });
  // Without the force that removed it, still a double grant.
  expect(check([aborted, other]).violations).toHaveLength(1);
});

test('FIFO: a waiter queued first must not be granted after one queued later, unless a fault fell in between', () => {
  const first = hold(0, 13, 20, { queuedSent: 0, queuedReplied: 1 });
  const second = hold(2, 10, 12, { queuedSent: 2, queuedReplied: 3 });
  expect(checkFifo([first, second], [], [])).toHaveLength(1);
  expect(checkFifo([first, second], [], [{ kind: 'sub-kill', at: 5, end: 5 }])).toEqual([]);
  // Granted in order: fine; queued at overlapping times (order unknown): not judged.
  expect(checkFifo([first, hold(2, 21, 22, { queuedSent: 2, queuedReplied: 3 })], [], [])).toEqual([]);
  expect(checkFifo([first, hold(0.5, 10, 12, { queuedSent: 0.5, queuedReplied: 3 })], [], [])).toEqual([]);
  // Never queued (granted at the first try): not judged.
  expect(checkFifo([first, hold(2, 10, 12)], [], [])).toEqual([]);
});

test("FIFO: a waiter passed over while its worker's subscriber was down (it could not hear its grant) is excused; another worker's outage is not", () => {
  const first = hold(0, 13, 20, { w: 1, queuedSent: 0, queuedReplied: 1 });
  const second = hold(2, 10, 12, { w: 2, queuedSent: 2, queuedReplied: 3 });
  expect(checkFifo([first, second], [], [], [{ w: 1, from: 5, to: 11 }])).toEqual([]);
  expect(checkFifo([first, second], [], [], [{ w: 1, from: 5, to: null }])).toEqual([]);
  // Down before it queued, or after its grant, or another worker's: still a violation.
  expect(checkFifo([first, second], [], [], [{ w: 1, from: -5, to: -1 }])).toHaveLength(1);
  expect(checkFifo([first, second], [], [], [{ w: 1, from: 14, to: 16 }])).toHaveLength(1);
  expect(checkFifo([first, second], [], [], [{ w: 2, from: 5, to: 11 }])).toHaveLength(1);
});

describe('the read-write lock: no writer beside anyone', () => {
  const rw = readWriteLock.invariant;
  const write = (sent: number, granted: number, end: number, more: Partial<Hold> = {}): Hold => {
    const h = hold(sent, granted, end, more);
    return { ...h, field: `${h.field}:write` };
  };

  test('readers overlap freely; a writer beside a reader or a writer is a violation', () => {
    expect(checkExclusion([hold(0, 1, 10), hold(2, 3, 12)], [], [], rw).overlaps).toEqual([]);
    expect(checkExclusion([hold(0, 1, 10), write(2, 3, 12)], [], [], rw).violations).toHaveLength(1);
    expect(checkExclusion([write(0, 1, 10), hold(2, 3, 12)], [], [], rw).violations).toHaveLength(1);
    expect(checkExclusion([write(0, 1, 10), write(2, 3, 12)], [], [], rw).violations).toHaveLength(1);
  });

  test('a force that named the write field excuses its told writer', () => {
    const writer = write(0, 1, 10, told(11));
    const reader = hold(4, 5, 12);
    expect(checkExclusion([writer, reader], [force(3, 4, writer)], [], rw)).toMatchObject({ violations: [], excused: { force: 1 } });
  });
});

describe('semaphores: never more permits held than there are', () => {
  const semaphore = (permits: number, sent: number, granted: number, end: number, more: Partial<Hold> = {}): Hold => hold(sent, granted, end, { permits, ...more });

  test('up to the capacity is fine; one permit more is a violation naming every holder', () => {
    expect(checkCapacity([semaphore(1, 0, 1, 10), semaphore(2, 2, 3, 12)], [], [], 3)).toMatchObject({ judged: 2, violations: [] });
    const over = [semaphore(2, 0, 1, 10), semaphore(1, 2, 3, 12), semaphore(1, 4, 5, 6)];
    const result = checkCapacity(over, [], [], 3);
    expect(result.violations).toHaveLength(1);
    for (const h of over) expect(result.violations[0]).toContain(h.field);
    // The same holds one after another: fine.
    expect(checkCapacity([semaphore(2, 0, 1, 2), semaphore(2, 2, 3, 4), semaphore(2, 4, 5, 6)], [], [], 3).violations).toEqual([]);
  });

  test('a hold a documented fault removed before the grant, with its owner told, is taken out', () => {
    const pause: Fault = { kind: 'pause', at: 3, end: 8 };
    const expired = semaphore(2, 0, 1, 20, { outcome: 'lost', toldAt: 10 }); // told after the other's grant
    const late = semaphore(2, 8, 9.5, 12);
    expect(checkCapacity([expired, late], [], [pause], 3)).toMatchObject({ violations: [], excused: { pause: 1 } });
    // Not told: still a violation.
    expect(checkCapacity([semaphore(2, 0, 1, 20), late], [], [pause], 3).violations).toHaveLength(1);
    // Without the fault: a violation.
    expect(checkCapacity([expired, late], [], [], 3).violations).toHaveLength(1);
  });
});

describe('the fenced lock: tokens grow', () => {
  const fenced = (token: number, sent: number, granted: number, end: number): Hold => hold(sent, granted, end, { token: String(token) });

  test('a hold granted after another was must carry a larger token', () => {
    expect(checkTokens([fenced(10, 0, 1, 2), fenced(11, 2, 3, 4), fenced(20, 4, 5, 6)])).toMatchObject({ judged: 3, violations: [] });
    const stale = fenced(11, 4, 5, 6);
    const result = checkTokens([fenced(10, 0, 1, 2), fenced(12, 2, 3, 4), stale]);
    expect(result.violations).toHaveLength(1);
    expect(result.violations[0]).toContain(stale.field);
    // Equal is not larger.
    expect(checkTokens([fenced(10, 0, 1, 2), fenced(10, 2, 3, 4)]).violations).toHaveLength(1);
  });

  test('two holds whose attempts raced (one sent before the other was granted) are not ordered', () => {
    // b's attempt went out before a's grant reply came: Redis may have run either first.
    expect(checkTokens([fenced(12, 0, 3, 4), fenced(11, 2, 5, 6)]).violations).toEqual([]);
  });

  const write = (token: number, sent: number, replied: number, ok = true) => ({ w: 0, lock: 'l', token: String(token), sent, replied, ok });

  test('fencedSet: a write accepted after a newer token was written is a violation; refused ones, raced ones and a lost fence are not', () => {
    expect(checkFencedWrites([write(10, 0, 1), write(12, 2, 3), write(12, 4, 5)], [])).toMatchObject({ judged: 3, violations: [] });
    // A holder that lost its lock unseen writes after its successor: refused, as it must be.
    expect(checkFencedWrites([write(12, 0, 1), write(10, 2, 3, false)], []).violations).toEqual([]);
    // Accepted instead: the fence let an older token through.
    const accepted = checkFencedWrites([write(12, 0, 1), write(10, 2, 3)], []);
    expect(accepted.violations).toHaveLength(1);
    expect(accepted.violations[0]).toContain('accepted token 10');
    // Sent before the newer one answered: Redis may have run it first.
    expect(checkFencedWrites([write(12, 0, 3), write(10, 2, 4)], []).violations).toEqual([]);
    // Redis restarted empty in between: the fence went with the data.
    const restart: Fault = { kind: 'restart', at: 1.5, end: 1.7, lostData: true };
    expect(checkFencedWrites([write(12, 0, 1), write(10, 2, 3)], [restart])).toMatchObject({ violations: [], excused: { restart: 1 } });
    expect(checkFencedWrites([write(12, 0, 1), write(10, 2, 3)], [{ ...restart, kind: 'restart-persist', lostData: false }]).violations).toHaveLength(1);
  });
});

describe('the count-down latch: it opens only at zero', () => {
  let opId = 0;
  const op = (name: string, sent: number, replied: number | null, ok = true): Op => ({ w: 0, id: opId++, lock: 'L', op: name, sent, replied, ok });
  const opened = (begun: number, at: number): Hold => hold(begun, at, at, { begun });
  const setAndCount = (n: number): Op[] => [op('set', 0, 1), ...Array.from({ length: n }, (_, i) => op('countDown', 2 + i, 2.5 + i))];

  test('an await that opened after the fourth countDown is fine; after the third, a violation', () => {
    expect(checkLatch([opened(1.5, 10)], setAndCount(4), [], 4)).toMatchObject({ judged: 1, violations: [] });
    const result = checkLatch([opened(1.5, 10)], setAndCount(3), [], 4);
    expect(result.violations).toHaveLength(1);
    expect(result.violations[0]).toContain('3 of 4');
  });

  test('a countDown never answered may have run; one sent after the latch opened did not count', () => {
    expect(checkLatch([opened(1.5, 10)], [...setAndCount(3), op('countDown', 6, null)], [], 4).violations).toEqual([]);
    expect(checkLatch([opened(1.5, 10)], [...setAndCount(3), op('countDown', 11, 12)], [], 4).violations).toHaveLength(1);
  });

  test('Redis losing its data in between excuses it; an await before any set is not judged', () => {
    const restart: Fault = { kind: 'restart', at: 5, end: 6, lostData: true };
    expect(checkLatch([opened(1.5, 10)], setAndCount(1), [restart], 4)).toMatchObject({ violations: [], excused: { restart: 1 } });
    expect(checkLatch([opened(1.5, 10)], setAndCount(1), [{ ...restart, kind: 'restart-persist', lostData: false }], 4).violations).toHaveLength(1);
    expect(checkLatch([opened(0.5, 10)], setAndCount(0), [], 4)).toMatchObject({ judged: 0, violations: [] });
  });
});
