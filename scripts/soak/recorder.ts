// The worker's side of the records: one HoldRecorder per acquiring call, found again inside the
// library through AsyncLocalStorage (the attempt hook on the command connection and the
// library's own "acquired" diagnostics event both run in the caller's async context).
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Redis } from 'ioredis';
import { now } from './clock';
import type { HoldOutcome, WorkerLine } from './records';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

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
  readonly begun = now();

  constructor(
    readonly id: number,
    readonly lock: string,
    readonly via: string,
    readonly waitTime: number | null,
    private readonly recorder: Recorder,
  ) {}

  /** The critical section: GET + SET of the lock's counter, skipped once the owner is told. */
  async section(signal?: AbortSignal): Promise<void> {
    const key = `${this.recorder.keyPrefix}counter:${this.lock}`;
    const value = Number((await this.recorder.data.get(key)) ?? 0);
    await sleep(Math.floor(Math.random() * 3));
    if (this.toldAt !== null || signal?.aborted) return;
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

  constructor(
    readonly worker: number,
    readonly keyPrefix: string,
    /** The counters' connection (another Redis, never faulted). */
    readonly data: Redis,
    private readonly errors: ErrorReading,
  ) {}

  emit(line: WorkerLine): void {
    // Pipes are written synchronously on Linux: a line printed is in the pipe if we are killed.
    process.stdout.write(`${JSON.stringify(line)}\n`);
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

  /** The library granted `field` on `lock` (its acquired event); called in the caller's context. */
  granted(field: string, lock: string): void {
    const rec = this.store.getStore();
    if (!rec || rec.field !== undefined || rec.lock !== lock) return; // reentrant holds are the outer hold's
    rec.granted = now();
    rec.field = field;
    const sent = rec.lastSent ?? rec.begun;
    this.active.set(field, rec);
    this.emit({
      k: 'g', w: this.worker, id: rec.id, lock, field, via: rec.via, begun: rec.begun,
      queuedSent: rec.queuedSent ?? null, queuedReplied: rec.queuedReplied ?? null, sent, granted: rec.granted, waitTime: rec.waitTime,
    });
  }

  /** The library told the owner of `field` that it lost the hold (lockLost event). */
  lost(field: string): void {
    const rec = this.active.get(field);
    if (rec) rec.toldAt ??= now();
  }

  /** Runs one acquiring call and what follows it, and prints its record. */
  async track(lock: string, via: string, waitTime: number | null, body: (rec: HoldRecorder) => Promise<boolean>): Promise<void> {
    const rec = new HoldRecorder(this.next++, lock, via, waitTime, this);
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
    this.emit({ k: 'e', w: this.worker, id: rec.id, end: rec.end ?? settled, released: settled, outcome, toldAt: rec.toldAt, counted: rec.counted });
  }

  private error(lock: string, error: unknown): void {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.emit({ k: 'err', w: this.worker, lock, at: now(), message });
  }
}
