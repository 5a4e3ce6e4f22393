#!/usr/bin/env node
// The `rlock` command for operators: inspect, list, force-unlock and watch locks.
// Exit codes: 0 done; 1 nothing to force-unlock; 2 bad usage or input; 3 Redis unreachable or failing.
import { createInterface } from 'node:readline/promises';
import { Command, CommanderError, Option } from 'commander';
import { Redis } from 'ioredis';
import { InvalidArgumentError, LockError, RedisCommandError } from './errors';
import type { LockInfo } from './introspection';
import { LockClient } from './LockClient';

const EXIT_NOTHING = 1;
const EXIT_USAGE = 2;
const EXIT_REDIS = 3;

/** An error that ends the command with one line and an exit code. */
class CliError extends Error {
  constructor(message: string, readonly exitCode: number) {
    super(message);
  }
}

interface GlobalOptions {
  url: string;
  prefix: string;
  json: boolean;
}

async function connect(options: GlobalOptions): Promise<{ client: LockClient; close: () => Promise<void> }> {
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new CliError(`not a Redis URL: ${options.url}`, EXIT_USAGE);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new CliError(`not a Redis URL (redis:// or rediss://): ${options.url}`, EXIT_USAGE);
  // Fail fast: an operator wants one clear line, not a retry loop.
  const redis = new Redis(options.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 5000, disconnectTimeout: 0 });
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => (lastError = error));
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new CliError(`cannot reach Redis at ${url.host}: ${(lastError ?? (error as Error)).message}`, EXIT_REDIS);
  }
  const client = new LockClient({ redis, keyPrefix: options.prefix, name: 'rlock-cli' });
  return {
    client,
    close: async () => {
      await client.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

function describeTtl(ttl: number): string {
  if (ttl === -1) return 'no expiry';
  if (ttl < 0) return 'no TTL';
  return `ttl ${(ttl / 1000).toFixed(1)} s`;
}

function formatInfo(info: LockInfo): string {
  const head = `${info.name} (key ${info.key}): ${info.locked ? 'locked' : 'free'}, ${describeTtl(info.ttl)}, ${info.waitingClients} client(s) waiting`;
  const holders = info.holders.map(
    (h) => `  held by ${h.clientId}:${h.ownerId} × ${h.holdCount}, client ${h.clientName === undefined ? '(not connected)' : JSON.stringify(h.clientName)}`,
  );
  return [head, ...holders].join('\n');
}

async function withClient<T>(program: Command, run: (client: LockClient, options: GlobalOptions) => Promise<T>): Promise<T> {
  const options = program.opts<GlobalOptions>();
  const { client, close } = await connect(options);
  try {
    return await run(client, options);
  } finally {
    await close();
  }
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

function buildProgram(): Command {
  const program = new Command('rlock')
    .description('Inspect and administer rlock locks (Redisson-style locks on Redis).')
    .addOption(new Option('--url <url>', 'Redis URL').env('REDIS_URL').default('redis://127.0.0.1:6379'))
    .option('--prefix <prefix>', 'key prefix of the locks (the LockClient keyPrefix)', '')
    .option('--json', 'print JSON for scripts', false)
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });

  program
    .command('inspect <name>')
    .description('who holds a lock, its TTL, and how many clients wait on it')
    .action(async (name: string) => {
      await withClient(program, async (client, options) => {
        const info = await client.inspect(name);
        // A fenced lock's holder also has a token (the plain lock's answer is null).
        const token = await client.getFencedLock(name).getToken();
        if (options.json) console.log(JSON.stringify(token === null ? info : { ...info, fencingToken: token.toString() }));
        else console.log(formatInfo(info) + (token === null ? '' : `\n  fencing token ${token}`));
      });
    });

  program
    .command('list')
    .description('the lock names under the prefix (SCAN, never KEYS)')
    .option('--match <glob>', 'glob on the lock name', '*')
    .action(async (opts: { match: string }) => {
      await withClient(program, async (client, options) => {
        const names: string[] = [];
        for await (const name of client.listLocks({ match: opts.match })) {
          if (options.json) names.push(name);
          else console.log(name);
        }
        if (options.json) console.log(JSON.stringify(names));
      });
    });

  program
    .command('force-unlock <name>')
    .description('delete a lock whoever holds it and wake its waiters (exit 1 when there was none)')
    .option('-y, --yes', 'do not ask for confirmation', false)
    .action(async (name: string, opts: { yes: boolean }) => {
      await withClient(program, async (client, options) => {
        const info = await client.inspect(name);
        if (!info.locked) throw new CliError(`no lock ${name} (key ${info.key}): nothing removed`, EXIT_NOTHING);
        if (!opts.yes) {
          if (!process.stdin.isTTY) throw new CliError('refusing to force-unlock without --yes when stdin is not a terminal', EXIT_USAGE);
          if (!(await confirm(`${formatInfo(info)}\nForce-unlock ${name}? [y/N] `))) throw new CliError('not confirmed: nothing removed', EXIT_NOTHING);
        }
        const removed = await client.getLock(name).forceUnlock();
        if (!removed) throw new CliError(`no lock ${name}: it was released meanwhile, nothing removed`, EXIT_NOTHING);
        console.log(options.json ? JSON.stringify({ removed: true, lock: info }) : `removed ${formatInfo(info)}`);
      });
    });

  program
    .command('watch <name>')
    .description('a live view of a lock, refreshed until Ctrl-C')
    .option('--interval <ms>', 'refresh period in ms', '1000')
    .action(async (name: string, opts: { interval: string }) => {
      const interval = Number(opts.interval);
      if (!Number.isInteger(interval) || interval < 50 || interval > 3_600_000) throw new CliError('--interval: a whole number of ms from 50 to 3600000', EXIT_USAGE);
      await withClient(program, async (client, options) => {
        const stop = new AbortController();
        const onSignal = (): void => stop.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          while (!stop.signal.aborted) {
            const info = await client.inspect(name);
            if (options.json) console.log(JSON.stringify({ at: new Date().toISOString(), ...info }));
            else {
              if (process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
              console.log(`${new Date().toISOString()}  (Ctrl-C to stop)\n${formatInfo(info)}`);
            }
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, interval);
              stop.signal.addEventListener('abort', () => {
                clearTimeout(timer);
                resolve();
              }, { once: true });
            });
          }
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
        }
      });
    });
  return program;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander printed its own message (or the help / version) already.
      return error.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (error instanceof CliError) {
      process.stderr.write(`rlock: ${error.message}\n`);
      return error.exitCode;
    }
    if (error instanceof InvalidArgumentError) {
      process.stderr.write(`rlock: ${error.message}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof RedisCommandError || error instanceof LockError) {
      process.stderr.write(`rlock: ${error.message}\n`);
      return EXIT_REDIS;
    }
    process.stderr.write(`rlock: ${(error as Error)?.message ?? String(error)}\n`);
    return EXIT_REDIS;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
