import { batchesOf } from './batches';
import type { ScriptedRedis } from './scripts';

/** One fair-lock waiter's queue entry. */
export interface QueuedEntry {
  lockKey: string;
  queueKey: string;
  expiryKey: string;
  member: string;
  /**
   * The heartbeat sent at `sentAt` found the entry still queued behind a held lock (`true`: no
   * grant can have been made before `sentAt`), or not (`false`: granted, dropped, or the lock ran
   * out unreleased; the waiter asks again).
   */
  refreshed(sentAt: number, queued: boolean): void;
}

/** Entries refreshed by one script call. */
const BATCH_SIZE = 500;

/**
 * Keeps a client's fair-lock queue entries alive: one timer per client, every `queueTimeout / 3`
 * one script call per slot refreshes the deadline of every entry its parked waiters have. A
 * process that stops (SIGSTOP, a long GC pause) or dies stops refreshing, and its entries run
 * out together after at most `queueTimeout`, instead of each costing that in turn.
 */
export class QueueHeartbeat {
  private readonly entries = new Set<QueuedEntry>();
  private timer: NodeJS.Timeout | undefined;
  private beating = false;

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly queueTimeout: number,
    private readonly batchOf: (key: string) => string | number,
  ) {}

  add(entry: QueuedEntry): void {
    this.entries.add(entry);
    this.timer ??= setInterval(() => void this.beat(), Math.floor(this.queueTimeout / 3)).unref();
  }

  remove(entry: QueuedEntry): void {
    this.entries.delete(entry);
    if (this.entries.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  close(): void {
    this.entries.clear();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      await Promise.all(batchesOf(this.entries, (entry) => this.batchOf(entry.lockKey), BATCH_SIZE).map((batch) => this.beatBatch(batch)));
    } finally {
      this.beating = false;
    }
  }

  private async beatBatch(batch: QueuedEntry[]): Promise<void> {
    const sentAt = performance.now();
    let queued: (0 | 1)[];
    try {
      queued = await this.redis.rlock_fairLock_heartbeat(
        batch.length * 3,
        ...batch.flatMap((entry) => [entry.lockKey, entry.queueKey, entry.expiryKey]),
        this.queueTimeout,
        ...batch.map((entry) => entry.member),
      );
    } catch {
      return; // the next beat tries again; an entry runs out only after three missed beats
    }
    batch.forEach((entry, i) => {
      if (this.entries.has(entry)) entry.refreshed(sentAt, queued[i] === 1);
    });
  }
}
