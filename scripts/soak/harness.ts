// The soak run: several OS processes × many tasks on a few hot locks plus a force-unlocked
// "chaos" lock, on a private redis-server that the harness faults while they run. The checker
// (checker.ts), not the library, decides whether the primitive kept its promise.
import { clientQueueKeyOf, RELEASE_LATCH_TTL_MS } from '../../src/names';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type Redis } from 'ioredis';
import { RedisServer } from '../redisServer';
import { now } from './clock';
import { injectFaults } from './faults';
import { judgeRecords, type SoakReport } from './judge';
import { PRIMITIVES } from './primitives';
import { lockWakeChannels } from './primitives/channels';
import { CHAOS_LOCK, type RunClock, type SoakOptions, type WorkerArgs, type WorkerLine } from './records';

export type { SoakReport } from './judge';

const WORKER = join(__dirname, 'worker.ts');

interface WorkerProcess {
  worker: number;
  child: ChildProcess;
  closed: Promise<{ code: number | null; signal: string | null; stderr: string }>;
  killedAt?: number;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const primitive = PRIMITIVES[options.primitive];
  if (!primitive) throw new Error(`unknown primitive "${options.primitive}"; known: ${Object.keys(PRIMITIVES).join(', ')}`);
  const foreign = options.faults.filter((kind) => !primitive.faults.includes(kind));
  if (foreign.length) throw new Error(`${options.primitive} does not take the faults ${foreign.join(', ')} (it takes ${primitive.faults.join(', ')})`);
  const server = await RedisServer.start();
  const dataServer = await RedisServer.start();
  const admin = server.connect();
  admin.on('error', () => undefined);
  const data = dataServer.connect();
  const keyPrefix = `soak:${process.pid}:${Date.now()}:`;
  const locks = [...Array.from({ length: options.hotLocks }, (_, i) => `hot${i}`), CHAOS_LOCK];
  // Set once the first workers are ready (see Readiness).
  let clock: RunClock | undefined;
  const lines: WorkerLine[] = [];
  // Streamed, not built at the end: a long run's lines outgrow the longest string V8 can make.
  const linesOut = options.linesFile ? createWriteStream(options.linesFile) : undefined;
  const workers: WorkerProcess[] = [];
  const ready = new Readiness(options.processes);
  const spawnWorker = (): void => {
    const worker = workers.length;
    const args: WorkerArgs = {
      url: server.url, dataUrl: `redis://127.0.0.1:${dataServer.port}`, keyPrefix, worker, tasks: options.tasksPerProcess, locks,
      primitive: options.primitive, watchdogTimeout: options.watchdogTimeout, leaseTime: options.leaseTime, longHoldEveryMs: options.longHoldEveryMs ?? 0, ...clock,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(args)], { stdio: [clock ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const parsed = JSON.parse(line) as WorkerLine;
      if (parsed.k === 'ready') return void ready.add(parsed.w);
      lines.push(parsed);
      linesOut?.write(`${line}\n`);
    });
    let stderr = '';
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    if (process.env.SOAK_DEBUG) child.stderr!.pipe(process.stderr);
    const closed = new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) =>
      child.on('close', (code, signal) => resolve({ code, signal, stderr })),
    );
    workers.push({ worker, child, closed });
  };
  try {
    for (let i = 0; i < options.processes; i++) spawnWorker();
    await ready.all(workers);
    const start = now();
    const deadline = start + options.durationMs;
    clock = { start, deadline, giveUpAt: deadline + options.leaseTime + 1000 };
    for (const w of workers) {
      w.child.stdin!.on('error', () => undefined); // a worker dead already: its exit is reported below
      w.child.stdin!.end(`${JSON.stringify(clock)}\n`);
    }
    const warmup = Math.min(2000, options.durationMs / 5);
    const records = await injectFaults(server, {
      kinds: options.faults,
      from: start + warmup,
      until: deadline - Math.min(1000, options.durationMs / 10),
      everyMs: options.faultEveryMs,
      pauseMs: options.pauseMs,
      downMs: 200,
      chaosLock: CHAOS_LOCK,
      keyPrefix,
      getLock: primitive.getLock,
      killWorker: async () => {
        const alive = workers.filter((w) => w.killedAt === undefined && w.child.exitCode === null);
        const victim = alive[Math.floor(Math.random() * alive.length)];
        if (!victim) return undefined;
        victim.child.kill('SIGKILL');
        victim.killedAt = now();
        await victim.closed;
        spawnWorker();
        return victim.worker;
      },
    });
    // Every worker stops starting rounds at the deadline; waits behind a killed worker's hold
    // last at most its lease.
    const limit = options.durationMs + options.leaseTime + 60_000;
    const exits = await Promise.all(
      workers.map(async (w) => {
        const timer = setTimeout(() => w.child.kill('SIGKILL'), Math.max(0, start + limit - now()));
        const exit = await w.closed;
        clearTimeout(timer);
        return { ...w, ...exit };
      }),
    );
    const violations: string[] = [];
    for (const e of exits) {
      if (e.killedAt === undefined && e.code !== 0) violations.push(`worker ${e.worker} exited with ${e.code ?? e.signal}: ${e.stderr.slice(0, 2000)}`);
    }
    if (linesOut) {
      for (const f of records.faults) linesOut.write(`${JSON.stringify({ k: 'fault', ...f })}\n`);
      for (const f of records.forces) linesOut.write(`${JSON.stringify({ k: 'force', ...f })}\n`);
      await new Promise((resolve) => linesOut.end(resolve));
    }
    const killedAt = new Map(exits.filter((e) => e.killedAt !== undefined).map((e) => [e.worker, e.killedAt!]));
    const judged = judgeRecords({ options, lines, records, killedAt, locks, start, deadline, invariant: primitive.invariant, workerCount: workers.length });
    judged.report.violations.unshift(...violations);
    await checkRedis(options, judged, { locks, keyPrefix, admin, data });
    if (primitive.checkRedis) judged.report.violations.push(...(await primitive.checkRedis(admin, keyPrefix, locks, options)));
    return judged.report;
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    admin.disconnect();
    data.disconnect();
    await Promise.all([server.stop(), dataServer.stop()]);
  }
}

/** How long the first workers may take to set up (a loaded machine took seconds). */
const READY_TIMEOUT_MS = 60_000;

/**
 * The first workers' readiness: the run's clock starts once every one of them has set up (tsx
 * compiles the library in each; on a busy machine that took seconds and ate short runs).
 */
class Readiness {
  private readonly seen = new Set<number>();
  private resolve!: () => void;
  private readonly done = new Promise<void>((resolve) => (this.resolve = resolve));

  constructor(private readonly count: number) {
    if (count === 0) this.resolve();
  }

  add(worker: number): void {
    this.seen.add(worker);
    if (this.seen.size === this.count) this.resolve();
  }

  /** Resolves once all are ready; rejects when one of them exits first, or after `timeoutMs`. */
  async all(workers: WorkerProcess[], timeoutMs = READY_TIMEOUT_MS): Promise<void> {
    const exited = workers.map(async (w) => {
      const { code, signal, stderr } = await w.closed;
      if (this.seen.size === this.count) return;
      throw new Error(`worker ${w.worker} exited with ${code ?? signal} before the run started: ${stderr.slice(0, 2000)}`);
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.count - this.seen.size} of ${this.count} workers not ready after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.done, late, ...exited]);
    } finally {
      clearTimeout(timer);
    }
  }
}

interface RedisChecks {
  locks: string[];
  keyPrefix: string;
  admin: Redis;
  data: Redis;
}

/** The checks that ask Redis: counters against the holds, and nothing left behind. */
async function checkRedis(options: SoakOptions, judged: ReturnType<typeof judgeRecords>, { locks, keyPrefix, admin, data }: RedisChecks): Promise<void> {
  const { report, holds, exclusion } = judged;
  const violations = report.violations;
  const primitive = PRIMITIVES[options.primitive]!;
  // No lost update beyond the excused overlaps: each counter counts the holds that wrote it.
  for (const lock of primitive.invariant.counters ? locks : []) {
    const mine = holds.filter((h) => h.lock === lock);
    const counted = mine.filter((h) => h.counted).length;
    const deadInFlight = mine.filter((h) => h.outcome === 'killed').length;
    const excused = exclusion.overlaps.filter((o) => o.lock === lock && o.cause).length;
    const counter = Number((await data.get(`${keyPrefix}counter:${lock}`)) ?? 0);
    if (counter > counted + deadInFlight || counter < counted - excused) {
      violations.push(`counter of ${lock} is ${counter}: ${counted} holds wrote it, ${deadInFlight} died in flight, ${excused} overlaps excused`);
    }
  }

  // Nothing left in Redis once the leases of killed workers' holds ran out.
  const lockKeys = primitive.keysGone === false ? [] : locks.map((lock) => keyPrefix + lock);
  const until = now() + options.leaseTime + options.watchdogTimeout + 2000;
  const exists = async (): Promise<number> => (lockKeys.length ? admin.exists(...lockKeys) : 0);
  let left = await exists();
  while (left && now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = await exists();
  }
  if (left) violations.push(`${left} lock hashes left in Redis`);
  // Full releases leave their latches to expire; a partial one's is deleted once its reply is in
  // (a worker killed in between leaves it to its TTL too). None may outlive its TTL.
  const latches = await scanAll(admin, `${keyPrefix}rlock__unlock_latch:*`);
  const ttls = await Promise.all(latches.map((latch) => admin.pttl(latch)));
  const lasting = ttls.filter((ttl) => ttl === -1 || ttl > RELEASE_LATCH_TTL_MS).length; // -2: expired meanwhile
  if (lasting) violations.push(`${lasting} release latches left in Redis without a TTL of at most ${RELEASE_LATCH_TTL_MS} ms`);
  // The lock's waiters listen on a channel per client under one prefix; the others on the
  // primitive's one channel.
  let subscribed = 0;
  for (const key of locks.map((lock) => keyPrefix + lock)) {
    const pattern = (primitive.channels ?? lockWakeChannels)(keyPrefix, key);
    const channels = (await admin.pubsub('CHANNELS', pattern)) as string[];
    if (channels.length) subscribed += ((await admin.pubsub('NUMSUB', ...channels)) as (string | number)[]).filter((_, i) => i % 2 === 1).reduce<number>((sum, n) => sum + Number(n), 0);
  }
  const queued = await Promise.all(locks.map((lock) => admin.zcard(clientQueueKeyOf(keyPrefix, keyPrefix + lock))));
  // A worker killed while waiting leaves its client's entry until the entry's deadline.
  if (queued.some(Boolean) && !options.faults.includes('worker-kill')) violations.push(`${queued.reduce((a, b) => a + b, 0)} clients left in lock queues`);
  if (subscribed) violations.push(`${subscribed} subscriptions left on lock channels`);
}

async function scanAll(admin: Redis, match: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

