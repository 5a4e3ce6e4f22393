import { ClientClosedError, LockLostError } from '../errors';
import { batchesOf } from './batches';
import { renewBatch, type RenewingWatchdog } from './renewBatch';
import { RenewalDeadline } from './RenewalDeadline';
import { DEFAULT_RENEW, RenewalEntry, lossWatch, lostAt } from './RenewalEntry';
import type { ScriptedRedis } from './scripts';
import type { RenewalTarget } from './RenewalTarget';

/** Keys renewed by one script call; large enough that 10 000 held locks cost 10 calls a period. */
const BATCH_SIZE = 1000;

/**
 * The watchdog: one registry per client, one timer for all its locks taken without a lease.
 * Every `watchdogTimeout / 3` it extends all of them in batches of one script call each, as
 * Redisson does since 3.44, instead of one timer and one call per lock.
 */
export class ExpirationRenewal {
  private readonly entries = new Map<string, RenewalEntry>();
  private timer: NodeJS.Timeout | undefined;
  private readonly deadline: RenewalDeadline;
  /** An extra renewal before the next tick, for a hold whose first lease is short (a fair-lock grant). */
  private earlyTimer: NodeJS.Timeout | undefined;
  private earlyAt = Infinity;
  /** Whether the early renewal armed is for holds added since the calls out were batched (see armEarly). */
  private earlyForNewHolds = false;
  /** The batch groups (renew command and slot) whose call of an earlier tick is still out, with how many. */
  private readonly inFlight = new Map<string, number>();
  /** Groups an early renewal found out: their holds added since are renewed once the call is back. */
  private readonly earlyAfter = new Set<string>();
  private closed = false;
  /**
   * The last id made (see `entryId`) and what it was made of: a hold's add, its scope's lookups
   * and its release ask for the same one in a row, and a string made once has its hash computed
   * once (a new one per call cost a concatenation and a hash at every add, has and remove).
   */
  private idKey = '';
  private idField = '';
  private id = '\n';
  /** What a batch's renewal call asks of this watchdog (see renewBatch). */
  private readonly renewing: RenewingWatchdog;

  constructor(
    redis: ScriptedRedis,
    private readonly leaseMs: number,
    /** Batches must not mix hash slots on Cluster; this says which batch a key belongs to. */
    private readonly batchOf: (key: string) => string | number,
    /** `holds`: how many holds of the owner went (the owner's count; at least 1). */
    private readonly onLost: (target: RenewalTarget, error: LockLostError, holds: number) => void,
    private readonly onFailed: (error: unknown) => void,
  ) {
    this.deadline = new RenewalDeadline(this.entries, leaseMs, (entry, reason) => this.lose(entry, reason));
    this.renewing = {
      redis,
      leaseMs,
      keeps: (entry) => this.entries.get(this.entryId(entry.key, entry.field)) === entry,
      closed: () => this.closed,
      lose: (entry, reason) => this.lose(entry, reason),
      renewed: (earliest) => this.deadline.pushedBack(earliest),
    };
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Starts renewing a lock whose acquire call was sent at `sentAt` (performance.now()); a second
   * call for the same lock and owner changes nothing, but for a hold whose renewal covers more
   * keys (a fenced re-entry into a plain handle's hold: its token key from then on). `expiresAt`, when given, is when Redis may
   * expire the hold at the earliest if that is sooner than a full lease (a fair-lock grant lives
   * at most the queue timeout until its owner extends it): it is renewed halfway there.
   */
  add(target: RenewalTarget, sentAt: number, expiresAt = sentAt + this.leaseMs): void {
    const id = this.entryId(target.key, target.field);
    const existing = this.entries.get(id);
    if (existing) {
      if (target.renewCommand !== undefined && existing.renewCommand === undefined) {
        existing.renewCommand = target.renewCommand;
        existing.renewKeys = target.renewKeys;
      }
      return;
    }
    if (this.closed) return;
    const lease = Math.min(expiresAt, sentAt + this.leaseMs) - sentAt;
    const entry = new RenewalEntry(target, lostAt(sentAt, lease));
    // A scope of this owner listens already (it gave its hold back and took it again): it hears of this hold's loss too.
    const watched = target.owner.lossWatches?.get(target.key);
    if (watched && !watched.signal.aborted) entry.lost = watched;
    this.entries.set(id, entry);
    this.startTimer();
    this.deadline.arm(entry.lostAt);
    // A short first lease (shorter than the time to the next tick) is renewed halfway there.
    const now = performance.now();
    if (lease < this.leaseMs) this.armEarly(now + (entry.lostAt - now) / 2);
  }

  /**
   * An extra renewal at `at`. `forNewHolds`: for holds added since the calls now out were
   * batched, so a group whose call is out gets one more renewal once that call is back. Not for
   * that one more renewal itself: it would wait in turn for the calls it finds out (its own
   * previous ones among them), and two groups would keep renewing each other back and forth.
   */
  private armEarly(at: number, forNewHolds = true): void {
    // False whenever no early renewal is armed (its timer and stopTimer() reset it).
    this.earlyForNewHolds ||= forNewHolds;
    if (at >= this.earlyAt) return;
    if (this.earlyTimer !== undefined) clearTimeout(this.earlyTimer);
    this.earlyAt = at;
    this.earlyTimer = setTimeout(() => {
      this.earlyTimer = undefined;
      this.earlyAt = Infinity;
      // Every group whose call is not out goes now; one that is out was batched before the new
      // hold was added: its holds go right after that call is back. Not waiting for every call
      // out (one frozen node's would hold back a grant's early renewal on a healthy one until
      // its short first lease ran out, and re-armed every 5 ms meanwhile).
      if (this.earlyForNewHolds) for (const group of this.inFlight.keys()) this.earlyAfter.add(group);
      this.earlyForNewHolds = false;
      void this.renewAll();
    }, Math.max(0, at - performance.now())).unref();
  }

  has(key: string, field: string): boolean {
    return this.entries.has(this.entryId(key, field));
  }

  /** A signal that aborts when the watchdog finds this lock lost, if the watchdog keeps it. */
  lostSignal(key: string, field: string): AbortSignal | undefined {
    const entry = this.entries.get(this.entryId(key, field));
    if (!entry) return undefined;
    entry.lost ??= lossWatch(entry.owner, key);
    return entry.lost.signal;
  }

  /** Until when the hold renewed as `field` of `key` may be held as of now (see `remove`), if the watchdog keeps it. */
  lostAt(key: string, field: string): number | undefined {
    return this.entries.get(this.entryId(key, field))?.lostAt;
  }

  /**
   * Stops renewing; returns what was renewed, if anything (for `reportLost`), with `lostAt`: until
   * when its owner could still believe it held it (performance.now() ms).
   */
  remove(key: string, field: string): (RenewalTarget & { readonly lostAt: number }) | undefined {
    const id = this.entryId(key, field);
    const entry = this.entries.get(id);
    this.entries.delete(id);
    return entry;
  }

  /**
   * Puts back what `remove` returned when the change it was removed for failed (a permit's new
   * lease that never reached Redis): renewed again at once, its lost signal the same.
   */
  restore(removed: RenewalTarget & { readonly lostAt: number }): void {
    const id = this.entryId(removed.key, removed.field);
    if (this.closed || this.entries.has(id) || !(removed instanceof RenewalEntry)) return;
    this.entries.set(id, removed);
    this.startTimer();
    // Its deadline too: a tick that found no entry while it was away stopped the deadline timer.
    this.deadline.arm(removed.lostAt);
    this.armEarly(performance.now());
  }

  /**
   * Reports a hold the watchdog keeps as lost now (a caller learnt Redis no longer has it), as a
   * failed renewal would: its signal aborts and `lockLost` is emitted. `removed`: what `remove`
   * returned for a hold the caller stopped renewing before it learnt it (a release that found
   * the hold taken away).
   */
  reportLost(key: string, field: string, reason: string, removed?: RenewalTarget): boolean {
    const entry = this.entries.get(this.entryId(key, field)) ?? removed;
    if (entry) this.lose(entry, reason);
    return entry !== undefined;
  }

  /**
   * Stops renewing. Every hold kept until now runs out with its lease, so the scopes listening
   * for its loss (withLock, hold(), withPermit, the composites) are told now, with
   * `ClientClosedError`: their callbacks must not run on as holders. No `lockLost`: nothing was
   * taken from the caller, who closed the client.
   */
  close(): void {
    this.closed = true;
    const kept = [...this.entries.values()];
    this.entries.clear();
    this.stopTimer();
    const error = new ClientClosedError();
    for (const entry of kept) entry.lost?.abort(error);
  }

  /**
   * The tick, every third of the lease. Timers outlive the last entry until their next run: a
   * lock taken and released over and over then costs no timer churn.
   */
  private startTimer(): void {
    this.timer ??= setInterval(() => void this.renewAll(), Math.floor(this.leaseMs / 3)).unref();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.deadline.stop();
    if (this.earlyTimer !== undefined) clearTimeout(this.earlyTimer);
    this.earlyTimer = undefined;
    this.earlyAt = Infinity;
    this.earlyForNewHolds = false;
    this.earlyAfter.clear();
  }

  private lose(entry: RenewalTarget & { lost?: AbortController }, reason: string): void {
    this.remove(entry.key, entry.field);
    const holds = Math.max(1, entry.owner.holds);
    entry.owner.dropHolds();
    const error = new LockLostError(entry.name, reason, entry.describe?.(entry));
    entry.lost?.abort(error);
    this.onLost(entry, error, holds);
  }

  /**
   * One tick. A group of holds (one renew command, one slot) whose call of an earlier tick is
   * still out skips this one: its node is slow enough already. The others go on: one frozen node
   * of a Cluster must not stop the renewals on every other (their holds would run out).
   */
  async renewAll(): Promise<void> {
    if (this.entries.size === 0) {
      this.stopTimer();
      return;
    }
    const groupOf = (entry: RenewalEntry): string => `${entry.renewCommand ?? DEFAULT_RENEW}\n${this.batchOf(entry.key)}`;
    const busy = new Set(this.inFlight.keys()); // as the tick began: a group's batches of this tick all go
    const calls: Promise<void>[] = [];
    for (const batch of batchesOf(this.entries.values(), groupOf, BATCH_SIZE)) {
      const group = groupOf(batch[0]!);
      if (busy.has(group)) continue;
      this.inFlight.set(group, (this.inFlight.get(group) ?? 0) + 1);
      calls.push(
        renewBatch(this.renewing, batch, this.onFailed).finally(() => {
          const left = this.inFlight.get(group)! - 1;
          if (left > 0) this.inFlight.set(group, left);
          else {
            this.inFlight.delete(group);
            if (this.earlyAfter.delete(group)) this.armEarly(performance.now(), false);
          }
        }),
      );
    }
    await Promise.all(calls);
  }

  /** The key of `entries` for `field`'s hold on `key`: `<key>\n<field>`. */
  private entryId(key: string, field: string): string {
    if (key !== this.idKey || field !== this.idField) {
      this.idKey = key;
      this.idField = field;
      this.id = `${key}\n${field}`;
    }
    return this.id;
  }
}
