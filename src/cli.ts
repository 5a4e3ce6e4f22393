#!/usr/bin/env node
// The `rlock` command for operators: inspect, list, force-unlock and watch locks.
// Exit codes (also in --help): 0 done; 1 nothing to force-unlock; 2 bad usage or input; 3 Redis unreachable or failing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { Command, CommanderError, Option } from 'commander';
import type { Redis } from 'ioredis';
import { CliError, EXIT_NOTHING, EXIT_REDIS, EXIT_USAGE } from './cliError';
import { withClient } from './cliConnection';
import { InvalidArgumentError, LockError, LockUsageError, RedisCommandError } from './errors';
import { prefixOfName } from './cliPrefix';
import { formatInfo, NAME_KINDS, resolveKind, shown, view } from './cliView';
import { KIND_NAMES, kindOf, listNamesWithKinds, type LockInfo, type NameKind, type PrimitiveKind } from './introspection';
import { LockClient } from './LockClient';
import { checkListOptions } from './options';
import { redactUrls } from './redact';

const DEFAULT_TIMEOUT_MS = 5000;

const EXIT_CODES_HELP = `
Exit codes:
  0  done
  ${EXIT_NOTHING}  nothing to do: no such lock to force-unlock, or not confirmed
  ${EXIT_USAGE}  bad usage or input
  ${EXIT_REDIS}  Redis unreachable (refused, unknown host, wrong password, no reply within --timeout) or failing`;

/** The version in our package.json: dist/cli.js and src/cli.ts both sit one level below it. */
function version(): string {
  return (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
}

/** A clientId, or an owner field `<clientId>:<ownerId>` (nanoids). */
const HOLDER_ID = /^[\w-]{21}(:[\w-]{21})?$/;

function isHolder(field: string, holder: string): boolean {
  return field === holder || field.startsWith(`${holder}:`);
}

function describeHolders(fields: string[]): string {
  return fields.join(', ');
}

/**
 * Refuses a name given without --prefix whose helper keys are under a prefix (prefixOfName):
 * acted on without it, the wrong helper keys were read and written.
 */
async function refuseForeignName(program: Command, redis: Redis, keyPrefix: string, name: string): Promise<void> {
  // An explicit --prefix '' says the name is a prefixless client's, whatever keys a prefixed
  // client left under the same key (an opened latch's marker stays).
  if (keyPrefix !== '' || program.getOptionValueSource('prefix') !== 'default') return;
  const prefix = await prefixOfName(redis, name);
  if (prefix === undefined) return;
  throw new CliError(
    `${shown(name)} belongs to a client with keyPrefix ${JSON.stringify(prefix)} (its keys are there): run with --prefix ${JSON.stringify(prefix)} and the name ${JSON.stringify(name.slice(prefix.length))} (or with --prefix '' if it is a client's without a prefix); nothing done`,
    EXIT_USAGE,
  );
}

/** force-unlock of a semaphore or a latch: they have no holder to take permits or a count from. */
function refuseCounter(name: string, kind: NameKind): asserts kind is 'lock' | 'fair' | 'rw' {
  if (kind !== 'lock' && kind !== 'fair' && kind !== 'rw') throw new CliError(`${shown(name)} is a ${KIND_NAMES[kind]}: force-unlock removes locks only, nothing removed`, EXIT_USAGE);
}

/**
 * Refuses a --kind that names another kind than the name's keys show (a plain or fair lock, a
 * read-write lock, a semaphore, ...): read as the kind said, a held plain lock showed as a free
 * read-write lock, a latch as a semaphore with its count for permits.
 */
async function refuseOtherKind(client: LockClient, redis: Redis, keyPrefix: string, name: string, said: NameKind | undefined, command: 'inspect' | 'watch' | 'force-unlock'): Promise<void> {
  if (said === undefined) return;
  const { key } = client.getLock(name);
  const actual = await kindOf(redis, keyPrefix, key);
  // No keys (free, whatever its kind), not one of ours (the view says so, or Redis answers
  // WRONGTYPE), or one of the lock family.
  if (actual === undefined || (actual === 'fair' ? 'lock' : actual) === (said === 'fair' ? 'lock' : said)) return;
  if (command === 'force-unlock') refuseCounter(name, actual);
  const what = actual === 'lock' || actual === 'fair' ? 'plain or fair lock' : KIND_NAMES[actual];
  throw new CliError(`${shown(name)} is a ${what}, not a ${KIND_NAMES[said]}: ${command} it with --kind ${actual} (or without --kind); nothing ${command === 'force-unlock' ? 'removed' : 'shown'}`, EXIT_USAGE);
}

/** Asks before a force-unlock unless --yes; off a terminal nobody can answer, so it refuses. */
async function confirmForce(info: LockInfo, yes: boolean): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) throw new CliError('refusing to force-unlock without --yes when stdin is not a terminal', EXIT_USAGE);
  if (!(await confirm(`${formatInfo(info)}\nForce-unlock ${info.name}? [y/N] `))) throw new CliError('not confirmed: nothing removed', EXIT_NOTHING);
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    // Ctrl-C or Ctrl-D at the prompt rejects the question: not confirmed (exit 1), not an outage.
    return /^y(es)?$/i.test((await rl.question(question).catch(() => '')).trim());
  } finally {
    rl.close();
  }
}

function buildProgram(): Command {
  const program = new Command('rlock')
    .description('Inspect and administer rlock locks (Redisson-style locks on Redis).')
    .addOption(new Option('--url <url>', 'Redis URL (a password in it shows in ps: prefer REDIS_PASSWORD or --password-file)').env('REDIS_URL').default('redis://127.0.0.1:6379'))
    .addOption(new Option('--password-file <file>', 'read the password from this file (else from REDIS_PASSWORD, else from the URL)').env('REDIS_PASSWORD_FILE'))
    .addOption(new Option('--tls-ca <file>', 'PEM CA certificate(s) to verify the server with (rediss://)').env('REDIS_TLS_CA'))
    .addOption(new Option('--tls-cert <file>', 'PEM client certificate, for mutual TLS').env('REDIS_TLS_CERT'))
    .addOption(new Option('--tls-key <file>', 'PEM key of the client certificate').env('REDIS_TLS_KEY'))
    .option('--prefix <prefix>', 'key prefix of the locks (the LockClient keyPrefix)', '')
    .option('--json', 'print JSON for scripts', false)
    .option('--timeout <ms>', 'give up on Redis after this many ms without a reply (exit 3)', String(DEFAULT_TIMEOUT_MS))
    .version(version(), '-V, --version')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride()
    // Commander's own messages quote what was typed: a mistyped option may carry a URL's password.
    .configureOutput({ writeErr: (text) => process.stderr.write(redactUrls(text)) });

  program
    .command('inspect <name>')
    .description('who holds a lock, its TTL, and who waits on it; a fair lock with waiters, read-write lock, semaphore, permit-expirable semaphore or latch is recognised (or say --kind)')
    .addOption(new Option('--kind <kind>', 'what <name> is (default: recognised from its keys; a name with no keys says so)').choices([...NAME_KINDS]))
    .action(async (name: string, opts: { kind?: NameKind }) => {
      await withClient(program, [name], async (client, options, redis) => {
        await refuseForeignName(program, redis, options.prefix, name);
        await refuseOtherKind(client, redis, options.prefix, name, opts.kind, 'inspect');
        const { text, json } = await view(client, name, await resolveKind(client, redis, options.prefix, name, opts.kind), { redis, keyPrefix: options.prefix, prefixGiven: program.getOptionValueSource('prefix') !== 'default' });
        console.log(options.json ? JSON.stringify(json) : text);
      });
    });

  program
    .command('list')
    .description('the names under the prefix (SCAN, never KEYS): locks, and "<name> (<kind>)" for read-write locks, semaphores, permit-expirable semaphores and latches (while counting)')
    .option('--match <glob>', 'glob on the name', '*')
    .addOption(new Option('--kind <kind>', 'only names of this kind (a fair lock is a lock here)').choices(NAME_KINDS.filter((kind) => kind !== 'fair')))
    .action(async (opts: { match: string; kind?: PrimitiveKind }) => {
      const { match, count } = checkListOptions({ match: opts.match }); // bad input: exit 2 before Redis
      await withClient(program, [], async (_client, options, redis) => {
        const found: { name: string; kind: PrimitiveKind }[] = [];
        for await (const entry of listNamesWithKinds(redis, options.prefix, match, count)) {
          if (opts.kind && entry.kind !== opts.kind) continue;
          if (options.json) found.push(entry);
          else console.log(entry.kind === 'lock' ? shown(entry.name) : `${shown(entry.name)} (${entry.kind})`);
        }
        if (options.json) console.log(JSON.stringify(found));
      });
    });

  program
    .command('force-unlock <name>')
    .description('delete a lock held by the holder shown and wake its waiters (exit 1 when there was none); a fair lock with waiters or a read-write lock is recognised (or say --kind)')
    .option('-y, --yes', 'do not ask for confirmation', false)
    .option('--if-holder <id>', 'remove it only if this clientId (or clientId:ownerId) still holds it, checked atomically in Redis (plain and fair locks)')
    .addOption(new Option('--kind <kind>', 'what <name> is (default: recognised from its keys)').choices([...NAME_KINDS]))
    .action(async (name: string, opts: { yes: boolean; ifHolder?: string; kind?: NameKind }) => {
      const { ifHolder } = opts;
      if (ifHolder !== undefined && !HOLDER_ID.test(ifHolder)) throw new CliError(`--if-holder: a clientId or clientId:ownerId as inspect shows it, got ${JSON.stringify(ifHolder)}`, EXIT_USAGE);
      await withClient(program, [name], async (client, options, redis) => {
        await refuseForeignName(program, redis, options.prefix, name);
        const kind = await resolveKind(client, redis, options.prefix, name, opts.kind);
        refuseCounter(name, kind);
        if (kind === 'rw' && ifHolder !== undefined) throw new CliError('--if-holder: not for a read-write lock (its readers hold it together); force-unlock it without', EXIT_USAGE);
        // Before the prompt. Said to be a plain or fair lock, a read-write lock would be forced by
        // that kind's script, which refuses its hash (it would delete the hash alone); said to be
        // a read-write lock, a held plain or fair one looked free ("no lock ...", exit 1).
        await refuseOtherKind(client, redis, options.prefix, name, opts.kind, 'force-unlock');
        const info = await client.inspectAs(name, kind);
        if (!info.locked) throw new CliError(`no lock ${shown(name)} (key ${shown(info.key)}): nothing removed`, EXIT_NOTHING);
        const fields = info.holders.map((h) => `${h.clientId}:${h.ownerId}`);
        if (ifHolder !== undefined && !fields.some((field) => isHolder(field, ifHolder))) {
          throw new CliError(`${shown(name)} is held by ${describeHolders(fields)}, not ${ifHolder}: nothing removed`, EXIT_NOTHING);
        }
        await confirmForce(info, opts.yes);
        if (kind === 'rw') {
          // Its readers hold it together and the script removes them all, so the holders are
          // compared again here: one that took it while the operator answered is not removed
          // in their name. Not atomic as the other kinds' check is: a change within this one
          // round trip still goes.
          if (!opts.yes) {
            const now = await client.inspectAs(name, kind);
            const holdersNow = now.holders.map((h) => `${h.clientId}:${h.ownerId}`);
            if (now.mode !== info.mode || holdersNow.join('\n') !== fields.join('\n')) {
              throw new CliError(`${shown(name)} changed hands meanwhile (now ${holdersNow.length ? `held by ${describeHolders(holdersNow)}` : 'free'}): nothing removed`, EXIT_NOTHING);
            }
          }
          if (!(await client.getReadWriteLock(name).writeLock().forceUnlock())) throw new CliError(`no lock ${shown(name)}: it was released meanwhile, nothing removed`, EXIT_NOTHING);
        } else {
          // Only the holder shown (or named): one that took the lock since, while the operator
          // read and answered, is never the one removed. A plain or fair lock has one holder.
          const handle = kind === 'fair' ? client.getFairLock(name) : client.getLock(name);
          const { removed, holders } = await handle.forceUnlockIfHolder(ifHolder ?? fields[0]!);
          if (!removed) {
            throw new CliError(`${shown(name)} changed hands meanwhile (now ${holders.length ? `held by ${describeHolders(holders)}` : 'free'}): nothing removed`, EXIT_NOTHING);
          }
        }
        console.log(options.json ? JSON.stringify({ removed: true, lock: info }) : `removed ${formatInfo(info)}`);
      });
    });

  program
    .command('watch <name>')
    .description('a live view of a lock (or of any kind inspect recognises), refreshed until Ctrl-C')
    .option('--interval <ms>', 'refresh period in ms', '1000')
    .addOption(new Option('--kind <kind>', 'what <name> is (default: recognised from its keys at every refresh)').choices([...NAME_KINDS]))
    .action(async (name: string, opts: { interval: string; kind?: NameKind }) => {
      const interval = Number(opts.interval);
      if (!Number.isInteger(interval) || interval < 50 || interval > 3_600_000) throw new CliError('--interval: a whole number of ms from 50 to 3600000', EXIT_USAGE);
      await withClient(program, [name], async (client, options, redis) => {
        await refuseForeignName(program, redis, options.prefix, name);
        const stop = new AbortController();
        const onSignal = (): void => stop.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        const stopped = new Promise<undefined>((resolve) => stop.signal.addEventListener('abort', () => resolve(undefined), { once: true }));
        try {
          while (!stop.signal.aborted) {
            // Ctrl-C during a refresh that Redis does not answer stops now, not after --timeout:
            // closing the client ends the refresh.
            // The kind checked at every refresh: the name may change hands while watched.
            const refresh = (async () => {
              await refuseOtherKind(client, redis, options.prefix, name, opts.kind, 'watch');
              return view(client, name, await resolveKind(client, redis, options.prefix, name, opts.kind), { redis, keyPrefix: options.prefix, prefixGiven: program.getOptionValueSource('prefix') !== 'default' });
            })();
            refresh.catch(() => undefined);
            const frame = await Promise.race([refresh, stopped]);
            if (!frame) break;
            const { text, json } = frame;
            if (options.json) console.log(JSON.stringify({ at: new Date().toISOString(), ...json }));
            else {
              if (process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
              console.log(`${new Date().toISOString()}  (Ctrl-C to stop)\n${text}`);
            }
            // One listener for the whole watch (`stopped`): one per refresh would pile up.
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([new Promise((resolve) => (timer = setTimeout(resolve, interval))), stopped]);
            clearTimeout(timer);
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
      process.stderr.write(`rlock: ${redactUrls(error.message)}\n`);
      return error.exitCode;
    }
    // Bad input as well: a name of another kind than --kind said (a read-write lock forced as a plain one).
    if (error instanceof InvalidArgumentError || error instanceof LockUsageError) {
      process.stderr.write(`rlock: ${redactUrls(error.message)}\n`);
      return EXIT_USAGE;
    }
    // A key of another type than the kind asked for (--kind lock on a semaphore, a list that is
    // not ours): bad input, not a failing Redis.
    if (error instanceof RedisCommandError && error.code === 'WRONGTYPE') {
      process.stderr.write(`rlock: the key holds another kind than asked (see rlock list, or leave --kind out): ${redactUrls(error.message)}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof RedisCommandError || error instanceof LockError) {
      process.stderr.write(`rlock: ${redactUrls(error.message)}\n`);
      return EXIT_REDIS;
    }
    process.stderr.write(`rlock: ${redactUrls((error as Error)?.message ?? String(error))}\n`);
    return EXIT_REDIS;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
