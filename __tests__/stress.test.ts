// Load without loss: OS processes × tasks on a few hot locks with reentrant holds, random
// tryLock timeouts, aborted waits and force-unlocks (scripts/stress.ts checks the records).
// `npm run soak` is the same run for longer.
import { runStress } from '../scripts/stress';

test('no overlapping holds, no lost update, waits end in time, nothing left in Redis', async () => {
  const report = await runStress({
    processes: 3,
    tasksPerProcess: 8,
    hotLocks: 3,
    durationMs: 5000,
    // 5 s, not 1.5 s: on a loaded 2-core CI box a starved worker can miss a 1.5 s lease (see
    // docs/reliability.md, "a paused owner process"); `npm run soak` keeps 1.5 s.
    watchdogTimeout: 5000,
    // Loose: under jest this shares 2 cores with another test file, 3 workers and Redis.
    // `npm run soak` holds waits to 500 ms.
    waitSlackMs: 1000,
  });
  if (report.violations.length) console.error(JSON.stringify(report, null, 2));
  expect(report.violations).toEqual([]);
  // It really was a contest: each lock changed hands many times, waits timed out, force-unlocks hit.
  for (const holds of Object.values(report.holdsPerLock)) expect(holds).toBeGreaterThan(100);
  expect(report.timedOut).toBeGreaterThan(0);
  expect(report.forceUnlocks).toBeGreaterThan(0);
}, 60_000);
