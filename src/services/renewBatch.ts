import { splitOnMigration } from './batches';
import { DEFAULT_RENEW, lostAt, type RenewalEntry } from './RenewalEntry';
import type { ScriptedRedis } from './scripts';

/** What one batch's renewal call asks of its watchdog: the watchdog's own steps, bound to it once. */
export interface RenewingWatchdog {
  readonly redis: ScriptedRedis;
  readonly leaseMs: number;
  /** Whether `entry` is still the very hold the watchdog keeps for its key and field (not removed, nor re-added, since). */
  keeps(entry: RenewalEntry): boolean;
  closed(): boolean;
  lose(entry: RenewalEntry, reason: string): void;
  /** Holds renewed by one reply, the earliest of them until `earliest` now. */
  renewed(earliest: number): void;
}

/**
 * One renew script call for `batch` (one renew command, one slot), and what its reply says of
 * each hold. `failed` hears a call that failed (the client's `renewalFailed`; once per batch of
 * singles).
 */
export async function renewBatch(watchdog: RenewingWatchdog, batch: RenewalEntry[], failed: (error: unknown) => void): Promise<void> {
  const { redis, leaseMs } = watchdog;
  let renewed: (0 | 1)[];
  const sentAt = performance.now();
  try {
    const renew = (redis as unknown as Record<string, ScriptedRedis['rlock_renew']>)[batch[0]!.renewCommand ?? DEFAULT_RENEW]!;
    const keys = batch.flatMap((entry) => entry.renewKeys ?? [entry.key]);
    renewed = await renew.call(
      redis,
      keys.length,
      ...keys,
      leaseMs,
      ...batch.map((entry) => entry.field),
    );
  } catch (error) {
    // A Cluster slot half migrated refuses a call naming keys on both sides (TRYAGAIN, and
    // ioredis gives up after its retries), tick after tick for as long as the migration lasts,
    // and the locks would run out meanwhile: one call per lock then, which the slot's old or
    // (by ASK) new master serves. Reported once, if any of them fails.
    // Only holds still kept: one given up meanwhile (ioredis retried for ~1.6 s) must not be
    // renewed again.
    const kept = batch.filter((entry) => watchdog.keeps(entry));
    const groups = splitOnMigration(error, kept, (entry) => (entry.renewKeys ?? [entry.key]).join('\n'));
    if (groups) {
      let first: unknown;
      await Promise.all(groups.map((group) => renewBatch(watchdog, group, (single) => (first ??= single))));
      if (first !== undefined) failed(first);
      return;
    }
    // A network error says nothing about the locks: keep them and try again next tick
    // (Redisson #2515, #3194 stopped renewing here and lost locks that were still held).
    // Not after close(): a renewal out when it cut the connection fails, and that is no news.
    if (!watchdog.closed()) failed(error);
    return;
  }
  let earliest = Infinity;
  batch.forEach((entry, i) => {
    // Only an entry still registered as the very same object counts; one removed or
    // re-added while the call was in flight belongs to a newer hold.
    if (!watchdog.keeps(entry)) return;
    if (renewed[i] === 1) {
      entry.lostAt = lostAt(sentAt, leaseMs);
      earliest = Math.min(earliest, entry.lostAt);
    } else {
      watchdog.lose(entry, 'the watchdog found it no longer held by its owner');
    }
  });
  if (earliest < Infinity) watchdog.renewed(earliest);
}
