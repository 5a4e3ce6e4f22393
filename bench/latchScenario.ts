// Scenario 8, a count-down latch's fan-out (family.md, Redisson #5349, where one async awaiter
// of many was woken): 5 processes × 20 awaiters; how long after the countDown that reaches 0 the
// last of the 100 resolves. Each round's latch is opened once every process has subscribed to it.
import { Redis } from 'ioredis';
import { latchChannelOf } from '../src/names';
import { LockClient } from './shippedLibrary';
import { runWorker } from './scenarios';
import { quantile, round } from './stats';

export interface LatchFanOut {
  processes: number;
  awaitersPerProcess: number;
  rounds: number;
  /** Per round: ms from the countDown's send to the last awaiter resolving. */
  lastMs: number[];
  /** The median over rounds of the per-round median awaiter's delay (ms). */
  medianMs: number;
}

export async function latchFanOut(url: string, rounds: number, processes = 5, awaitersPerProcess = 20): Promise<LatchFanOut> {
  const name = `bench:latch:${process.pid}:${Date.now()}`;
  const client = new LockClient({ redis: url });
  const admin = new Redis(url);
  try {
    for (let r = 0; r < rounds; r++) await client.getCountDownLatch(`${name}:${r}`).trySetCount(1);
    const workers = Array.from({ length: processes }, () => runWorker<{ openedAt: number[][] }>([url, name, String(awaitersPerProcess), String(rounds)], 'latchWorker.ts'));
    const sentAt: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const channel = latchChannelOf('', `${name}:${r}`);
      const started = Date.now();
      // Every process subscribed (each awaits this round's latch): none would miss the message.
      while (Number(((await admin.pubsub('NUMSUB', channel)) as [string, number])[1]) < processes) {
        if (Date.now() - started > 30_000) throw new Error(`round ${r}: the workers did not subscribe within 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      // An awaiter's re-check after it subscribed may still be on its way: let it land.
      await new Promise((resolve) => setTimeout(resolve, 50));
      sentAt.push(performance.timeOrigin + performance.now());
      await client.getCountDownLatch(`${name}:${r}`).countDown();
    }
    const results = await Promise.all(workers);
    const perRound = sentAt.map((at, r) => results.flatMap((w) => w.openedAt[r]!.map((opened) => opened - at)));
    return {
      processes,
      awaitersPerProcess,
      rounds,
      lastMs: perRound.map((delays) => round(Math.max(...delays))),
      medianMs: round(quantile(perRound.map((delays) => quantile(delays, 0.5)), 0.5)),
    };
  } finally {
    admin.disconnect();
    await client.close();
  }
}
