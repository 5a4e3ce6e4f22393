// npm run soak -- [--primitive rlock] [--duration <s>] [--faults all|none|<kind>,<kind>...]
// The soak run (scripts/soak/harness.ts) with a report; exits 1 on any violation.
import { parseArgs } from 'node:util';
import { runSoak } from './soak/harness';
import { PRIMITIVES } from './soak/primitives';
import { FAULT_KINDS, type FaultKind } from './soak/records';

function parseFaults(value: string, applicable: readonly FaultKind[]): FaultKind[] {
  if (value === 'all') return [...applicable];
  if (value === 'none') return [];
  const kinds = value.split(',').map((kind) => kind.trim());
  for (const kind of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(kind)) throw new Error(`--faults: unknown fault "${kind}"; known: all, none, ${FAULT_KINDS.join(', ')}`);
  }
  return kinds as FaultKind[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      primitive: { type: 'string', default: 'rlock' },
      duration: { type: 'string', default: '60' },
      faults: { type: 'string' },
      'fault-every': { type: 'string', default: '4' },
      processes: { type: 'string', default: '4' },
      tasks: { type: 'string', default: '16' },
      lines: { type: 'string' },
    },
  });
  const seconds = Number(values.duration);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 24 * 3600) throw new Error('--duration: seconds between 1 and 86400');
  if (!PRIMITIVES[values.primitive]) throw new Error(`--primitive: one of ${Object.keys(PRIMITIVES).join(', ')}`);
  const faultEvery = Number(values['fault-every']);
  if (!(faultEvery > 0)) throw new Error('--fault-every: seconds > 0');
  const processes = Number(values.processes);
  const tasks = Number(values.tasks);
  if (!Number.isInteger(processes) || processes < 1 || !Number.isInteger(tasks) || tasks < 1) throw new Error('--processes, --tasks: integers >= 1');
  const applicable = PRIMITIVES[values.primitive]!.faults;
  // Default: the force-unlocking operator alone, for a primitive that has a force-unlock.
  const faults = parseFaults(values.faults ?? (applicable.includes('force') ? 'force' : 'none'), applicable);
  const watchdogTimeout = 2000;
  console.log(`soak: ${values.primitive}, ${processes} processes × ${tasks} tasks on 4 hot locks + 1 chaos lock for ${seconds} s; faults: ${faults.join(', ') || 'none'}`);
  const report = await runSoak({
    primitive: values.primitive,
    processes,
    tasksPerProcess: tasks,
    hotLocks: 4,
    durationMs: seconds * 1000,
    watchdogTimeout,
    leaseTime: 5000,
    waitSlackMs: 500,
    faults,
    faultEveryMs: faultEvery * 1000,
    pauseMs: Math.round(watchdogTimeout * 1.3),
    linesFile: values.lines,
    longHoldEveryMs: 30_000,
  });
  console.log(JSON.stringify(report, null, 2));
  if (report.violations.length) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
