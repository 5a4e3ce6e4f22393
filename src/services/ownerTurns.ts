import { boundedWait } from './bounds';
import type { LockOwner } from './LockOwner';

/**
 * One owner's acquires of a lock, made one at a time (the fair lock's: two at once would share
 * one queue entry and one grant, and both book the one hold it gives). Each waits until the one
 * before it has settled, its hold booked, then goes: a re-entry that counts the hold up, as
 * RLock's concurrent re-entries do. An owner has a line only while one of its acquires runs.
 */
interface Line {
  /** The acquires waiting for their turn, in their order of arrival (made for the first). */
  waiting: Waiter[] | undefined;
  /**
   * The running acquire found the lock another owner's and waits: a single attempt behind it
   * (`tryLock()` without `waitTime`) would find the same, and is answered "not taken" at once.
   */
  blocked: boolean;
}

interface Waiter {
  /** Its turn has come. */
  go(): void;
  /** A single attempt's: an acquire ahead waits for another owner. */
  readonly blocked: (() => void) | undefined;
}

const lines = new WeakMap<LockOwner, Line>();

/**
 * Waits for `owner`'s turn to acquire: true at once (no await) when none of its acquires runs.
 * Waits until `deadline` (performance.now() ms) at most, or, for a single attempt (`single`),
 * until the acquire running finds the lock another owner's: false then (the acquire is not made).
 * Rejects with the reason of the first of `stops` to abort. After true, `endTurn` once the hold
 * is booked or the acquire failed.
 */
export function takeTurn(owner: LockOwner, deadline: number, single: boolean, stops: AbortSignal[]): boolean | Promise<boolean> {
  const line = lines.get(owner);
  if (!line) {
    lines.set(owner, { waiting: undefined, blocked: false });
    return true;
  }
  if (single && line.blocked) return false;
  let reached = false;
  return boundedWait(deadline - performance.now(), stops, (done) => {
    const waiter: Waiter = {
      go: () => {
        reached = true;
        done();
      },
      blocked: single ? done : undefined,
    };
    (line.waiting ??= []).push(waiter);
    // Out of the line when the wait ends (its turn, a deadline, a stop): one that leaves before
    // its turn keeps the ones behind it waiting for those ahead of it.
    return () => {
      const at = line.waiting!.indexOf(waiter);
      if (at >= 0) line.waiting!.splice(at, 1);
    };
  }).then(() => reached);
}

/** The acquire whose turn it was has settled (its hold booked, or none): the next in line goes. */
export function endTurn(owner: LockOwner): void {
  const line = lines.get(owner);
  if (!line) return;
  line.blocked = false;
  const next = line.waiting?.shift();
  if (next) next.go();
  else lines.delete(owner);
}

/** `owner`'s running acquire found the lock another owner's and waits: the single attempts in its line give up. */
export function turnBlocked(owner: LockOwner): void {
  const line = lines.get(owner);
  if (!line || line.blocked) return;
  line.blocked = true;
  if (!line.waiting) return;
  for (const waiter of [...line.waiting]) waiter.blocked?.();
}
