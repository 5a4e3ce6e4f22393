import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { databaseOf, selectingScript } from './database';

/**
 * The Lua scripts, grouped by primitive under `lua/<primitive>/`, one file per operation named
 * `<operation>-<numberOfKeys>.lua` (no count: the caller passes it, as `renew` does). A line
 * `--@include <file>` pulls in a shared fragment from `lua/includes/`. Registering
 * them with `defineCommand` gives EVALSHA with a transparent fallback to EVAL on NOSCRIPT, e.g.
 * after `SCRIPT FLUSH` or a restart. Commands are named `rlock_<operation>` for the plain lock
 * and `rlock_<primitive>_<operation>` for the others.
 */
const LUA_DIR = join(__dirname, '..', 'lua');

/** Every `lua/<primitive>/<operation>.lua`; `lua/includes/` holds fragments, not scripts. */
function scriptFiles(): string[] {
  return readdirSync(LUA_DIR, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== 'includes')
    .flatMap((folder) => readdirSync(join(LUA_DIR, folder.name)).filter((file) => file.endsWith('.lua')).map((file) => `${folder.name}/${file}`))
    .sort();
}

/** Classic pub/sub, or sharded pub/sub (Redis >= 7 Cluster: a message goes to one shard only). */
export type PublishCommand = 'publish' | 'spublish';

/**
 * The script commands `defineCommand` adds to a connection, for the plain and the fair lock; a
 * primitive with scripts of its own declares their signatures beside it the same way. Kept out
 * of ioredis's own types (no module augmentation): a user's ioredis types must not change
 * because they installed rlock.
 */
export interface ScriptCommands {
  rlock_acquire(key: string, clientsKey: string, clientsExpiryKey: string, leaseMs: number, field: string, join: 0 | 1, queueTimeoutMs: number, reentry?: 0 | 1): Promise<number | 'afresh' | null>;
  rlock_release(
    key: string,
    clientsKey: string,
    clientsExpiryKey: string,
    latchKey: string,
    field: string,
    latchTtlMs: number,
    publishCommand: PublishCommand,
    wakeChannelPrefix: string,
    trustReceivers: 0 | 1,
    queueTimeoutMs: number,
    stayInLine: 0 | 1,
    mustYield: 0 | 1,
    handToField?: string,
    handToLeaseMs?: number,
  ): Promise<0 | 1 | 2 | 3 | 4 | null>;
  rlock_forceUnlock(key: string, clientsKey: string, clientsExpiryKey: string, publishCommand: PublishCommand, wakeChannelPrefix: string, trustReceivers: 0 | 1, ifHolder: string): Promise<[-1 | 0 | 1, ...string[]]>;
  rlock_leave(key: string, clientsKey: string, clientsExpiryKey: string, clientId: string, publishCommand: PublishCommand, wakeChannelPrefix: string, trustReceivers: 0 | 1): Promise<0 | 1>;
  rlock_heartbeat(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<(0 | 1)[]>;
  rlock_renew(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<(0 | 1)[]>;
  rlock_acquireAll(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<[index: number, pttl: number] | null>;
  rlock_fairLock_acquire(
    key: string,
    queueKey: string,
    expiryKey: string,
    member: string,
    enqueue: 0 | 1,
    reentrant: 0 | 1,
    queueTimeoutMs: number,
    grantChannelPrefix: string,
    publishCommand: PublishCommand,
    trustReceivers: 0 | 1,
  ): Promise<[pttl: number, redisMicros: number] | 0 | null>;
  rlock_fairLock_release(
    key: string,
    queueKey: string,
    expiryKey: string,
    latchKey: string,
    field: string,
    latchTtlMs: number,
    queueTimeoutMs: number,
    grantChannelPrefix: string,
    publishCommand: PublishCommand,
    trustReceivers: 0 | 1,
    releasingClientId: string,
  ): Promise<0 | 1 | string | null>;
  rlock_fairLock_leave(
    key: string,
    queueKey: string,
    expiryKey: string,
    member: string,
    queueTimeoutMs: number,
    grantChannelPrefix: string,
    publishCommand: PublishCommand,
    trustReceivers: 0 | 1,
  ): Promise<0 | 1>;
  rlock_fairLock_forceUnlock(
    key: string,
    queueKey: string,
    expiryKey: string,
    queueTimeoutMs: number,
    grantChannelPrefix: string,
    publishCommand: PublishCommand,
    trustReceivers: 0 | 1,
    ifHolder: string,
  ): Promise<[-1 | 0 | 1, ...string[]]>;
  rlock_fairLock_heartbeat(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>;
}

/** A connection with the scripts registered. */
export type ScriptedRedis = (Redis | Cluster) & ScriptCommands;

const COMMAND_PREFIX = 'rlock_';

let sources: { name: string; numberOfKeys?: number; lua: string }[] | undefined;

/**
 * A file with its `--@include` lines replaced by the fragments, which may include others in turn;
 * each fragment once per script, so that a fragment may name what it uses (`time.lua`) however
 * many of the script's other fragments name it too.
 */
export function readWithIncludes(file: string, included = new Set<string>()): string {
  return readFileSync(join(LUA_DIR, file), 'utf8').replace(/^--@include (\S+)$/gm, (_, name: string) => {
    if (included.has(name)) return `-- ${name}: included above`;
    included.add(name);
    return readWithIncludes(join('includes', name), included);
  });
}

function loadSources(): NonNullable<typeof sources> {
  sources ??= scriptFiles().map((file) => {
    const match = /^(\w+)\/(\w+?)(?:-(\d+))?\.lua$/.exec(file);
    if (!match) throw new Error(`bad script file name ${file}`);
    const [, primitive, operation, keys] = match;
    return {
      name: COMMAND_PREFIX + (primitive === 'lock' ? operation : `${primitive}_${operation}`),
      numberOfKeys: keys === undefined ? undefined : Number(keys),
      lua: readWithIncludes(file),
    };
  });
  return sources;
}

/** Registers the scripts on a connection once; a connection shared by two clients is fine. */
export function defineScripts(redis: Redis | Cluster): ScriptedRedis {
  const db = databaseOf(redis);
  for (const { name, numberOfKeys, lua } of loadSources()) {
    if (typeof (redis as unknown as Record<string, unknown>)[name] === 'function') continue;
    const source = selectingScript(lua, db);
    redis.defineCommand(name, numberOfKeys === undefined ? { lua: source } : { numberOfKeys, lua: source });
  }
  return redis as ScriptedRedis;
}

/**
 * A script's source, SHA1 and key count, by command name and database (`selectingScript`): for a
 * caller that must send it as a raw EVALSHA (no transparent fallback: `syncedAcquire`, whose
 * WAIT must follow the script's run).
 */
export function scriptOf(command: string, db = 0): { lua: string; sha: string; numberOfKeys: number | undefined } {
  const id = `${db}:${command}`;
  let script = scriptsByName.get(id);
  if (!script) {
    const found = loadSources().find((source) => source.name === command);
    if (!found) throw new Error(`no script ${command}`);
    const lua = selectingScript(found.lua, db);
    script = { lua, sha: createHash('sha1').update(lua).digest('hex'), numberOfKeys: found.numberOfKeys };
    scriptsByName.set(id, script);
  }
  return script;
}

/** By `<db>:<command>`. */
const scriptsByName = new Map<string, { lua: string; sha: string; numberOfKeys: number | undefined }>();
