// npm run bench:multi: acquire latency of the safety levels of docs/topologies.md, measured in one
// run on private redis-servers (5 independent masters, plus a replica of the first for
// syncReplicas): RLock on one master, RLock with syncReplicas, FencedLock, MultiLock over 3
// masters, RedLock over 5, and @sesamecare-oss/redlock's Redlock over the same 5. Each sample
// times one acquire of a fresh key (no contention); the release is not timed. Prints a table of
// p50/p99 and the ratio to RLock, and writes bench/results/<date>-multi.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redlock } from '@sesamecare-oss/redlock';
import { Redis } from 'ioredis';
import { RedisServer } from '../scripts/redisServer';
import { LockClient, MultiLock, RedLock } from './shippedLibrary';
import { quantile, round } from './stats';
import { runMain } from './runMain';

const SAMPLES = process.argv.includes('--quick') ? 300 : 2000;
const WARM_UP = 200;
const LEASE_MS = 10_000;

type Take = (key: string) => Promise<() => Promise<unknown>>;

async function measure(take: Take): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let i = 0; i < WARM_UP + SAMPLES; i++) {
    const key = `bench:multi:${process.pid}:${i}:${Math.random()}`;
    const start = performance.now();
    const release = await take(key);
    const took = performance.now() - start;
    if (i >= WARM_UP) samples.push(took);
    await release();
  }
  return { p50: round(quantile(samples, 0.5), 3), p99: round(quantile(samples, 0.99), 3) };
}

async function main(): Promise<void> {
  const masters = await Promise.all(Array.from({ length: 5 }, () => RedisServer.start()));
  const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(masters[0]!.port)]);
  const clients = masters.map((server) => new LockClient({ redis: server.url }));
  const synced = new LockClient({ redis: masters[0]!.url, syncReplicas: { replicas: 1, timeout: 1000 } });
  const plain = masters.map((server) => new Redis(server.url));
  const redlock = new Redlock(plain, { retryCount: 0 });
  redlock.on('error', () => undefined);
  const results: Record<string, { p50: number; p99: number }> = {};
  try {
    // The replica must be in sync before WAIT can count it.
    for (;;) {
      const info = await plain[0]!.info('replication');
      if (/slave0:.*state=online/.test(info)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const lock = (client: InstanceType<typeof LockClient>): Take => async (key) => {
      const handle = client.getLock(key);
      await handle.lock();
      return () => handle.unlock();
    };
    const contestants: [string, Take][] = [
      ['RLock, 1 master', lock(clients[0]!)],
      ['RLock + syncReplicas 1', lock(synced)],
      ['FencedLock, 1 master', async (key) => {
        const handle = clients[0]!.getFencedLock(key);
        await handle.lock();
        return () => handle.unlock();
      }],
      ['MultiLock, 3 masters', async (key) => {
        const multi = new MultiLock(clients.slice(0, 3).map((client) => client.getLock(key)));
        await multi.lock();
        return () => multi.unlock();
      }],
      ['RedLock, 5 masters', async (key) => {
        const red = new RedLock(clients.map((client) => client.getLock(key)));
        await red.lock();
        return () => red.unlock();
      }],
      ['RedLock, 5 masters, leaseTime', async (key) => {
        const red = new RedLock(clients.map((client) => client.getLock(key)));
        await red.lock({ leaseTime: LEASE_MS });
        return () => red.unlock();
      }],
      ['@sesamecare-oss/redlock, 5 masters', async (key) => {
        const held = await redlock.acquire([key], LEASE_MS);
        return () => held.release();
      }],
    ];
    for (const [name, take] of contestants) {
      process.stderr.write(`${name}\n`);
      results[name] = await measure(take);
    }
  } finally {
    await Promise.all([...clients, synced].map((client) => client.close()));
    await Promise.all(plain.map((redis) => redis.quit()));
    await Promise.all([...masters, replica].map((server) => server.stop()));
  }
  const base = results['RLock, 1 master']!;
  const table = [
    '| lock | acquire p50 ms | acquire p99 ms | p50 × RLock |',
    '|---|---|---|---|',
    ...Object.entries(results).map(([name, r]) => `| ${name} | ${r.p50} | ${r.p99} | ${round(r.p50 / base.p50)} |`),
  ].join('\n');
  console.log(table);
  const date = new Date().toISOString().slice(0, 10);
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${date}-multi.json`), `${JSON.stringify({ date, samples: SAMPLES, node: process.version, cpus: cpus().length, results }, null, 2)}\n`);
}

runMain(main);
