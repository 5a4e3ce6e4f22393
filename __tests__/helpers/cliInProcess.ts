import { main } from '../../src/cli';

/** The environment variables the CLI reads; cleared for a run unless given. */
const CLI_ENV = ['REDIS_URL', 'REDIS_PASSWORD', 'REDIS_PASSWORD_FILE', 'REDIS_TLS_CA', 'REDIS_TLS_CERT', 'REDIS_TLS_KEY'];

/**
 * Runs the `rlock` CLI's `main` in this process with `env`, capturing everything it writes
 * (stdout, stderr, console): far cheaper than a child under tsx, which matters on a shared
 * 2-core box. cli.test.ts drives the built CLI as a real child process.
 */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const saved = new Map(CLI_ENV.map((name) => [name, process.env[name]]));
  for (const name of CLI_ENV) delete process.env[name];
  Object.assign(process.env, env);
  let stdout = '';
  let stderr = '';
  const spies = [
    jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true)),
    jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true)),
    jest.spyOn(console, 'log').mockImplementation((...values: unknown[]) => void (stdout += `${values.join(' ')}\n`)),
    jest.spyOn(console, 'warn').mockImplementation((...values: unknown[]) => void (stderr += `${values.join(' ')}\n`)),
    jest.spyOn(console, 'error').mockImplementation((...values: unknown[]) => void (stderr += `${values.join(' ')}\n`)),
  ];
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    for (const spy of spies) spy.mockRestore();
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}
