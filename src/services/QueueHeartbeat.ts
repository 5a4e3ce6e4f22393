import { batchesOf, splitOnMigration } from './batches';
import { type Link, LinkedList } from './LinkedList';
import type { ScriptedRedis } from './scripts';

/** One fair-lock waiter's queue entry. */
export interface QueuedEntry {
  lockKey: string;
  queueKey: string;
  expiryKey: string;
  member: string;
  /**
   * The heartbeat script of this kind of entry, default `rlock_fairLock_heartbeat`. Every
   * heartbeat script takes KEYS = (lockKey, queueKey, expiryKey) per entry, ARGV[1] = the queue
   * timeout, ARGV[i+1] = entry i's member, and answers per entry 0, 1 or (the fair lock's) the
   * lock's PTTL when over 1 (see `refreshed`); entries of one kind and slot share a call.
   */
  heartbeatCommand?: string;
  /**
   * The heartbeat sent at `sentAt` found the entry still queued behind a held lock (`true`: no
   * grant can have been made before `sentAt`), or not (`false`: granted, dropped, or the lock ran
   * out unreleased; the waiter asks again). `heldForMs`, when the script says it: the lock's
   * PTTL then, so it runs out by `sentAt + heldForMs` unless renewed.
   */
  refreshed(sentAt: number, queued: boolean, heldForMs?: number): void;
}

const DEFAULT_HEARTBEAT = 'rlock_fairLock_heartbeat';

/** Entries refreshed by one script call. */
const BATCH_SIZE = 500;

/**
 * Keeps a client's fair-lock queue entries alive: one timer per client, every `queueTimeout / 3`
 * one script call per slot refreshes the deadline of every entry its parked waiters have. A
 * process that stops (SIGSTOP, a long GC pause) or dies stops refreshing, and its entries run
 * out together after at most `queueTimeout`, instead of each costing that in turn.
 */
export class QueueHeartbeat {
  /** A list, not a Set: see LinkedList. */
  private readonly entries = new LinkedList<QueuedEntry>();
  private timer: NodeJS.Timeout | undefined;
  /** The groups (heartbeat command and slot) whose call of an earlier beat is still out: when it was sent, and how many batches. */
  private readonly inFlight = new Map<string, { sentAt: number; out: number }>();
  /** After close(), nothing starts the timer again (a release's reply that close() waited for). */
  private closed = false;

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly queueTimeout: number,
    private readonly batchOf: (key: string) => string | number,
  ) {}

  /** Keeps `entry` alive from now on; the link takes it out again (`remove`). */
  add(entry: QueuedEntry): Link<QueuedEntry> | undefined {
    if (this.closed) return undefined;
    const link = this.entries.push(entry);
    this.timer ??= setInterval(() => this.beat(), Math.floor(this.queueTimeout / 3)).unref();
    return link;
  }

  remove(link: Link<QueuedEntry> | undefined): void {
    if (link) this.entries.remove(link);
    if (this.entries.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  close(): void {
    this.closed = true;
    this.entries.drain();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private beat(): void {
    // One call at a time per group (heartbeat command and slot), each group on its own: a call
    // that a frozen master leaves unanswered holds back its own group only. Waiting for every
    // group, the other masters' entries were refreshed once a queueTimeout, their lifetime, and
    // a release in between passed their live waiters over. A call still out after a whole
    // queueTimeout (a command stuck in a Cluster reshaping itself) is given up on: sent again.
    const now = performance.now();
    const groupOf = (link: Link<QueuedEntry>): string => `${link.value!.heartbeatCommand ?? DEFAULT_HEARTBEAT}\n${this.batchOf(link.value!.lockKey)}`;
    const started = new Map<string, { sentAt: number; out: number }>();
    for (const batch of batchesOf(this.entries.links(), groupOf, BATCH_SIZE)) {
      const group = groupOf(batch[0]!);
      let call = started.get(group);
      if (!call) {
        const out = this.inFlight.get(group);
        if (out && now - out.sentAt < this.queueTimeout) continue;
        call = { sentAt: now, out: 0 };
        started.set(group, call);
        this.inFlight.set(group, call);
      }
      call.out++;
      const sent = call;
      this.beatBatch(batch)
        .finally(() => {
          if (--sent.out === 0 && this.inFlight.get(group) === sent) this.inFlight.delete(group);
        })
        .catch(() => undefined); // a failed beat is tried again at the next one
    }
  }

  private async beatBatch(links: Link<QueuedEntry>[]): Promise<void> {
    // Taken now: a link removed while the call is out is cleared.
    const batch = links.map((link) => link.value!);
    const sentAt = performance.now();
    let queued: number[];
    try {
      const heartbeat = (this.redis as unknown as Record<string, ScriptedRedis['rlock_fairLock_heartbeat']>)[batch[0]!.heartbeatCommand ?? DEFAULT_HEARTBEAT]!;
      queued = await heartbeat.call(
        this.redis,
        batch.length * 3,
        ...batch.flatMap((entry) => [entry.lockKey, entry.queueKey, entry.expiryKey]),
        this.queueTimeout,
        ...batch.map((entry) => entry.member),
      );
    } catch (error) {
      // A slot half migrated refuses a call naming the keys of locks on both sides, beat after
      // beat, and the entries would run out: one call per lock then (ExpirationRenewal does the same).
      const groups = splitOnMigration(error, links.filter((link) => link.linked), (link) => link.value!.lockKey);
      if (groups) await Promise.all(groups.map((group) => this.beatBatch(group)));
      return; // the next beat tries again; an entry runs out only after three missed beats
    }
    batch.forEach((entry, i) => {
      const answer = queued[i]!;
      if (links[i]!.linked) entry.refreshed(sentAt, answer >= 1, answer > 1 ? answer : undefined);
    });
  }
}
