// The soak run: several OS processes × many tasks on a few hot locks plus a force-unlocked
// "chaos" lock, on a private redis-server that the harness faults while they run. The checker
// (checker.ts), not the library, decides whether the primitive kept its promise.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type Redis } from 'ioredis';
import { RedisServer } from '../redisServer';
import { checkExclusion, checkFifo, type Cause } from './checker';
import { now } from './clock';
import { injectFaults } from './faults';
import { duringFault, toldAfterFault, waitsAfterFaults, waitsOf, type Spread } from './figures';
import { PRIMITIVES } from './primitives';
import type { DoneLine, EndLine, ErrorLine, FaultKind, GrantLine, Hold, MissLine, WorkerConfig, WorkerLine } from './records';

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
}

export interface SoakReport {
  options: SoakOptions;
  holds: number;
  holdsPerLock: Record<string, number>;
  misses: Record<string, number>;
  /** Force-unlocks sent, and those that removed a holder. */
  forces: { sent: number; removed: number };
  faults: Record<string, number>;
  overlaps: { total: number; excused: Record<Cause, number>; untold: number; unexplained: number };
  /** Overlaps explained by a force whose owner the library never told (checker.ts, `untold`). */
  untold: string[];
  /** ms from a fault to the owner of a hold it removed being told, per fault kind. */
  toldAfter: Record<string, Spread>;
  /** Holds whose owner was told of a loss that no fault explains (a starved process: lease ran out). */
  toldWithoutFault: { count: number; examples: string[] };
  /** Holds a force named as removed whose owner was never told (its release reported success). */
  forcedButNotTold: number;
  /** ms the waits under way at a fault still waited, per fault kind, and at quiet instants. */
  waitsAfter: Record<string, Spread>;
  maxWaitOvershootMs: { quiet: number; nearFaults: number };
  /** Worker errors while a fault was on (or within a second after it), by message. */
  errorsNearFaults: Record<string, number>;
  injectionFailures: string[];
  violations: string[];
}

const WORKER = join(__dirname, 'worker.ts');
export const CHAOS_LOCK = 'chaos';

interface WorkerProcess {
  worker: number;
  child: ChildProcess;
  closed: Promise<{ code: number | null; signal: string | null; stderr: string }>;
  killedAt?: number;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const primitive = PRIMITIVES[options.primitive];
  if (!primitive) throw new Error(`unknown primitive "${options.primitive}"; known: ${Object.keys(PRIMITIVES).join(', ')}`);
  const server = await RedisServer.start();
  const dataServer = await RedisServer.start();
  const admin = server.connect();
  admin.on('error', () => undefined);
  const data = dataServer.connect();
  const keyPrefix = `soak:${process.pid}:${Date.now()}:`;
  const locks = [...Array.from({ length: options.hotLocks }, (_, i) => `hot${i}`), CHAOS_LOCK];
  const start = now();
  const deadline = start + options.durationMs;
  const lines: WorkerLine[] = [];
  // Streamed, not built at the end: a long run's lines outgrow the longest string V8 can make.
  const linesOut = options.linesFile ? createWriteStream(options.linesFile) : undefined;
  const workers: WorkerProcess[] = [];
  const spawnWorker = (): void => {
    const worker = workers.length;
    const config: WorkerConfig = {
      url: server.url, dataUrl: `redis://127.0.0.1:${dataServer.port}`, keyPrefix, worker, tasks: options.tasksPerProcess, locks,
      primitive: options.primitive, watchdogTimeout: options.watchdogTimeout, leaseTime: options.leaseTime, deadline,
      giveUpAt: deadline + options.leaseTime + 1000,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(JSON.parse(line) as WorkerLine);
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
    return await judge({ options, lines, records, killedAt, violations, locks, keyPrefix, admin, data, start, deadline, invariant: primitive.invariant, workerCount: workers.length });
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    admin.disconnect();
    data.disconnect();
    await Promise.all([server.stop(), dataServer.stop()]);
  }
}

interface JudgeInput {
  options: SoakOptions;
  lines: WorkerLine[];
  records: Awaited<ReturnType<typeof injectFaults>>;
  killedAt: Map<number, number>;
  violations: string[];
  locks: string[];
  keyPrefix: string;
  admin: Redis;
  data: Redis;
  start: number;
  deadline: number;
  invariant: (typeof PRIMITIVES)[string]['invariant'];
  /** Workers started, replacements of killed ones included. */
  workerCount: number;
}

async function judge(input: JudgeInput): Promise<SoakReport> {
  const { options, lines, records, killedAt, violations, locks, keyPrefix, admin, data } = input;
  const { forces, faults } = records;
  // Worker kills are faults too; their `at` is the kill.
  const grants = new Map<string, GrantLine>();
  const ends = new Map<string, EndLine>();
  const misses: MissLine[] = [];
  const errors: ErrorLine[] = [];
  const done: DoneLine[] = [];
  for (const line of lines) {
    if (line.k === 'g') grants.set(`${line.w}.${line.id}`, line);
    else if (line.k === 'e') ends.set(`${line.w}.${line.id}`, line);
    else if (line.k === 'x') misses.push(line);
    else if (line.k === 'err') errors.push(line);
    else done.push(line);
  }
  const holds: Hold[] = [];
  for (const [key, g] of grants) {
    const grant = { w: g.w, id: g.id, lock: g.lock, field: g.field, via: g.via, begun: g.begun, queuedSent: g.queuedSent, queuedReplied: g.queuedReplied, sent: g.sent, granted: g.granted, waitTime: g.waitTime };
    const e = ends.get(key);
    if (e) {
      holds.push({ ...grant, end: e.end, released: e.released, outcome: e.outcome, toldAt: e.toldAt, counted: e.counted });
    } else if (killedAt.has(g.w)) {
      // In flight when its worker was killed -9: held until the kill, then by nobody alive.
      const at = killedAt.get(g.w)!;
      holds.push({ ...grant, end: at, released: at, outcome: 'killed', toldAt: null, counted: false });
    } else {
      violations.push(`hold ${key} on ${g.lock} never ended`);
    }
  }

  // Exclusion, attributed exactly; FIFO order for fair primitives.
  const exclusion = checkExclusion(holds, forces, faults, input.invariant);
  violations.push(...exclusion.violations);
  if (input.invariant.fifo) violations.push(...checkFifo(holds, forces, faults));

  // Errors: expected only while a fault is on (or just after it).
  const errorsNearFaults: Record<string, number> = {};
  for (const e of errors) {
    if (duringFault(faults, e.at, e.at, 1000)) {
      const key = e.message.replace(/[0-9a-zA-Z_-]{21}/g, '<id>').slice(0, 160);
      errorsNearFaults[key] = (errorsNearFaults[key] ?? 0) + 1;
    } else violations.push(`worker ${e.w} on ${e.lock} at ${e.at.toFixed(3)}: ${e.message}`);
  }
  for (const d of done) {
    if (Object.values(d.stats).some((n) => n !== 0)) violations.push(`worker ${d.w} ended with internal state left: ${JSON.stringify(d.stats)}`);
  }
  const finished = new Set(done.map((d) => d.w));
  for (let w = 0; w < input.workerCount; w++) if (!killedAt.has(w) && !finished.has(w)) violations.push(`worker ${w} did not finish`);

  // No lost update beyond the excused overlaps: each counter counts the holds that wrote it.
  const holdsPerLock: Record<string, number> = {};
  for (const lock of locks) {
    const mine = holds.filter((h) => h.lock === lock);
    holdsPerLock[lock] = mine.length;
    const counted = mine.filter((h) => h.counted).length;
    const deadInFlight = mine.filter((h) => h.outcome === 'killed').length;
    const excused = exclusion.overlaps.filter((o) => o.lock === lock && o.cause).length;
    const counter = Number((await data.get(`${keyPrefix}counter:${lock}`)) ?? 0);
    if (counter > counted + deadInFlight || counter < counted - excused) {
      violations.push(`counter of ${lock} is ${counter}: ${counted} holds wrote it, ${deadInFlight} died in flight, ${excused} overlaps excused`);
    }
  }

  // Every bounded wait away from faults ended within its bound plus the slack.
  let quiet = 0;
  let nearFaults = 0;
  const bounded = [
    ...holds.filter((h) => h.waitTime !== null).map((h) => ({ lock: h.lock, begun: h.begun, ended: h.granted, waitTime: h.waitTime! })),
    ...misses.filter((m) => m.waitTime !== null).map((m) => ({ lock: m.lock, begun: m.begun, ended: m.ended, waitTime: m.waitTime! })),
  ];
  for (const wait of bounded) {
    const overshoot = wait.ended - wait.begun - wait.waitTime;
    if (duringFault(faults, wait.begun, wait.ended, 1000)) nearFaults = Math.max(nearFaults, overshoot);
    else {
      quiet = Math.max(quiet, overshoot);
      if (overshoot > options.waitSlackMs) violations.push(`a wait of ${wait.waitTime} ms on ${wait.lock} took ${(wait.ended - wait.begun).toFixed(1)} ms`);
    }
  }

  // Nothing left in Redis once the leases of killed workers' holds ran out.
  const lockKeys = locks.map((lock) => keyPrefix + lock);
  const until = now() + options.leaseTime + options.watchdogTimeout + 2000;
  let left = await admin.exists(...lockKeys);
  while (left && now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = await admin.exists(...lockKeys);
  }
  if (left) violations.push(`${left} lock hashes left in Redis`);
  const latches = await scanAll(admin, `rlock__unlock_latch:{${keyPrefix}*`);
  // A worker killed between a partial release and the latch's DEL leaves one behind for its TTL.
  if (latches.length && !options.faults.includes('worker-kill')) violations.push(`${latches.length} release latches left in Redis`);
  const numsub = (await admin.pubsub('NUMSUB', ...lockKeys.map((key) => `rlock__channel:{${key}}`))) as (string | number)[];
  const subscribed = numsub.filter((_, i) => i % 2 === 1).reduce<number>((sum, n) => sum + Number(n), 0);
  if (subscribed) violations.push(`${subscribed} subscriptions left on lock channels`);

  const told = toldAfterFault(holds, forces, faults);
  const forcedFields = new Set(forces.flatMap((f) => f.holders));
  const faultCounts: Record<string, number> = {};
  for (const f of faults) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
  const missCounts: Record<string, number> = {};
  for (const m of misses) missCounts[m.reason] = (missCounts[m.reason] ?? 0) + 1;
  return {
    options,
    holds: holds.length,
    holdsPerLock,
    misses: missCounts,
    forces: { sent: forces.length, removed: forces.filter((f) => f.holders.length > 0).length },
    faults: faultCounts,
    overlaps: { total: exclusion.overlaps.length, excused: exclusion.excused, untold: exclusion.untold.length, unexplained: exclusion.violations.length },
    untold: exclusion.untold.slice(0, 20),
    toldAfter: told.byKind,
    toldWithoutFault: {
      count: told.none.length,
      examples: told.none.slice(0, 5).map((h) => `${h.w}.${h.id} on ${h.lock} (${h.via}) granted ${h.granted.toFixed(3)} ${h.outcome} told ${h.toldAt!.toFixed(3)}`),
    },
    forcedButNotTold: holds.filter((h) => forcedFields.has(h.field) && h.toldAt === null && h.outcome !== 'killed').length,
    waitsAfter: waitsAfterFaults(waitsOf(holds, misses), forces, faults, input.start + 1000, input.deadline),
    maxWaitOvershootMs: { quiet: Math.round(quiet * 10) / 10, nearFaults: Math.round(nearFaults * 10) / 10 },
    errorsNearFaults,
    injectionFailures: records.failures.slice(0, 20),
    violations,
  };
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

