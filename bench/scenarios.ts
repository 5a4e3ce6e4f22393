// The six scenarios of `npm run bench`. Each returns plain figures; run.ts compares them.
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LockClient } from './shippedLibrary';
import { type Contestant, raw, rlock } from './contestants';
import { jain, quantile, round, sleep } from './stats';

export interface Sizes {
  sequentialOps: number;
  parallelOps: number;
  handoffs: number;
  /** Handoffs for redlock, whose 200 ms retry makes each one slow. */
  slowHandoffs: number;
  contendedMs: number;
  manyLocksMs: number;
}

let keySeq = 0;
const freshKey = (prefix: string): string => `bench:${prefix}:${process.pid}:${++keySeq}`;

/** 1. lock + unlock on fresh keys, one after another. */
export async function sequential(contestant: Contestant, url: string, ops: number): Promise<{ opsPerSec: number }> {
  const session = await contestant.open(url);
  try {
    // Warm-up long enough for the JIT to have optimized each library's path before the window.
    for (let i = 0; i < 2000; i++) await (await session.acquire(freshKey('warm')))();
    const start = performance.now();
    for (let i = 0; i < ops; i++) await (await session.acquire(freshKey('s1')))();
    return { opsPerSec: round(ops / ((performance.now() - start) / 1000), 0) };
  } finally {
    await session.close();
  }
}

/** 2. 256 concurrent tasks, each on its own keys. */
export async function parallel(contestant: Contestant, url: string, ops: number): Promise<{ opsPerSec: number }> {
  const session = await contestant.open(url);
  try {
    for (let i = 0; i < 200; i++) await (await session.acquire(freshKey('warm')))();
    let left = ops;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: 256 }, async () => {
        while (left-- > 0) await (await session.acquire(freshKey('s2')))();
      }),
    );
    return { opsPerSec: round(ops / ((performance.now() - start) / 1000), 0) };
  } finally {
    await session.close();
  }
}

/** 3. B waits, A releases: ms from A's unlock() call to B holding. */
export async function handoff(contestant: Contestant, url: string, rounds: number): Promise<{ p50: number; p99: number; samples: number[] }> {
  const a = await contestant.open(url);
  const b = await contestant.open(url);
  const samples: number[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const key = freshKey('s3');
      const releaseA = await a.acquire(key);
      let heldAt = 0;
      const waiting = b.acquire(key).then((release) => {
        heldAt = performance.now();
        return release;
      });
      // B is parked (subscribed, or between polls). The pause is drawn over two of redis-semaphore's
      // 10 ms retry intervals so that no poller is phase-locked with the release (a fixed 30 ms,
      // a multiple of 10, let its polls line up with it and showed 1.5 ms instead of ~5 ms).
      await sleep(30 + Math.random() * 20);
      const unlockAt = performance.now();
      await releaseA();
      const releaseB = await waiting;
      samples.push(heldAt - unlockAt);
      await releaseB();
    }
  } finally {
    await a.close();
    await b.close();
  }
  return { p50: round(quantile(samples, 0.5)), p99: round(quantile(samples, 0.99)), samples };
}

/**
 * 3's floor: PUBLISH on one connection until the message arrives on another, plus one round
 * trip. Each sample starts after the same 30–50 ms pause as a handoff does: on this machine a round
 * trip after an idle pause costs ~0.5 ms against ~0.14 ms back to back (CPU wake-up), so a floor
 * measured back to back would not be one.
 */
export async function pubsubFloor(url: string, rounds: number): Promise<{ p50: number; p99: number }> {
  const publisher = new Redis(url);
  const subscriber = new Redis(url);
  const samples: number[] = [];
  try {
    await subscriber.subscribe('bench:floor');
    const rtts: number[] = [];
    for (let i = 0; i < 50; i++) {
      await sleep(30);
      const t = performance.now();
      await publisher.ping();
      rtts.push(performance.now() - t);
    }
    const rtt = quantile(rtts, 0.5);
    for (let i = 0; i < rounds; i++) {
      await sleep(30 + Math.random() * 20);
      const arrived = new Promise<number>((resolve) => subscriber.once('message', () => resolve(performance.now())));
      const sent = performance.now();
      await publisher.publish('bench:floor', '0');
      samples.push((await arrived) - sent + rtt);
    }
  } finally {
    publisher.disconnect();
    subscriber.disconnect();
  }
  return { p50: round(quantile(samples, 0.5)), p99: round(quantile(samples, 0.99)) };
}

export interface Contended {
  acquisitionsPerSec: number;
  lostUpdates: number;
  fairness: number;
  waitP99: number;
  waitMax: number;
  /** From INFO stats: counts the commands scripts run inside Redis too. */
  commandsPerAcquisition: number;
  /** Requests clients sent (MONITOR, script-internal calls left out), from a separate short pass. */
  requestsPerAcquisition: number;
}

/** 4. 4 processes × 8 tasks on one hot lock; critical section GET + SET of a counter. */
export async function contended(contestant: Contestant, url: string, ms: number): Promise<Contended> {
  const admin = new Redis(url);
  const key = freshKey('s4');
  try {
    const requestsPerAcquisition = await requestsPerAcquisitionPass(contestant, url, admin, Math.min(ms, 2000));
    const commandsBefore = await totalCommands(admin);
    // Every worker starts at the same instant, 2 s from now (for the processes to start): a
    // worker that ran before the others would count acquisitions outside the measured window.
    const startAt = Date.now() + 2000;
    const deadline = startAt + ms;
    const workers = await Promise.all(
      Array.from({ length: 4 }, () => runWorker([contestant.name, url, key, String(deadline), '8', '0', String(startAt)])),
    );
    const elapsed = ms / 1000;
    const commands = (await totalCommands(admin)) - commandsBefore;
    const { counts, waits, acquisitions } = pooled(workers);
    const counter = Number(await admin.get(`${key}:counter`));
    return {
      acquisitionsPerSec: round(acquisitions / elapsed, 0),
      lostUpdates: acquisitions - counter,
      fairness: round(jain(counts), 3),
      waitP99: round(quantile(waits, 0.99), 1),
      waitMax: round(Math.max(...waits), 1),
      // Less the critical section's GET + SET, less the INFO calls of this measurement.
      commandsPerAcquisition: round((commands - 2 * acquisitions - 2) / acquisitions),
      requestsPerAcquisition,
    };
  } finally {
    admin.disconnect();
  }
}

/** Scenario 4 again, shorter, under MONITOR: counts what clients send, not what scripts run. */
async function requestsPerAcquisitionPass(contestant: Contestant, url: string, admin: Redis, ms: number): Promise<number> {
  const key = freshKey('s4m');
  const monitor = await admin.monitor();
  let requests = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    // Leave out script-internal calls and the critical section's GET + SET of the counter.
    if (source !== 'lua' && !String(args[1] ?? '').endsWith(':counter')) requests++;
  });
  try {
    const deadline = Date.now() + 2000 + ms;
    const workers = await Promise.all(Array.from({ length: 4 }, () => runWorker([contestant.name, url, key, String(deadline), '8'])));
    const acquisitions = workers.flatMap((w) => w.counts).reduce((a, b) => a + b, 0);
    await sleep(100); // the last MONITOR lines
    return round(requests / acquisitions);
  } finally {
    monitor.disconnect();
  }
}

export async function totalCommands(admin: Redis): Promise<number> {
  return Number(/total_commands_processed:(\d+)/.exec(await admin.info('stats'))![1]);
}

/** Every worker's per-task acquisition counts and waits, pooled, and the acquisitions in all. */
export function pooled(workers: { counts: number[]; waits: number[] }[]): { counts: number[]; waits: number[]; acquisitions: number } {
  const counts = workers.flatMap((w) => w.counts);
  return { counts, waits: workers.flatMap((w) => w.waits), acquisitions: counts.reduce((a, b) => a + b, 0) };
}

/** Runs a worker process of bench/ (default scenario 4's) and resolves with the JSON line it prints. */
export function runWorker<T = { counts: number[]; waits: number[] }>(args: string[], worker = 'contendedWorker.ts'): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, worker), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`worker: ${code} ${err}`))));
  });
}

/** 5. 1 000 distinct locks, two tasks each, in one process (rlock only). */
export async function manyLocks(url: string, ms: number): Promise<{ acquisitionsPerSec: number; subscriberConnections: number; maxLateMs: number }> {
  const client = new LockClient({ redis: url });
  const admin = new Redis(url);
  await admin.client('SETNAME', 'bench-admin');
  let maxLate = 0;
  let acquisitions = 0;
  let subscriberConnections = 0;
  try {
    const deadline = performance.now() + ms;
    const locks = Array.from({ length: 1000 }, () => freshKey('s5'));
    const sampler = (async () => {
      await sleep(ms / 2);
      const list = await admin.client('LIST');
      subscriberConnections = String(list).split('\n').filter((line) => /flags=\S*P/.test(line)).length;
    })();
    await Promise.all(
      locks.map(async (key) => {
        let releasedAt = -Infinity; // when the other task of this lock last called unlock()
        const task = async (): Promise<void> => {
          while (performance.now() < deadline) {
            const lock = client.getLock(key);
            const waitFrom = performance.now();
            await lock.lock();
            const heldAt = performance.now();
            // Late = held this long after a release that happened while we were already waiting.
            if (releasedAt > waitFrom) maxLate = Math.max(maxLate, heldAt - releasedAt);
            acquisitions++;
            await new Promise((resolve) => setImmediate(resolve));
            releasedAt = performance.now();
            await lock.unlock();
          }
        };
        await Promise.all([task(), task()]);
      }),
    );
    await sampler;
    return { acquisitionsPerSec: round(acquisitions / (ms / 1000), 0), subscriberConnections, maxLateMs: round(maxLate, 1) };
  } finally {
    admin.disconnect();
    await client.close();
  }
}

const gc = (): void => (globalThis as { gc?: () => void }).gc!();

async function heapUsed(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await sleep(20);
    gc();
  }
  return process.memoryUsage().heapUsed;
}

/** 6. 10 000 locks held under the watchdog for 3 renewal periods; then 10 000 parked waiters. */
export async function watchdogAtScale(url: string): Promise<{ scriptCallsPerPeriod: number; callsPer100Locks: number; heapBytesPerHeldLock: number; heapBytesPerWaiter: number }> {
  const watchdogTimeout = 1500; // renewal every 500 ms
  const client = new LockClient({ redis: url, watchdogTimeout });
  const holder = new LockClient({ redis: url });
  const admin = new Redis(url);
  const n = 10_000;
  try {
    await client.getLock(freshKey('warm')).isLocked();
    const before = await heapUsed();
    const handles = Array.from({ length: n }, () => client.getLock(freshKey('s6')));
    for (let i = 0; i < n; i += 500) await Promise.all(handles.slice(i, i + 500).map((lock) => lock.lock()));
    const held = await heapUsed();
    const scriptsBefore = await scriptCalls(admin);
    await sleep((watchdogTimeout / 3) * 3);
    const perPeriod = ((await scriptCalls(admin)) - scriptsBefore) / 3;
    for (let i = 0; i < n; i += 500) await Promise.all(handles.slice(i, i + 500).map((lock) => lock.unlock()));
    handles.length = 0;

    // Waiters: 100 locks held elsewhere, 100 waiters parked on each.
    const heldKeys = Array.from({ length: 100 }, () => freshKey('s6w'));
    await Promise.all(heldKeys.map((key) => holder.getLock(key).lock({ leaseTime: 60_000 })));
    const beforeWaiters = await heapUsed();
    const controller = new AbortController();
    setMaxListeners(n + 10, controller.signal); // one signal shared by every waiter
    const waits = heldKeys.flatMap((key) => Array.from({ length: n / heldKeys.length }, () => client.getLock(key).lock({ signal: controller.signal }).catch(() => undefined)));
    while (client.stats.waiters < n) await sleep(20);
    await sleep(200); // the first attempts and the subscriptions are done
    const withWaiters = await heapUsed();
    controller.abort();
    await Promise.all(waits);
    return {
      scriptCallsPerPeriod: round(perPeriod, 1),
      callsPer100Locks: round(perPeriod / (n / 100), 3),
      heapBytesPerHeldLock: round((held - before) / n, 0),
      heapBytesPerWaiter: round((withWaiters - beforeWaiters) / n, 0),
    };
  } finally {
    admin.disconnect();
    await client.close();
    await holder.close();
  }
}

async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

export { raw, rlock };
