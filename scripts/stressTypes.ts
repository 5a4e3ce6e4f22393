/** What scripts/stress.ts tells each worker (as one JSON argument). */
export interface WorkerConfig {
  url: string;
  keyPrefix: string;
  worker: number;
  tasks: number;
  locks: string[];
  /** Force-unlocked now and then, so overlaps there are expected around a force event. */
  chaosLock: string;
  chaos: boolean;
  watchdogTimeout: number;
  /** Date.now() at which tasks stop starting rounds. */
  deadline: number;
}

/** One line of a worker's stdout. Times are ms of the machine's monotonic clock (one clock for all workers). */
export type StressEvent =
  /** `begun`: when the acquiring call was made; `start`..`end`: when the holder knew it held the lock. */
  | { kind: 'held'; lock: string; owner: string; begun: number; start: number; end: number; via: string }
  | { kind: 'wait'; lock: string; waitTime: number; elapsed: number; got: boolean }
  | { kind: 'force'; lock: string; sent: number; done: number; removed: boolean }
  | { kind: 'error'; lock: string; message: string }
  /** The library told an owner it lost a lock (watchdog or local lease deadline). */
  | { kind: 'lost'; lock: string; worker: number; at: number; reason: string }
  | { kind: 'done'; worker: number; stats: { renewals: number; waitingChannels: number; waiters: number } };
