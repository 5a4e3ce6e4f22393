// A password (in a URL or in options) never shows in errors, events, inspect(), diagnostics or the CLI.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { diagnostics, InvalidArgumentError, LockClient, RedisCommandError, RedisUnreachableError } from '../src';
import { displayUrl, redactUrls } from '../src/redact';
import { runCli } from './helpers/cliInProcess';
import { usePrivateRedis } from './helpers/privateRedis';
import { until } from './helpers/time';

const redis = usePrivateRedis();
const PASSWORD = 'Pw-9f3k2-never-print';
const WRONG = 'Wrong-7q1z-never-print';
const SECRET = /never-print/;

/** Everything a logger could show of a value: its properties, causes and nested objects. */
const shown = (value: unknown): string => `${String(value)}\n${inspect(value, { depth: Infinity, showHidden: true })}\n${JSON.stringify(value) ?? ''}`;

const clients: LockClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

beforeAll(async () => {
  await redis.admin.call('ACL', 'SETUSER', 'svc', 'on', `>${PASSWORD}`, '~*', '&*', '+@all');
});

const url = (password: string): string => `redis://svc:${password}@127.0.0.1:${redis.server.port}`;

function track(client: LockClient): LockClient {
  clients.push(client);
  return client;
}

test('redactUrls and displayUrl hide the password of a URL', () => {
  expect(redactUrls('redis://svc:s3cret@host:6379/0')).toBe('redis://svc:***@host:6379/0');
  expect(redactUrls('rediss://:s3cret@host')).toBe('rediss://:***@host');
  expect(redactUrls('redis://s3cret@host')).toBe('redis://***@host');
  expect(redactUrls('redis://svc:p@ss@host')).toBe('redis://svc:***@host');
  expect(redactUrls('connect to redis://host:6379 failed')).toBe('connect to redis://host:6379 failed');
  expect(displayUrl('http:/svc:s3cret@host')).toBe('(not shown: it may hold a password)');
  // An `@` and a `/` in the password: the parser cuts it at the `/`, and its tail passed for the host.
  expect(displayUrl('redis://:pa@ss/x@127.0.0.1:6379')).toBe('(not shown: it may hold a password)');
  expect(displayUrl('redis://:pw@127.0.0.1:6379/2')).toBe('redis://:***@127.0.0.1:6379/2');
  // ioredis takes options from the query too (its own parser accepts `?password=`).
  expect(redactUrls('redis://host:6379/0?db=1&password=s3cret&x=1')).toBe('redis://host:6379/0?db=1&password=***&x=1');
  expect(redactUrls('rediss//host?Password=s3cret')).toBe('rediss//host?Password=***');
  expect(displayUrl('rediss//127.0.0.1:7402?password=s3cret#frag')).toBe('rediss//127.0.0.1:7402');
  expect(displayUrl('redis:127.0.0.1?pass=s3cret')).toBe('redis:127.0.0.1');
  // A password with a `#` or `?` (not encoded): cut at it before redacting, its start showed.
  expect(displayUrl('redis://user:abc#def@127.0.0.1:7841')).toBe('redis://user:***@127.0.0.1:7841');
  expect(displayUrl('redis://:s3cr?et@127.0.0.1:7841')).toBe('redis://:***@127.0.0.1:7841');
});

test('a wrong password, in the URL or in options, shows in no error (nor its causes)', async () => {
  expect.assertions(6);
  for (const redisOption of [url(WRONG), { host: '127.0.0.1', port: redis.server.port, username: 'svc', password: WRONG }]) {
    const client = track(new LockClient({ redis: redisOption }));
    const error = await client.getLock('x').tryLock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisCommandError);
    expect((error as RedisCommandError).code).toBe('WRONGPASS');
    expect(shown(error)).not.toMatch(SECRET); // ioredis put the AUTH arguments on the cause
  }
});

test('a mistyped URL holding a password is not echoed by the option check', () => {
  // The last two pass a scheme check; ioredis's own TypeError for them holds the whole URL.
  for (const bad of [`http://svc:${PASSWORD}@host`, `redis:/svc:${PASSWORD}@host`, `redis//svc:${PASSWORD}@host`, `redis://svc:${PASSWORD}@host:63a79`, `redis://svc:${PASSWORD}@[::1`]) {
    const error = (() => {
      try {
        new LockClient({ redis: bad });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(shown(error)).not.toMatch(SECRET);
  }
});

test('a Cluster whose startup nodes are URLs with a password: RedisUnreachableError names them without it', async () => {
  const client = track(new LockClient({ redis: { clusterNodes: [`redis://svc:${PASSWORD}@127.0.0.1:1`] }, offlineTimeout: 200 }));
  const error = await client.getLock('x').tryLock().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RedisUnreachableError);
  expect((error as Error).message).toContain('127.0.0.1:1');
  expect(shown(error)).not.toMatch(SECRET);
});

test('events, diagnostics messages and inspect() of a client with a password hold none of it', async () => {
  const messages: unknown[] = [];
  const record = (message: unknown): void => void messages.push(message);
  const channels = Object.values(diagnostics);
  for (const channel of channels) subscribe(channel.name, record);
  try {
    const client = track(new LockClient({ redis: url(PASSWORD), watchdogTimeout: 300, name: 'svc-client' }));
    const events: unknown[] = [];
    client.on('lockLost', (event) => events.push(event));
    client.on('renewalFailed', (error) => events.push(error));
    const lock = client.getLock('a');
    await lock.lock();
    const waiter = client.getLock('a');
    const waiting = waiter.tryLock({ waitTime: 10_000, leaseTime: 5000 });
    await until('the waiter parked', () => client.stats.waiters === 1);
    const info = await client.inspect('a');
    expect(info.holders[0]?.clientName).toBe('svc-client');
    await lock.unlock();
    expect(await waiting).toBe(true);
    await waiter.forceUnlock();
    await lock.lock();
    await redis.admin.del('a'); // the watchdog reports the loss
    await until('the loss was reported', () => events.length > 0);
    // A renewal refused for want of authentication: the password changed under the client.
    await lock.lock();
    await redis.admin.call('ACL', 'SETUSER', 'svc', 'resetpass', `>${WRONG}`);
    await redis.admin.call('CLIENT', 'KILL', 'USER', 'svc');
    await until('a renewal failed', () => messages.some((m) => (m as { error?: unknown }).error instanceof Error && !(m as { name?: unknown }).name));
    expect(messages.length).toBeGreaterThan(6);
    // Logging the client or a handle (console.log, a logger's serializer) shows no connection options.
    expect(shown(client)).not.toMatch(SECRET);
    expect(shown([lock, waiter, client.getFairLock('f')])).not.toMatch(SECRET);
    expect(inspect(lock)).toMatch(/name: 'a'/);
    expect(shown(messages)).not.toMatch(SECRET);
    expect(shown(events)).not.toMatch(SECRET);
    expect(shown(info)).not.toMatch(SECRET);
  } finally {
    for (const channel of channels) unsubscribe(channel.name, record);
    await redis.admin.call('ACL', 'SETUSER', 'svc', 'resetpass', `>${PASSWORD}`);
  }
});

test('the CLI reads the password from REDIS_PASSWORD or a file, and prints it nowhere', async () => {
  await track(new LockClient({ redis: redis.server.url, name: 'holder' })).getLock('held').lock();
  const dir = mkdtempSync(join(tmpdir(), 'rlock-secret-'));
  try {
    const passwordFile = join(dir, 'password');
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    const bare = `redis://svc@127.0.0.1:${redis.server.port}`;
    const runs = {
      inUrl: await runCli(['inspect', 'held'], { REDIS_URL: url(PASSWORD) }),
      fromEnv: await runCli(['--url', bare, 'inspect', 'held'], { REDIS_PASSWORD: PASSWORD }),
      fromFile: await runCli(['--url', bare, '--password-file', passwordFile, '--json', 'inspect', 'held']),
      help: await runCli(['--help'], { REDIS_URL: url(PASSWORD), REDIS_PASSWORD: PASSWORD }),
      wrong: await runCli(['inspect', 'held'], { REDIS_URL: url(WRONG) }),
      unreachable: await runCli(['--url', `redis://svc:${PASSWORD}@127.0.0.1:1`, 'inspect', 'held']),
      notRedis: await runCli(['--url', `http://svc:${PASSWORD}@127.0.0.1`, 'inspect', 'held']),
      oneSlash: await runCli(['--url', `http:/svc:${PASSWORD}@127.0.0.1`, 'inspect', 'held']),
      noFile: await runCli(['--url', bare, '--password-file', join(dir, 'missing'), 'inspect', 'held']),
    };
    for (const name of ['inUrl', 'fromEnv', 'fromFile'] as const) {
      expect({ name, code: runs[name].code, stderr: runs[name].stderr }).toEqual({ name, code: 0, stderr: '' });
      expect(runs[name].stdout).toMatch(/held|"locked":true/);
    }
    expect(runs.help.stdout).toMatch(/--password-file/);
    expect(runs.wrong).toMatchObject({ code: 3, stderr: expect.stringMatching(/^rlock: .*WRONGPASS invalid username-password pair/) });
    expect(runs.unreachable).toMatchObject({ code: 3, stderr: expect.stringMatching(/^rlock: cannot reach Redis at 127\.0\.0\.1:1: /) });
    expect(runs.notRedis).toEqual({ code: 2, stdout: '', stderr: 'rlock: not a Redis URL (redis:// or rediss://): http://svc:***@127.0.0.1\n' });
    expect(runs.oneSlash).toEqual({ code: 2, stdout: '', stderr: 'rlock: not a Redis URL (redis:// or rediss://): (not shown: it may hold a password)\n' });
    expect(runs.noFile).toMatchObject({ code: 2, stderr: expect.stringMatching(/^rlock: --password-file: cannot read .*missing: ENOENT\n$/) });
    expect(shown(runs)).not.toMatch(SECRET);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
