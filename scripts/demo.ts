// npm run demo: four worker processes contend for one lock and print who holds it when.
// Uses REDIS_URL when set; otherwise starts a private redis-server and removes it afterwards.
import { spawn } from 'node:child_process';
import { LockClient } from '../src';
import { redisFromEnv } from './redisServer';

const LOCK_NAME = 'demo:order:1001';
const WORKERS = 4;
const ROUNDS = 3;

async function worker(url: string, id: string, startedAt: number): Promise<void> {
  const client = new LockClient({ redis: url });
  const lock = client.getLock(LOCK_NAME);
  const stamp = (): string => `+${String(Date.now() - startedAt).padStart(5)} ms`;
  for (let round = 1; round <= ROUNDS; round++) {
    const asked = Date.now();
    await lock.withLock(async () => {
      console.log(`${stamp()}  worker ${id} holds ${LOCK_NAME} (round ${round}, waited ${Date.now() - asked} ms)`);
      await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 200));
      console.log(`${stamp()}  worker ${id} releases`);
    });
  }
  await client.close();
}

async function main(): Promise<void> {
  const [role, url, id, startedAt] = process.argv.slice(2);
  if (role === 'worker') return worker(url!, id!, Number(startedAt));

  const redis = await redisFromEnv();
  console.log(`redis at ${redis.url}; ${WORKERS} processes × ${ROUNDS} rounds on "${LOCK_NAME}"`);
  const start = Date.now();
  const exits = Array.from({ length: WORKERS }, (_, i) => {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename, 'worker', redis.url, String(i + 1), String(start)], {
      stdio: 'inherit',
    });
    return new Promise<number | null>((resolve) => child.on('exit', resolve));
  });
  const codes = await Promise.all(exits);
  await redis.stop();
  const failed = codes.filter((code) => code !== 0).length;
  console.log(failed ? `${failed} worker(s) failed` : 'all workers done; every hold above was exclusive');
  process.exitCode = failed ? 1 : 0;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
