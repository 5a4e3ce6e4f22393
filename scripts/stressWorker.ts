// One OS process of the stress run (see scripts/stress.ts): `tasks` concurrent tasks hammer a few
// hot locks until the deadline and print what they did as JSON lines; the checker, not this
// file, decides whether mutual exclusion held.
import { Redis } from 'ioredis';
import { LockClient, LockLostError, LockTimeoutError, NotLockOwnerError, type RLock } from '../src';
import type { StressEvent, WorkerConfig } from './stressTypes';

const config = JSON.parse(process.argv[2]!) as WorkerConfig;
// Times are compared across processes: CLOCK_MONOTONIC (process.hrtime) is one clock for every
// process of the machine, while performance.timeOrigin is each process's own estimate of the wall
// clock at its start, which a preemption while it is taken can put milliseconds off.
const now = (): number => Number(process.hrtime.bigint()) / 1e6;
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
const randomInt = (min: number, max: number): number => min + Math.floor(Math.random() * (max - min + 1));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function emit(event: StressEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

const client = new LockClient({ redis: config.url, keyPrefix: config.keyPrefix, watchdogTimeout: config.watchdogTimeout });
const data = new Redis(config.url);
client.on('lockLost', ({ name, error }) => emit({ kind: 'lost', lock: name, worker: config.worker, at: now(), reason: error.message }));
const lockNames = [...config.locks, config.chaosLock];

/** GET + SET of the lock's counter: loses updates unless the lock excludes everyone else. */
async function criticalSection(lock: string, owner: string, begun: number, start: number, reenter: RLock | undefined, via: string): Promise<void> {
  if (reenter) {
    // Inside withLock the scope's owner holds it: a second handle enters again, counts up and down.
    await reenter.lock();
    await reenter.unlock();
  }
  const counterKey = `${config.keyPrefix}counter:${lock}`;
  const value = Number((await data.get(counterKey)) ?? 0);
  await sleep(randomInt(0, 2));
  await data.set(counterKey, value + 1);
  emit({ kind: 'held', lock, owner, begun, start, end: now(), via: reenter ? `${via}+reenter` : via });
}

const expectedOnChaos = (error: unknown): boolean => error instanceof NotLockOwnerError || error instanceof LockLostError;

async function oneRound(task: string): Promise<void> {
  const lock = pick(lockNames);
  const handle = client.getLock(lock);
  const action = Math.random();
  const begun = now();
  try {
    if (action < 0.4) {
      // Reentrant section under the watchdog, waiting as long as it takes.
      await handle.withLock(async () => {
        await criticalSection(lock, task, begun, now(), Math.random() < 0.5 ? client.getLock(lock) : undefined, 'withLock');
      });
    } else if (action < 0.65) {
      const waitTime = randomInt(0, 300);
      const got = await handle.tryLock({ waitTime, leaseTime: 10_000 });
      emit({ kind: 'wait', lock, waitTime, elapsed: now() - begun, got });
      if (got) {
        const start = now();
        try {
          await criticalSection(lock, task, begun, start, undefined, 'tryLock');
        } finally {
          await handle.unlock();
        }
      }
    } else if (action < 0.85) {
      // An abandoned wait: the signal aborts it, and nothing may be left behind.
      const abortAfter = randomInt(1, 300);
      try {
        await handle.lock({ signal: AbortSignal.timeout(abortAfter) });
      } catch (error) {
        if ((error as Error).name !== 'TimeoutError') throw error;
        emit({ kind: 'wait', lock, waitTime: abortAfter, elapsed: now() - begun, got: false });
        return;
      }
      emit({ kind: 'wait', lock, waitTime: abortAfter, elapsed: now() - begun, got: true });
      try {
        await criticalSection(lock, task, begun, now(), undefined, 'lock+signal');
      } finally {
        await handle.unlock();
      }
    } else {
      const waitTime = randomInt(0, 300);
      try {
        await handle.withLock(async () => criticalSection(lock, task, begun, now(), undefined, 'withLock+waitTime'), { waitTime });
        emit({ kind: 'wait', lock, waitTime, elapsed: now() - begun, got: true });
      } catch (error) {
        if (!(error instanceof LockTimeoutError)) throw error;
        emit({ kind: 'wait', lock, waitTime, elapsed: now() - begun, got: false });
      }
    }
  } catch (error) {
    if (lock === config.chaosLock && expectedOnChaos(error)) return;
    emit({ kind: 'error', lock, message: `${(error as Error).name}: ${(error as Error).message}` });
  }
}

async function task(id: string): Promise<void> {
  while (Date.now() < config.deadline) await oneRound(id);
}

/** An admin script gone wild: force-unlocks the chaos lock now and then. */
async function chaos(): Promise<void> {
  const lock = client.getLock(config.chaosLock);
  while (Date.now() < config.deadline) {
    await sleep(randomInt(20, 80));
    const sent = now();
    const removed = await lock.forceUnlock();
    emit({ kind: 'force', lock: config.chaosLock, sent, done: now(), removed });
  }
}

async function main(): Promise<void> {
  const tasks = Array.from({ length: config.tasks }, (_, i) => task(`${config.worker}.${i}`));
  if (config.chaos) tasks.push(chaos());
  await Promise.all(tasks);
  emit({ kind: 'done', worker: config.worker, stats: client.stats });
  await data.quit();
  await client.close();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
