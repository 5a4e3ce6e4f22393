// What the soak harness records: the lines a worker prints, the faults the harness injects, and
// the merged holds the checker judges. Times are ms of the machine's monotonic clock (clock.ts),
// one clock for every process.

/** How a hold ended, as its owner saw it. */
export type HoldOutcome =
  /** The release reported success. */
  | 'released'
  /** The release answered "not the owner" (NotLockOwnerError): something removed the hold. */
  | 'notOwner'
  /** The library told the owner it lost the hold (lockLost event / LockLostError / signal). */
  | 'lost'
  /** The release call failed (the outcome in Redis is unknown; the lease ends it). */
  | 'error'
  /** The worker process was killed -9 while holding (filled in by the harness). */
  | 'killed'
  /**
   * The call was aborted (its signal) as the grant came in: the library gave the hold back at
   * once and the caller never saw it, so no owner believed it held the lock.
   */
  | 'aborted';

/** A worker line: an acquisition that was granted. */
export interface GrantLine {
  k: 'g';
  /** Worker number and acquisition number inside it: `${w}.${id}` is unique in a run. */
  w: number;
  id: number;
  lock: string;
  /** The owner field in Redis (`<clientId>:<ownerId>` for RLock). */
  field: string;
  /** Which code path took it (withLock, tryLock, ...). */
  via: string;
  /** When the acquiring call was made. */
  begun: number;
  /**
   * Queued primitives (fair lock): the send time of the first attempt that asked to be queued,
   * and the reply time of the last one (a waiter dropped from the queue joins again at the back
   * with a later attempt); null when the call never asked to be queued.
   */
  queuedSent: number | null;
  queuedReplied: number | null;
  /** Send time of the successful attempt: Redis cannot have granted it earlier. */
  sent: number;
  /** When the grant reply was in (the library's acquired event): Redis granted it before. */
  granted: number;
  /** The wait bound of the call (waitTime or abort timeout), or null for "as long as it takes". */
  waitTime: number | null;
  /** Semaphores: how many permits the hold took (absent: 1). */
  permits?: number;
}

/** A worker line: the end of a granted hold. */
export interface EndLine {
  k: 'e';
  w: number;
  id: number;
  /** When the owner stopped using the hold and sent its release. */
  end: number;
  /** When the release call settled. */
  released: number;
  outcome: HoldOutcome;
  /** When the owner was first told it lost the hold (lost event, or the NotLockOwnerError reply). */
  toldAt: number | null;
  /** Whether the critical section wrote the lock's counter (it skips the write once told). */
  counted: boolean;
  /** Fenced lock: the hold's fencing token (a decimal bigint). */
  token?: string;
}

/** A worker line: an acquisition that was not granted. */
export interface MissLine {
  k: 'x';
  w: number;
  lock: string;
  begun: number;
  ended: number;
  waitTime: number | null;
  /** timeout, abort, or the error name */
  reason: string;
}

/** A worker line: an error that is not an expected outcome. */
export interface ErrorLine {
  k: 'err';
  w: number;
  lock: string;
  at: number;
  message: string;
}

/**
 * A worker line: a call that changes a primitive without holding it (a latch's trySetCount or
 * countDown), printed before it is sent, so that a worker killed meanwhile leaves it on record.
 */
export interface OpLine {
  k: 'op';
  w: number;
  /** Unique in its worker; its reply line (OpReplyLine) names it. */
  id: number;
  lock: string;
  op: string;
  sent: number;
}

/** A worker line: the reply to an OpLine; `ok` is what it answered (trySetCount: whether it set). */
export interface OpReplyLine {
  k: 'opr';
  w: number;
  id: number;
  replied: number;
  ok: boolean;
}

/** An op as the checker sees it: `replied` null when its reply never came (error, worker killed). */
export interface Op extends Omit<OpLine, 'k'> {
  replied: number | null;
  ok: boolean;
}

/**
 * A worker line: its client's subscriber connection was down from `from` to `to` (closed, then
 * ready again; `to` null: still down when the worker finished). Its waiters could not hear a
 * grant meanwhile, so a release passed them over (fair lock).
 */
export interface DeafLine {
  k: 'deaf';
  w: number;
  from: number;
  to: number | null;
}

/** A worker line: the worker is set up and waits for the run's clock (the first workers only). */
export interface ReadyLine {
  k: 'ready';
  w: number;
}

/** A worker line: the worker finished; its client's internal state must be empty. */
export interface DoneLine {
  k: 'done';
  w: number;
  stats: Record<string, number>;
}

/**
 * A worker line: a fenced hold's `fencedSet` of its lock's data key with its token, sent and
 * answered (`ok`: written; false: refused as older than a write accepted before).
 */
export interface FencedWriteLine {
  k: 'fw';
  w: number;
  lock: string;
  token: string;
  sent: number;
  replied: number;
  ok: boolean;
}

export type WorkerLine = GrantLine | EndLine | MissLine | ErrorLine | OpLine | OpReplyLine | DeafLine | ReadyLine | DoneLine | FencedWriteLine;

/** A hold as the checker sees it: the grant and end lines merged. */
export interface Hold extends Omit<GrantLine, 'k'>, Omit<EndLine, 'k' | 'w' | 'id'> {}

/** A force-unlock the harness sent: `holders` are the owner fields it removed. */
export interface Force {
  lock: string;
  sent: number;
  done: number;
  holders: string[];
}

export const FAULT_KINDS = ['force', 'conn-kill', 'sub-kill', 'restart', 'restart-persist', 'pause', 'worker-kill'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * One injected fault other than force-unlocks (those are `Force` records): `at` when it began
 * (kill sent, SIGSTOP sent, ...), `end` when Redis or the worker pool was whole again.
 */
export interface Fault {
  kind: Exclude<FaultKind, 'force'>;
  at: number;
  end: number;
  /** restart: whether Redis came back without its data. */
  lostData?: boolean;
  /**
   * restart: when the killed server was seen gone. Between `at` (the kill sent) and this it may
   * still have answered commands: a hold it granted then went with its data.
   */
  killed?: number;
  /** worker-kill: the worker killed. */
  worker?: number;
}

/** The lock the operator force-unlocks all the time (with the `force` fault). */
export const CHAOS_LOCK = 'chaos';

/** What the harness tells each worker process (one JSON argument). */
export interface WorkerConfig {
  url: string;
  /** The Redis for the critical sections' counters: never faulted, so counts survive restarts. */
  dataUrl: string;
  keyPrefix: string;
  worker: number;
  tasks: number;
  locks: string[];
  primitive: string;
  watchdogTimeout: number;
  /** Lease of the holds taken with an explicit leaseTime. */
  leaseTime: number;
  /** How often a worker makes a watchdog-kept section a long one (ms; 0: never): see Recorder.longHoldMs. */
  longHoldEveryMs: number;
  /** Monotonic ms at which tasks stop starting rounds. */
  deadline: number;
  /** Monotonic ms at which waits without a bound give up (so a starved waiter cannot stretch the run). */
  giveUpAt: number;
  /** Monotonic ms at which the run started (a latch's generations count from it). */
  start: number;
}

/** The run's clock: the first workers get it on stdin once all of them are ready. */
export type RunClock = Pick<WorkerConfig, 'start' | 'deadline' | 'giveUpAt'>;

/** What a worker gets on its command line: everything, or everything but the clock. */
export type WorkerArgs = Omit<WorkerConfig, keyof RunClock> & Partial<RunClock>;

/**
 * Whether `fault` is a restart that lost Redis's data between `sent` and `granted`: the server
 * killed may still have answered until it was seen gone (`killed`), so state made by a request
 * sent up to then went with it.
 */
export const restartLostDataBetween = (fault: Fault, sent: number, granted: number): boolean =>
  fault.kind === 'restart' && fault.lostData === true && (fault.killed ?? fault.at) > sent && fault.at < granted;

/** What one soak run does (see harness.ts). */
export interface SoakOptions {
  primitive: string;
  processes: number;
  tasksPerProcess: number;
  hotLocks: number;
  durationMs: number;
  watchdogTimeout: number;
  /** Lease of the holds taken with an explicit leaseTime (tryLock). */
  leaseTime: number;
  /** How far past its bound a wait away from any fault may end before it is a violation, in ms. */
  waitSlackMs: number;
  faults: FaultKind[];
  /** Pause between two faults other than force-unlocks. */
  faultEveryMs: number;
  /** How long Redis stays frozen in the pause fault (past the watchdog lease). */
  pauseMs: number;
  /** Writes every worker line there (JSON lines) for a post-mortem. */
  linesFile?: string;
  /** How often each worker makes a watchdog-kept section last 1.5–2.5 watchdog timeouts (ms; default 0, never: short runs keep their pace). */
  longHoldEveryMs?: number;
}
