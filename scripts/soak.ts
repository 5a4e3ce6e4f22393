// npm run soak [-- --duration <seconds>] : the stress run for longer (default 60 s), with a report.
import { runStress } from './stress';

async function main(): Promise<void> {
  const i = process.argv.indexOf('--duration');
  const seconds = i >= 0 ? Number(process.argv[i + 1]) : 60;
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 24 * 3600) throw new Error('--duration: seconds between 1 and 86400');
  console.log(`soak: 4 processes × 16 tasks on 4 hot locks + 1 chaos lock for ${seconds} s`);
  const report = await runStress({ processes: 4, tasksPerProcess: 16, hotLocks: 4, durationMs: seconds * 1000, watchdogTimeout: 1500, waitSlackMs: 500 });
  console.log(JSON.stringify(report, null, 2));
  if (report.violations.length) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
