// The fixture side of a start barrier: processes that race each other start together. The test
// awaits each one's "ready" line (FixtureProcess.line), then sends a line to each (or ends stdin).
import { createInterface } from 'node:readline';

/** Prints "ready" and resolves at the first line on stdin, or at its end; then lets stdin go. */
export async function readyThenGo(): Promise<void> {
  console.log('ready');
  const lines = createInterface({ input: process.stdin });
  await new Promise((resolve) => {
    lines.once('line', resolve);
    lines.once('close', resolve);
  });
  lines.close();
  process.stdin.destroy();
}
