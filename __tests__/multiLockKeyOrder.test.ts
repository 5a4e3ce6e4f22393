// MultiLock whose members have keys of their own (a name per server: the usual MultiLock over
// several resources): the shared suite (helpers/multiLockSuite.ts), then two MultiLocks over the
// same locks listed in opposite orders, and a lone user nesting the members.
import { multiLockSuite } from './helpers/multiLockSuite';
import { type PrivateRedis, usePrivateRedis } from './helpers/privateRedis';
import { sleep, until } from './helpers/time';
import { MultiLock } from '../src';

const servers: PrivateRedis[] = [usePrivateRedis(), usePrivateRedis(), usePrivateRedis()];

describe('a lock name of its own on each server (distinct keys)', () => {
  multiLockSuite(servers, 'per-server');
});

test('two MultiLocks over the same locks listed in opposite orders take turns: no wait spans more than a few holds of the other (Redisson #1160; before, one lost round after round)', async () => {
  const name = `turns:${process.pid}`;
  const hold = 20;
  const rounds = 60;
  const holds: { who: number; start: number }[] = [];
  const spans: number[] = [];
  const contender = async (who: number): Promise<void> => {
    const locks = servers.slice(0, 2).map((s, i) => s.client().getLock(`${name}:${i}`));
    const multi = new MultiLock(who === 0 ? locks : [...locks].reverse());
    for (let round = 0; round < rounds; round++) {
      const asked = performance.now();
      await multi.withLock(async () => {
        const start = performance.now();
        // The other's holds that began while this one waited.
        spans.push(holds.filter((h) => h.who !== who && h.start > asked && h.start < start).length);
        holds.push({ who, start });
        await sleep(hold);
      });
    }
  };
  await Promise.all([contender(0), contender(1)]);
  expect(holds).toHaveLength(2 * rounds);
  // A MultiLock whose release woke the other lets it ask first, as a lone RLock does: its next
  // round pauses up to 50 ms (RLock's turn), during which the other, holding 20 ms, may go again.
  expect(Math.max(...spans)).toBeLessThanOrEqual(4);
}, 30_000);

test('a lone user that nests the members in the other order (b, then a) is not deadlocked by a MultiLock over (a, b): the MultiLock holds nothing while it waits', async () => {
  // A second reader's find in a first version that kept the members of lower keys while it
  // waited: with the lone user holding b and wanting a, each waited for the other for good.
  const name = `nested:${process.pid}`;
  const user = servers.slice(0, 2).map((s, i) => s.client().getLock(`${name}:${i}`));
  const multiClients = servers.slice(0, 2).map((s) => s.client());
  const multi = new MultiLock(multiClients.map((client, i) => client.getLock(`${name}:${i}`)));
  await user[1]!.lock();
  const taking = multi.withLock(() => 'multi', { waitTime: 10_000 });
  await until('the MultiLock waits for b', () => multiClients[1]!.stats.waiters === 1);
  expect(await servers[0]!.admin.exists(`${name}:0`)).toBe(0); // a is not kept meanwhile
  expect(await user[0]!.tryLock({ waitTime: 3_000 })).toBe(true);
  await user[0]!.unlock();
  await user[1]!.unlock();
  expect(await taking).toBe('multi');
});
