import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** A fixture running under tsx in its own OS process. */
export interface FixtureProcess {
  readonly child: ChildProcess;
  /** Every stdout line so far. */
  readonly lines: string[];
  /** Resolves with the first stdout line (past or future) that `test` accepts. */
  line(test: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Writes one line to the child's stdin. */
  send(line: string): void;
  /** Resolves with the exit code, or rejects if the process outlives `timeoutMs` (it is then killed). */
  exited(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

export function startFixture(fixture: string, args: string[], nodeArgs: string[] = []): FixtureProcess {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', join(__dirname, '..', 'fixtures', fixture), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin!.on('error', () => undefined); // a killed child closes its end
  const lines: string[] = [];
  const listeners = new Set<(line: string) => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const listener of listeners) listener(line);
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    lines,
    send(line) {
      child.stdin!.write(`${line}\n`);
    },
    // Generous: every fixture compiles src through tsx as it starts, which a loaded CI box slows a lot.
    line(test, timeoutMs = 60_000) {
      const seen = lines.find(test);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`${fixture} printed no such line within ${timeoutMs} ms; stderr: ${stderr}`));
        }, timeoutMs).unref(); // a line no test awaits any more must not keep the worker alive
        const listener = (line: string): void => {
          if (!test(line)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(line);
        };
        listeners.add(listener);
      });
    },
    async exited(timeoutMs = 60_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`${fixture} did not exit by itself within ${timeoutMs} ms`));
        }, timeoutMs);
      });
      try {
        const result = await Promise.race([exit, timeout]);
        // The exit event can come before the last stderr chunk is read.
        await new Promise((resolve) => setImmediate(resolve));
        return { ...result, stderr };
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Runs a fixture to its end; resolves with its exit code, or rejects if it outlives `timeoutMs`. */
export async function runFixture(fixture: string, args: string[], timeoutMs = 60_000): Promise<{ code: number | null; stderr: string }> {
  const fixtureProcess = startFixture(fixture, args);
  fixtureProcess.child.stdin!.end();
  const { code, stderr } = await fixtureProcess.exited(timeoutMs);
  return { code, stderr };
}
