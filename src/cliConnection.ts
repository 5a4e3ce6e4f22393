// The `rlock` command's connection: the global options checked before anything connects, the
// connection itself (fail fast, no retry loop), and the errors of an unreachable Redis.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Redis, type RedisOptions, ReplyError } from 'ioredis';
import { CliError, EXIT_REDIS, EXIT_USAGE } from './cliError';
import { RedisCommandError } from './errors';
import { LockClient } from './LockClient';
import { checkKeyPrefix, checkName, MAX_DATABASE } from './options';
import { displayUrl, redactUrls } from './redact';

export interface GlobalOptions {
  url: string;
  prefix: string;
  json: boolean;
  passwordFile?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  timeout: string;
}

function timeoutOf(options: GlobalOptions): number {
  const ms = Number(options.timeout);
  if (!/^\d+$/.test(options.timeout) || ms < 1 || ms > 3_600_000) throw new CliError(`--timeout: a whole number of ms from 1 to 3600000, got ${options.timeout}`, EXIT_USAGE);
  return ms;
}

/** A call that got no reply within --timeout: the server accepts connections but does not answer. */
function isTimeout(error: unknown): boolean {
  const cause = error instanceof RedisCommandError ? error.cause : error;
  return (cause as Error | undefined)?.message === 'Command timed out';
}

function readSecretFile(option: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(`${option}: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, EXIT_USAGE);
  }
}

/**
 * The connection options beyond the URL: the password from `REDIS_PASSWORD` or a file (so that
 * it need not be in argv, which `ps` shows to every user), and the TLS files.
 */
function connectionOptions(options: GlobalOptions): RedisOptions {
  const extra: RedisOptions = {};
  if (options.passwordFile) extra.password = readSecretFile('--password-file', options.passwordFile).replace(/\r?\n$/, '');
  else if (process.env.REDIS_PASSWORD) extra.password = process.env.REDIS_PASSWORD;
  if (options.tlsCa || options.tlsCert || options.tlsKey) {
    if (!options.tlsCert !== !options.tlsKey) throw new CliError('--tls-cert and --tls-key go together (a client certificate and its key)', EXIT_USAGE);
    extra.tls = {
      ...(options.tlsCa && { ca: readSecretFile('--tls-ca', options.tlsCa) }),
      ...(options.tlsCert && { cert: readSecretFile('--tls-cert', options.tlsCert) }),
      ...(options.tlsKey && { key: readSecretFile('--tls-key', options.tlsKey) }),
    };
  }
  return extra;
}

/**
 * The URL's host, unless the URL may hold a password the parser split wrongly (an `@` or `/` in
 * it, not encoded): then part of the password would pass for the host (see displayUrl).
 */
function hostShown(url: string): string {
  const shown = displayUrl(url);
  return shown.startsWith('(not shown') ? shown : new URL(url).host;
}

/** The database a URL names in its path (`redis://host:port/2`), 0 without one; anything else is refused. */
function databaseOf(url: URL, shown: string): number {
  if (url.searchParams.has('db')) throw new CliError(`give the database in the URL's path (redis://host:port/2), not as ?db=: ${shown}`, EXIT_USAGE);
  if (url.pathname === '' || url.pathname === '/') return 0;
  const number = /^\/(\d+)$/.exec(url.pathname);
  if (!number) throw new CliError(`the URL's path must be a database number (redis://host:port/2): ${shown}`, EXIT_USAGE);
  const db = Number(number[1]);
  if (db > MAX_DATABASE) throw new CliError(`the URL's database must be a number from 0 to ${MAX_DATABASE}: ${shown}`, EXIT_USAGE);
  return db;
}

/** Where and how to connect, and the key prefix: all of it checked before any connection is made. */
interface Target {
  href: string;
  db: number;
  timeout: number;
  extra: RedisOptions;
  prefix: string;
}

/**
 * The checked global options, and the names the command will act on checked with the library's
 * own name check: bad input exits 2 before any connection is made. Checked after connecting, an
 * unreachable Redis turned it into exit 3, and a bad name first cost the prefix lookup.
 */
function targetOf(options: GlobalOptions, names: string[]): Target {
  let url: URL;
  const shown = displayUrl(options.url); // the URL may carry a password: never print it
  try {
    url = new URL(options.url);
  } catch {
    throw new CliError(`not a Redis URL: ${shown}`, EXIT_USAGE);
  }
  if ((url.protocol !== 'redis:' && url.protocol !== 'rediss:') || !url.host) throw new CliError(`not a Redis URL (redis:// or rediss://): ${shown}`, EXIT_USAGE);
  // Selected by connect(), where a refusal is seen: from the URL, ioredis's SELECT only emitted an error,
  // and every command (force-unlock too) went to database 0.
  const db = databaseOf(url, shown);
  url.pathname = '';
  const timeout = timeoutOf(options);
  const extra = connectionOptions(options);
  if (extra.tls && url.protocol !== 'rediss:') throw new CliError('--tls-* options need a rediss:// URL', EXIT_USAGE);
  // A password from the environment or a file wins over one in the URL: ioredis would keep the
  // URL's (even an empty one), so the user name moves to the options too.
  if (extra.password !== undefined) {
    if (url.username) extra.username = decodeURIComponent(url.username);
    url.username = '';
    url.password = '';
  }
  const prefix = checkKeyPrefix(options.prefix);
  for (const name of names) checkName(name, prefix);
  return { href: url.href, db, timeout, extra, prefix };
}

async function connect(options: GlobalOptions, { href, db, timeout, extra, prefix }: Target): Promise<{ client: LockClient; close: () => Promise<void>; redis: Redis; connectionError: () => Error | undefined }> {
  // Fail fast: an operator wants one clear line, not a retry loop. No ready check: its INFO is
  // refused under a least-privilege ACL, and ioredis would print a warning into our output.
  // commandTimeout: a server that accepts connections but never answers (paused, overloaded)
  // must not hang the command.
  const redis = new Redis(href, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeout,
    commandTimeout: timeout,
    disconnectTimeout: 0,
    enableReadyCheck: false,
    ...extra,
  });
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => (lastError = error));
  let timer: NodeJS.Timeout | undefined;
  try {
    // connectTimeout ends with the TCP handshake; the ready check after it may never be answered.
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no reply within ${timeout} ms (--timeout)`)), timeout);
      }),
    ]);
  } catch (error) {
    redis.disconnect();
    throw new CliError(`cannot reach Redis at ${hostShown(options.url)}: ${redactUrls((lastError ?? (error as Error)).message)}`, EXIT_REDIS);
  } finally {
    clearTimeout(timer);
  }
  if (db !== 0) {
    try {
      await redis.select(db); // bounded by commandTimeout
    } catch (error) {
      redis.disconnect();
      throw new CliError(`cannot use database ${db}: ${redactUrls((error as Error).message)}`, EXIT_REDIS);
    }
  }
  let client: LockClient;
  try {
    // A refusal the library would ride out (a demoted master's READONLY, a slot in flux) is
    // ridden out for --timeout at most, as every other wait of the command is.
    client = new LockClient({ redis, keyPrefix: prefix, name: 'rlock-cli', offlineTimeout: timeout });
  } catch (error) {
    redis.disconnect(); // the connection made above would keep the process alive
    throw error;
  }
  return {
    client,
    redis,
    connectionError: () => lastError,
    close: async () => {
      await client.close();
      redis.disconnect(); // no QUIT: a server that stopped answering would keep us waiting for its reply
    },
  };
}

/** Runs `run` connected, once the options and the `names` acted on are checked (targetOf). */
export async function withClient<T>(program: Command, names: string[], run: (client: LockClient, options: GlobalOptions, redis: Redis) => Promise<T>): Promise<T> {
  const options = program.opts<GlobalOptions>();
  const { client, close, redis, connectionError } = await connect(options, targetOf(options, names));
  try {
    return await run(client, options, redis);
  } catch (error) {
    if (isTimeout(error)) throw new CliError(`cannot reach Redis at ${hostShown(options.url)}: no reply within ${options.timeout} ms (--timeout)`, EXIT_REDIS);
    // Without the ready check, connect() resolves before Redis answers AUTH: a refused password
    // then shows as "Connection is closed", and only the connection's error event says why.
    const why = connectionError();
    if (why && error instanceof Error && !(error instanceof CliError) && !(error.cause instanceof ReplyError) && !(error instanceof ReplyError)) {
      throw new CliError(`${error.message}; last connection error: ${why.message}`, EXIT_REDIS);
    }
    throw error;
  } finally {
    await close();
  }
}
