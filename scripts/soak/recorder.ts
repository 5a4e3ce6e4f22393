// The worker's side of the records: one HoldRecorder per acquiring call, found again inside the
// library through AsyncLocalStorage (the attempt hook on the command connection and the
// library's own "acquired" diagnostics event both run in the caller's async context).
import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { now } from './clock';
import { CHAOS_LOCK, type HoldOutcome, type WorkerLine } from './records';

/** Resolves after `ms`, or as soon as `signal` aborts. */
const sleep = (ms: number, signal?: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);

export class HoldRecorder {
  field: string | undefined;
  queuedSent: number | undefined;
  queuedReplied: number | undefined;
  lastSent: number | undefined;
  granted: number | undefined;
  /** The first script sent after the grant: a reentrant acquire, or the release. */
  sentAfterGrant: number | undefined;
  end: number | undefined;
  toldAt: number | null = null;
  counted = false;
  token: string | undefined;
  readonly begun = now();

  constructor(
    readonly id: number,
    readonly lock: string,
    readonly via: string,
    readonly waitTime: number | null,
    private readonly recorder: Recorder,
    /** Appended to the owner field the library reports (a write hold's field ends in ":write"). */
    readonly suffix = '',
  ) {}

  /**
   * The critical section: GET + SET of the lock's counter, the SET skipped once the owner is
   * told, or always for a shared hold (`writes` false: a reader only reads).
   */
  async section(signal?: AbortSignal, writes = true, holdMs = 0): Promise<void> {
    const key = `${this.recorder.keyPrefix}counter:${this.lock}`;
    const value = Number((await this.recorder.data.get(key)) ?? 0);
    // A long hold ends early when the library says the hold was lost (its signal aborts).
    await sleep(holdMs > 0 ? holdMs : Math.floor(Math.random() * 3), signal);
    if (this.toldAt !== null || signal?.aborted || !writes) return;
    await this.recorder.data.set(key, value + 1);
    this.counted = true;
  }

  /** The owner stops using the hold and sends its release. */
  releasing(): void {
    this.end ??= now();
  }
}

/** How the primitive's errors read: which end a hold, which are an ordinary miss. */
export interface ErrorReading {
  /** The hold was gone: NotLockOwnerError → notOwner, LockLostError → lost. */
  holdGone(error: unknown): HoldOutcome | undefined;
  /** The call gave up waiting (timeout, abort): a miss, not an error. */
  miss(error: unknown): string | undefined;
  /** Whether a script call (EVALSHA/EVAL arguments) asks to be queued (fair lock). */
  enqueues?(args: unknown[]): boolean;
}

export class Recorder {
  private readonly store = new AsyncLocalStorage<HoldRecorder>();
  private readonly active = new Map<string, HoldRecorder>();
  private next = 0;
  private nextOp = 0;
  private nextLongHold: number;

  constructor(
    readonly worker: number,
    readonly keyPrefix: string,
    /** The counters' connection (another Redis, never faulted). */
    readonly data: Redis,
    private readonly errors: ErrorReading,
    /** See longHoldMs (0: never). */
    private readonly longHoldEveryMs = 0,
  ) {
    this.nextLongHold = now() + Math.random() * longHoldEveryMs;
  }

  /**
   * How long this worker's section on `lock`, kept by a watchdog of `watchdogTimeout`, should
   * last: 1.5–2.5 watchdog timeouts about once every `longHoldEveryMs`, else 0 (a short one). The other sections last a few ms, far inside
   * one renewal period, so without these a watchdog that renewed nothing (or failed unseen)
   * passed the soak; a long hold it did not keep is taken by another worker while its owner
   * still works: an overlap. Faults then also land inside holds. Not on the chaos lock, whose
   * holds are force-unlocked within ms.
   */
  longHoldMs(lock: string, watchdogTimeout: number): number {
    if (this.longHoldEveryMs === 0 || lock === CHAOS_LOCK || now() < this.nextLongHold) return 0;
    this.nextLongHold = now() + this.longHoldEveryMs * (0.5 + Math.random());
    return Math.round(watchdogTimeout * (1.5 + Math.random()));
  }

  emit(line: WorkerLine): void {
    // Pipes are written synchronously on Linux: a line printed is in the pipe if we are killed.
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }

  /**
   * Records when the subscriber the library makes from `redis` (its `duplicate()`) is down: from
   * its first `close` to its next `ready`. Returns the finish: a window still open is recorded
   * as open-ended.
   */
  hookSubscriber(redis: Redis): () => void {
    let downSince: number | undefined;
    const duplicate = redis.duplicate.bind(redis);
    redis.duplicate = ((...args: Parameters<Redis['duplicate']>) => {
      const subscriber = duplicate(...args);
      subscriber.on('close', () => (downSince ??= now()));
      subscriber.on('ready', () => {
        if (downSince !== undefined) this.emit({ k: 'deaf', w: this.worker, from: downSince, to: now() });
        downSince = undefined;
      });
      return subscriber;
    }) as Redis['duplicate'];
    return () => {
      if (downSince !== undefined) this.emit({ k: 'deaf', w: this.worker, from: downSince, to: null });
      downSince = undefined;
    };
  }

  /**
   * Records the attempts the library sends on `redis` (its command connection) for the call in
   * whose context they are sent: scripts sent before the grant are acquire attempts.
   */
  hookCommands(redis: Redis): void {
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: Parameters<Redis['sendCommand']>[1]) => {
      const rec = this.store.getStore();
      const name = (command as { name?: string }).name;
      if (rec && rec.field !== undefined && rec.sentAfterGrant === undefined && (name === 'evalsha' || name === 'eval')) {
        rec.sentAfterGrant = now();
      }
      if (rec && rec.field === undefined && (name === 'evalsha' || name === 'eval')) {
        rec.lastSent = now();
        if (this.errors.enqueues?.((command as { args: unknown[] }).args)) {
          rec.queuedSent ??= rec.lastSent;
          const replied = (): void => {
            rec.queuedReplied = now();
          };
          (command as { promise?: Promise<unknown> }).promise?.then(replied, replied);
        }
      }
      return send(command, stream);
    }) as Redis['sendCommand'];
  }

  /**
   * The library granted `field` on `lock` (its acquired event; `permits` for a semaphore);
   * called in the caller's context.
   */
  granted(field: string, lock: string, permits?: number): void {
    const rec = this.store.getStore();
    if (!rec || rec.field !== undefined || rec.lock !== lock) return; // reentrant holds are the outer hold's
    rec.granted = now();
    rec.field = field + rec.suffix;
    const sent = rec.lastSent ?? rec.begun;
    this.active.set(rec.field, rec);
    this.emit({
      k: 'g', w: this.worker, id: rec.id, lock, field: rec.field, via: rec.via, begun: rec.begun,
      queuedSent: rec.queuedSent ?? null, queuedReplied: rec.queuedReplied ?? null, sent, granted: rec.granted, waitTime: rec.waitTime,
      ...(permits === undefined ? {} : { permits }),
    });
  }

  /** The fencing token the current call's hold got (the first one: a reentrant hold keeps it). */
  noteToken(token: bigint): void {
    const rec = this.store.getStore();
    if (rec) rec.token ??= token.toString();
  }

  /** Runs `call` (a latch's trySetCount or countDown) and prints it before it is sent and when it answered. */
  async op<T>(lock: string, op: string, call: () => Promise<T>, ok: (answer: T) => boolean = () => true): Promise<void> {
    const id = this.nextOp++;
    this.emit({ k: 'op', w: this.worker, id, lock, op, sent: now() });
    try {
      const answer = await call();
      this.emit({ k: 'opr', w: this.worker, id, replied: now(), ok: ok(answer) });
    } catch (error) {
      // Its outcome in Redis is unknown: no reply line, so the checker counts it as maybe run.
      if (this.errors.miss(error) === undefined) this.error(lock, error);
    }
  }

  /** The library told the owner of `field` that it lost the hold (lockLost event). */
  lost(field: string): void {
    const rec = this.active.get(field);
    if (rec) rec.toldAt ??= now();
  }

  /** Runs one acquiring call and what follows it, and prints its record. */
  async track(lock: string, via: string, waitTime: number | null, body: (rec: HoldRecorder) => Promise<boolean>, suffix?: string): Promise<void> {
    const rec = new HoldRecorder(this.next++, lock, via, waitTime, this, suffix);
    let failure: unknown;
    let got = false;
    try {
      got = await this.store.run(rec, () => body(rec));
    } catch (error) {
      failure = error;
    }
    const settled = now();
    if (rec.field === undefined) {
      const reason = got ? 'no grant event' : failure === undefined ? 'timeout' : this.errors.miss(failure);
      if (reason !== undefined) this.emit({ k: 'x', w: this.worker, lock, begun: rec.begun, ended: settled, waitTime, reason });
      if (got || (failure !== undefined && reason === undefined)) this.error(lock, got ? new Error('granted without an acquired event') : failure);
      return;
    }
    this.active.delete(rec.field);
    let outcome: HoldOutcome = 'released';
    if (failure !== undefined) {
      const gone = this.errors.holdGone(failure);
      if (gone) {
        outcome = gone;
        rec.toldAt ??= settled;
      } else if (this.errors.miss(failure) === undefined) {
        // A release whose outcome is unknown, or a failure inside the section.
        outcome = 'error';
        this.error(lock, failure);
      } else {
        // Aborted right after the grant: the library gave the hold back at once, unseen by the caller.
        outcome = 'aborted';
        rec.end ??= rec.sentAfterGrant;
      }
    } else if (rec.toldAt !== null) {
      outcome = 'lost';
    }
    this.emit({
      k: 'e', w: this.worker, id: rec.id, end: rec.end ?? settled, released: settled, outcome, toldAt: rec.toldAt, counted: rec.counted,
      ...(rec.token === undefined ? {} : { token: rec.token }),
    });
  }

  private error(lock: string, error: unknown): void {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.emit({ k: 'err', w: this.worker, lock, at: now(), message });
  }
}
