// Leaks: 100 000 lock/unlock cycles and 10 000 abandoned waits leave the client's internal maps
// empty and the heap flat, and so do 20 000 acquisitions by 8 tasks handing one lock to each
// other (measured after a full GC in a child process started with --expose-gc).
import { startFixture } from './helpers/child';
import type { Redis } from 'ioredis';
import { RELEASE_LATCH_TTL_MS } from '../src/names';
import { RedisServer } from './helpers/testRedis';

let server: RedisServer;
beforeAll(async () => {
  server = await RedisServer.start();
});
afterAll(async () => {
  await server.stop();
});

interface Checkpoint {
  phase: string;
  heap: number;
  stats: { renewals: number; waitingChannels: number; waiters: number };
}

test('100 000 cycles, 10 000 aborted waits and 20 000 contended acquisitions in one process: maps empty, heap flat, nothing left in Redis', async () => {
  const child = startFixture('leakCycles.ts', [server.url, '100000', '10000'], ['--expose-gc']);
  const { code, stderr } = await child.exited(90_000);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  const [warm, cycles, aborted, contendedStart, contendedEnd] = child.lines.map((line) => JSON.parse(line) as Checkpoint);
  const empty = { renewals: 0, waitingChannels: 0, waiters: 0 };
  expect([warm!.stats, cycles!.stats, aborted!.stats]).toEqual([empty, empty, empty]);
  // A leak of one small object per cycle would be several MB here.
  expect(cycles!.heap - warm!.heap).toBeLessThan(1024 * 1024);
  expect(aborted!.heap - warm!.heap).toBeLessThan(1024 * 1024);
  // Waits ended by a local handoff used to stay in the channel's wake-up queue: ~3.7 KiB each,
  // some 70 MB over these 20 000 acquisitions.
  expect(contendedEnd!.heap - contendedStart!.heap).toBeLessThan(1024 * 1024);
  const admin = server.connect();
  try {
    // No lock hash; only the full releases' latches, each expiring by itself.
    const keys = await scanKeys(admin);
    expect(keys.filter((key) => !key.startsWith('rlock__unlock_latch:'))).toEqual([]);
    const ttls = await Promise.all(keys.slice(0, 1000).map((key) => admin.pttl(key)));
    expect(ttls.filter((ttl) => ttl === -1 || ttl > RELEASE_LATCH_TTL_MS)).toEqual([]);
    expect(await admin.pubsub('CHANNELS')).toEqual([]);
  } finally {
    admin.disconnect();
  }
}, 120_000);

async function scanKeys(admin: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'COUNT', 10_000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}
