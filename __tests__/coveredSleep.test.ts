// A semaphore's parked waiters share their client's latest answer from Redis (ChannelEntry's
// bound): when a waiter's own bound runs out while a sibling's ask covers it, it sleeps on
// instead of asking too, and no longer than that ask's answer says. Client-side timing only:
// the Redis side (who asks, what it answers) is in semaphore.test.ts.
import { ChannelEntry } from '../src/services/ChannelEntry';
import { sleepAsCandidate } from '../src/services/candidateSleep';
import { sleep } from './helpers/time';

/** A parked waiter with bound `ms`; `ended()` says whether its sleep is over (it would ask now). */
function park(entry: ChannelEntry, ms: number, coveredBySiblings = true): { ended: () => boolean; done: Promise<number> } {
  entry.refCount++;
  const started = performance.now();
  let over = false;
  const done = sleepAsCandidate(entry, 'client', { field: `client:${entry.refCount}`, lease: 0, permits: 1, coveredBySiblings }, ms, [], Infinity, { owed: false }).then(() => {
    over = true;
    return performance.now() - started;
  });
  return { ended: () => over, done };
}

test('a waiter whose bound runs out while a sibling’s ask is out sleeps on, and wakes by the shorter bound its answer gives', async () => {
  const entry = new ChannelEntry();
  entry.asking(5_000);
  const waiter = park(entry, 10);
  await sleep(150);
  expect(waiter.ended()).toBe(false); // covered: it did not ask at 10 ms
  entry.refused(100); // the answer: a reservation ends in 100 ms
  // Before: it slept to the ask's mark, 5 s.
  expect(await waiter.done).toBeLessThan(1_000);
});

test('a waiter covered by a sibling’s ask that failed asks after a transient pause, not at the mark', async () => {
  const entry = new ChannelEntry();
  entry.asking(5_000);
  const waiter = park(entry, 10);
  await sleep(150);
  expect(waiter.ended()).toBe(false);
  entry.askFailed();
  expect(await waiter.done).toBeLessThan(1_000); // ~350 ms: 150 + the 200 ms pause
});

test('a waiter not covered by its siblings (RLock, the expirable semaphore) asks when its own bound runs out', async () => {
  const entry = new ChannelEntry();
  entry.asking(5_000);
  expect(await park(entry, 10, false).done).toBeLessThan(1_000);
});

test('a message wakes a covered waiter at once', async () => {
  const entry = new ChannelEntry();
  entry.asking(5_000);
  const waiter = park(entry, 10);
  await sleep(150);
  entry.wakeOne();
  expect(await waiter.done).toBeLessThan(1_000);
});
