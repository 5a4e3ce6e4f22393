import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis, Result } from 'ioredis';

/**
 * The Lua scripts, one file per operation under `lua/`, each named `<command>-<numberOfKeys>.lua`
 * (no count: the caller passes it, as `renew` does). Registering them with `defineCommand` gives
 * EVALSHA with a transparent fallback to EVAL on NOSCRIPT, e.g. after `SCRIPT FLUSH` or a restart.
 */
const SCRIPT_FILES = ['acquire-1.lua', 'release-3.lua', 'forceUnlock-2.lua', 'renew.lua'] as const;

const COMMAND_PREFIX = 'rlock_';

/** Classic pub/sub, or sharded pub/sub (Redis >= 7 Cluster: a message goes to one shard only). */
export type PublishCommand = 'publish' | 'spublish';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    rlock_acquire(key: string, leaseMs: number, field: string): Result<number | null, Context>;
    rlock_release(
      key: string,
      channel: string,
      latchKey: string,
      field: string,
      message: string,
      latchTtlMs: number,
      publishCommand: PublishCommand,
    ): Result<0 | 1 | null, Context>;
    rlock_forceUnlock(key: string, channel: string, message: string, publishCommand: PublishCommand): Result<string[], Context>;
    rlock_renew(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Result<(0 | 1)[], Context>;
  }
}

let sources: { name: string; numberOfKeys?: number; lua: string }[] | undefined;

function loadSources(): NonNullable<typeof sources> {
  sources ??= SCRIPT_FILES.map((file) => {
    const match = /^(\w+?)(?:-(\d+))?\.lua$/.exec(file);
    if (!match) throw new Error(`bad script file name ${file}`);
    return {
      name: COMMAND_PREFIX + match[1],
      numberOfKeys: match[2] === undefined ? undefined : Number(match[2]),
      lua: readFileSync(join(__dirname, 'lua', file), 'utf8'),
    };
  });
  return sources;
}

/** Registers the scripts on a connection once; a connection shared by two clients is fine. */
export function defineScripts(redis: Redis | Cluster): void {
  for (const { name, numberOfKeys, lua } of loadSources()) {
    if (typeof (redis as unknown as Record<string, unknown>)[name] === 'function') continue;
    redis.defineCommand(name, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
  }
}
