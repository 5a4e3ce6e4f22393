import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** Runs a fixture under tsx in its own process; resolves with its exit code, or rejects if it outlives `timeoutMs`. */
export function runFixture(fixture: string, args: string[], timeoutMs = 20_000): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '..', 'fixtures', fixture), ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${fixture} did not exit by itself within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}
