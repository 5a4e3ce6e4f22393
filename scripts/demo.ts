// npm run demo: four worker processes contend for one lock and print who holds it when; then the
// parent checks the holds they reported for overlaps and for the order they were served in.
// Uses REDIS_URL when set; otherwise starts a private redis-server and removes it afterwards.
import { spawn } from 'node:child_process';
import { LockClient } from '../src';
import { ensureRedis, RedisMissingError } from './ensureRedis';
import { redisFromEnv } from './redisServer';

const LOCK_NAME = 'demo:order:1001';
const WORKERS = 4;
const ROUNDS = 3;

/**
 * One hold as a worker saw it, on process.hrtime (CLOCK_MONOTONIC: one clock for every process
 * on the machine, unlike Date.now or performance.timeOrigin), in ns as decimal strings.
 * `asked`: lock requested; `from`..`to`: inside the lock (taken .. about to be released).
 */
export interface Hold {
  worker: string;
  round: number;
  asked: string;
  from: string;
  to: string;
}

const now = (): bigint => process.hrtime.bigint();
const ms = (ns: bigint): string => (Number(ns) / 1e6).toFixed(1);

async function worker(url: string, id: string, startedAt: bigint): Promise<void> {
  const client = new LockClient({ redis: url });
  const lock = client.getLock(LOCK_NAME);
  const stamp = (): string => `+${ms(now() - startedAt).padStart(7)} ms`;
  for (let round = 1; round <= ROUNDS; round++) {
    const asked = now();
    await lock.withLock(async () => {
      const from = now();
      console.log(`${stamp()}  worker ${id} holds ${LOCK_NAME} (round ${round}, waited ${ms(from - asked)} ms)`);
      await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 200));
      console.log(`${stamp()}  worker ${id} releases`);
      const hold: Hold = { worker: id, round, asked: String(asked), from: String(from), to: String(now()) };
      process.send?.(hold);
    });
  }
  await client.close();
}

/** Pairs of holds that overlap in time: each one is a broken mutual exclusion. */
export function overlaps(holds: Hold[]): [Hold, Hold][] {
  const sorted = [...holds].sort((a, b) => (BigInt(a.from) < BigInt(b.from) ? -1 : 1));
  const found: [Hold, Hold][] = [];
  for (let i = 1; i < sorted.length; i++) {
    if (BigInt(sorted[i]!.from) < BigInt(sorted[i - 1]!.to)) found.push([sorted[i - 1]!, sorted[i]!]);
  }
  return found;
}

/** Holds taken while a worker that had asked earlier was still waiting: not first-come-first-served. */
export function overtakes(holds: Hold[]): [Hold, Hold][] {
  const found: [Hold, Hold][] = [];
  for (const late of holds) {
    const waiting = holds.find((early) => early !== late && BigInt(early.asked) < BigInt(late.asked) && BigInt(early.from) > BigInt(late.from));
    if (waiting) found.push([waiting, late]);
  }
  return found;
}

const label = (hold: Hold): string => `worker ${hold.worker} round ${hold.round}`;

async function main(): Promise<void> {
  const [role, url, id, startedAt] = process.argv.slice(2);
  if (role === 'worker') return worker(url!, id!, BigInt(startedAt!));

  if (!process.env.REDIS_URL) ensureRedis(['redis-server']);
  const redis = await redisFromEnv();
  console.log(`redis at ${redis.url}; ${WORKERS} processes × ${ROUNDS} rounds on "${LOCK_NAME}"`);
  const start = now();
  const holds: Hold[] = [];
  const exits = Array.from({ length: WORKERS }, (_, i) => {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename, 'worker', redis.url, String(i + 1), String(start)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (hold: Hold) => holds.push(hold));
    // 'close', not 'exit': every IPC message has arrived by then.
    return new Promise<number | null>((resolve) => child.on('close', resolve));
  });
  const codes = await Promise.all(exits);
  await redis.stop();
  const failed = codes.filter((code) => code !== 0).length;
  if (failed) console.log(`${failed} worker(s) failed`);

  const overlapping = overlaps(holds);
  if (overlapping.length === 0) {
    console.log(`exclusive: ${holds.length} holds checked on one monotonic clock, no two overlap`);
  } else {
    for (const [a, b] of overlapping) {
      console.log(`OVERLAP: ${label(b)} took the lock ${ms(BigInt(a.to) - BigInt(b.from))} ms before ${label(a)} released it`);
    }
  }
  const overtaken = overtakes(holds);
  if (overtaken.length > 0) {
    const [early, late] = overtaken[0]!;
    console.log(
      `not first-come-first-served: ${overtaken.length} of ${holds.length} holds went to a worker that asked after another was already waiting ` +
        `(e.g. ${label(late)} asked ${ms(BigInt(late.asked) - BigInt(early.asked))} ms after ${label(early)} and got the lock first). ` +
        'RLock is not fair: whoever asks while it is free takes it, so a worker that releases and asks again at once often wins again (as with Redisson\'s RLock); for request order use the fair lock, client.getFairLock(name).',
    );
  } else {
    console.log(`served in request order this time (RLock does not promise it; the fair lock, client.getFairLock(name), does)`);
  }
  process.exitCode = failed || overlapping.length || holds.length !== WORKERS * ROUNDS ? 1 : 0;
}

if (require.main === module) {
  main().catch((error) => {
    if (error instanceof RedisMissingError) console.error(error.message);
    else console.error(error);
    process.exitCode = 1;
  });
}
