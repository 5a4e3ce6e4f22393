import type { Cluster, Redis } from 'ioredis';
import { LockLostError } from './errors';
import type { LockOwner } from './LockOwner';

/** One lock kept alive for one owner. */
export interface RenewalTarget {
  name: string;
  key: string;
  /** `<clientId>:<ownerId>` */
  field: string;
  owner: LockOwner;
}

interface RenewalEntry extends RenewalTarget {
  /** Aborted with a `LockLostError` when the watchdog finds the lock gone. */
  readonly lost: AbortController;
}

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
  private renewing = false;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly leaseMs: number,
    /** Batches must not mix hash slots on Cluster; this says which batch a key belongs to. */
    private readonly batchOf: (key: string) => string | number,
    private readonly onLost: (target: RenewalTarget, error: LockLostError) => void,
    private readonly onFailed: (error: unknown) => void,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Starts renewing; a second call for the same lock and owner is a no-op. */
  add(target: RenewalTarget): void {
    const id = entryId(target.key, target.field);
    if (this.entries.has(id)) return;
    this.entries.set(id, { ...target, lost: new AbortController() });
    this.timer ??= setInterval(() => void this.renewAll(), Math.floor(this.leaseMs / 3)).unref();
  }

  has(key: string, field: string): boolean {
    return this.entries.has(entryId(key, field));
  }

  /** A signal that aborts when the watchdog finds this lock lost, if the watchdog keeps it. */
  lostSignal(key: string, field: string): AbortSignal | undefined {
    return this.entries.get(entryId(key, field))?.lost.signal;
  }

  remove(key: string, field: string): void {
    this.entries.delete(entryId(key, field));
    if (this.entries.size === 0) this.stopTimer();
  }

  close(): void {
    this.entries.clear();
    this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One tick. A tick that finds the previous one still running skips: Redis is slow enough already. */
  async renewAll(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      await Promise.all(this.batches().map((batch) => this.renewBatch(batch)));
    } finally {
      this.renewing = false;
    }
  }

  private batches(): RenewalEntry[][] {
    const groups = new Map<string | number, RenewalEntry[]>();
    const batches: RenewalEntry[][] = [];
    for (const entry of this.entries.values()) {
      const group = this.batchOf(entry.key);
      let batch = groups.get(group);
      if (!batch || batch.length >= BATCH_SIZE) {
        batch = [];
        groups.set(group, batch);
        batches.push(batch);
      }
      batch.push(entry);
    }
    return batches;
  }

  private async renewBatch(batch: RenewalEntry[]): Promise<void> {
    let renewed: (0 | 1)[];
    try {
      renewed = await this.redis.rlock_renew(
        batch.length,
        ...batch.map((entry) => entry.key),
        this.leaseMs,
        ...batch.map((entry) => entry.field),
      );
    } catch (error) {
      // A network error says nothing about the locks: keep them and try again next tick
      // (Redisson #2515, #3194 stopped renewing here and lost locks that were still held).
      this.onFailed(error);
      return;
    }
    batch.forEach((entry, i) => {
      // Only an entry still registered as the very same object was lost; one removed or
      // re-added while the call was in flight belongs to a newer hold.
      if (renewed[i] === 1 || this.entries.get(entryId(entry.key, entry.field)) !== entry) return;
      this.remove(entry.key, entry.field);
      entry.owner.holds = 0;
      const error = new LockLostError(entry.name, 'the watchdog found it no longer held by its owner');
      entry.lost.abort(error);
      this.onLost(entry, error);
    });
  }
}

function entryId(key: string, field: string): string {
  return `${key}\n${field}`;
}
