// npx tsx scripts/soak/rejudge.ts <lines file> [primitive] : the verdict on a saved run's records
// (npm run soak -- --lines <file>) again, with the checker as it is now. The checks that ask
// Redis (counters, leftovers) are not repeated: they need the run's servers.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { SoakOptions } from './records';
import { judgeRecords } from './judge';
import { PRIMITIVES } from './primitives';
import type { Fault, FaultKind, Force, WorkerLine } from './records';

async function main(): Promise<void> {
  const [file, primitiveName = 'rlock'] = process.argv.slice(2);
  const primitive = PRIMITIVES[primitiveName];
  if (!file || !primitive) throw new Error('usage: rejudge.ts <lines file> [primitive]');
  const lines: WorkerLine[] = [];
  const faults: Fault[] = [];
  const forces: Force[] = [];
  for await (const text of createInterface({ input: createReadStream(file) })) {
    const line = JSON.parse(text) as WorkerLine | ({ k: 'fault' } & Fault) | ({ k: 'force' } & Force);
    if (line.k === 'fault') faults.push(line);
    else if (line.k === 'force') forces.push(line);
    else lines.push(line);
  }
  const killedAt = new Map(faults.filter((f) => f.kind === 'worker-kill' && f.worker !== undefined).map((f) => [f.worker!, f.at]));
  const grants = lines.filter((l) => l.k === 'g');
  const locks = [...new Set(grants.map((g) => g.lock))].sort();
  const start = grants.reduce((min, g) => Math.min(min, g.begun), Infinity);
  const deadline = grants.reduce((max, g) => Math.max(max, g.granted), -Infinity);
  const options = {
    primitive: primitiveName,
    waitSlackMs: 500,
    // 'force' only when the run forced anything: a run without faults is judged as one (judge.ts).
    faults: [...(forces.length > 0 ? ['force'] : []), ...new Set(faults.map((f) => f.kind))] as FaultKind[],
  } as SoakOptions;
  const workerCount = lines.reduce((max, l) => Math.max(max, l.w), 0) + 1;
  const { report } = judgeRecords({ options, lines, records: { faults, forces, failures: [] }, killedAt, locks, start, deadline, invariant: primitive.invariant, workerCount });
  console.log(JSON.stringify({ ...report, options: { ...options, rejudged: file } }, null, 2));
  if (report.violations.length) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
