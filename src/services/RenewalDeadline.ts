import type { RenewalEntry } from './RenewalEntry';

/**
 * The watchdog's deadline: one timer for all its holds, which declares lost every hold whose
 * lease no renewal confirmed in time (Redis slow or unreachable).
 */
export class RenewalDeadline {
  /** Fires at the earliest lease end that no renewal has pushed back yet. */
  private timer: NodeJS.Timeout | undefined;
  private at = Infinity;

  constructor(
    /** The watchdog's registry, read when the timer fires. */
    private readonly entries: ReadonlyMap<string, RenewalEntry>,
    private readonly leaseMs: number,
    private readonly lose: (entry: RenewalEntry, reason: string) => void,
  ) {}

  /** Makes sure the deadline timer fires no later than `at`. */
  arm(at: number): void {
    if (at >= this.at) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.at = at;
    this.timer = setTimeout(() => this.expireOverdue(), Math.max(0, at - performance.now())).unref();
  }

  /** Holds a reply renewed, the earliest of them until `earliest`: the deadline may now lie later. */
  pushedBack(earliest: number): void {
    if (this.timer === undefined || this.at >= earliest) return;
    // Re-armed from scratch once per batch.
    this.stop();
    let next = Infinity;
    for (const entry of this.entries.values()) next = Math.min(next, entry.lostAt);
    this.arm(next);
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.at = Infinity;
  }

  /** Declares lost every lock whose lease no renewal confirmed in time, then re-arms for the next. */
  private expireOverdue(): void {
    this.timer = undefined;
    this.at = Infinity;
    if (this.entries.size === 0) return;
    const now = performance.now();
    let next = Infinity;
    for (const entry of [...this.entries.values()]) {
      if (entry.lostAt <= now) {
        this.lose(entry, `no renewal was confirmed before its lease of ${this.leaseMs} ms ran out (Redis slow or unreachable)`);
      } else {
        next = Math.min(next, entry.lostAt);
      }
    }
    if (next < Infinity) this.arm(next);
  }
}
