import { hostname } from 'node:os';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { InvalidArgumentError } from './errors';
import { hashTagOf, INTERNAL_KEY_MARK } from './names';
import { redactUrls } from './redact';

/** The longest wait or lease accepted, in ms: Node's timer limit (about 24.8 days). */
export const MAX_TIME_MS = 2_147_483_647;
/** The longest lock name accepted, in UTF-8 bytes; longer keys cost memory on every call. */
export const MAX_NAME_BYTES = 1024;
/** The highest database number: Redis reads `databases` (and SELECT's argument) as an int. */
export const MAX_DATABASE = 2_147_483_647;
/** The shortest watchdog timeout: renewals every third of it must still fit between round trips. */
export const MIN_WATCHDOG_TIMEOUT_MS = 30;
/** Default `offlineTimeout`: rides out a Redis restart or a failover, not an outage. */
export const DEFAULT_OFFLINE_TIMEOUT_MS = 10_000;

export interface LockClientOptions {
  /**
   * Where the locks live: a `redis://` URL, ioredis options (also `{ sentinels, name }` for
   * Sentinel), or a connected ioredis `Redis`/`Cluster`. Connections the client creates it also
   * closes; one passed in is left open.
   */
  redis: string | RedisOptions | ClusterConnectionOptions | Redis | Cluster;
  /** Lease of a lock taken without `leaseTime`, in ms, renewed every third of it. Default 30 000. */
  watchdogTimeout?: number;
  /** Prepended to every lock name to make its Redis key. Default `''`. */
  keyPrefix?: string;
  /**
   * A human name shown by `inspect()` and `rlock inspect` beside the clientId, so that an
   * operator can tell which service holds a lock. Default `<hostname>:<pid>`.
   */
  name?: string;
  /**
   * Opt-in: after each successful acquire of an `RLock`, a `FencedLock` or an expirable permit
   * (not the fair lock, the read-write lock or the plain semaphore), `WAIT` until `replicas` replicas have the lock, at
   * most `timeout` ms; when fewer acknowledge, the hold is given back and the attempt counts as
   * failed (Redisson's synced acquire). Closes the failover window of asynchronous replication
   * at the cost of the replication delay; WAIT holds the command connection meanwhile.
   */
  syncReplicas?: { replicas: number; timeout: number };
  /**
   * How long a call made while the connection is down waits for it to come back, in ms, before
   * it rejects with `RedisUnreachableError` (nothing is sent). Default 10 000; 0 fails at once.
   * A client that has never connected fails at once when its connection attempt fails
   * (refused, unknown host, wrong password): a wrong address is reported, not waited out.
   */
  offlineTimeout?: number;
  /**
   * Fair locks: how long a queued waiter's entry lives unless its client refreshes it (every
   * third of it, one call per client). It bounds what a stopped or unreachable waiting process
   * costs the queue (all its waiters together, once), and how long a lock handed to a process
   * that no longer answers stays with it. Default 5 000 ms.
   */
  queueTimeout?: number;
}

/** A Cluster for the client to create (and close): ioredis's `new Cluster(clusterNodes, clusterOptions)`. */
export interface ClusterConnectionOptions {
  clusterNodes: ClusterNode[];
  clusterOptions?: ClusterOptions;
}

/** Options of `client.listLocks()`. */
export interface ListLocksOptions {
  /** A glob on the lock name (the key prefix is added). Default `*`. */
  match?: string;
  /** SCAN's COUNT hint. Default 100. */
  count?: number;
}

export interface LockOptions {
  /** Lease in ms after which the lock expires by itself; no watchdog. Omit to use the watchdog. */
  leaseTime?: number;
  /** Aborting rejects the call with `signal.reason` and leaves nothing behind. */
  signal?: AbortSignal;
}

export interface TryLockOptions extends LockOptions {
  /** How long to wait for the lock, in ms. Default 0: a single attempt. */
  waitTime?: number;
}

/** `withLock` waits as long as it takes unless `waitTime` is given. */
export type WithLockOptions = TryLockOptions;

export interface ResolvedClientOptions {
  watchdogTimeout: number;
  keyPrefix: string;
  name: string;
  syncReplicas: { replicas: number; timeout: number } | undefined;
  offlineTimeout: number;
  queueTimeout: number;
}

/** The smallest fair-lock queue timeout: it is refreshed every third of it. */
export const MIN_QUEUE_TIMEOUT_MS = 300;

const CLIENT_OPTION_KEYS = ['redis', 'watchdogTimeout', 'keyPrefix', 'name', 'syncReplicas', 'offlineTimeout', 'queueTimeout'];
const SYNC_OPTION_KEYS = ['replicas', 'timeout'];
const LIST_OPTION_KEYS = ['match', 'count'];
const MAX_CLIENT_NAME_LENGTH = 128;
const LOCK_OPTION_KEYS = ['leaseTime', 'signal'];
const TRY_LOCK_OPTION_KEYS = ['waitTime', 'leaseTime', 'signal'];

export function describe(value: unknown): string {
  if (typeof value === 'string') {
    const shown = redactUrls(value); // before cutting, or a cut could hide the `@` that marks a password
    return JSON.stringify(shown.length > 40 ? `${shown.slice(0, 40)}...` : shown);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || typeof value !== 'object') return String(value);
  if (Array.isArray(value)) return 'an array';
  const kind = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof kind === 'string' && kind !== '' && kind !== 'Object' ? `a ${kind}` : 'an object';
}

export function checkPlainObject(argument: string, value: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    // Redisson's tryLock(waitTime, leaseTime, unit) and redlock's acquire(resources, ttl) take times as arguments.
    const times = allowed.filter((key) => key.endsWith('Time'));
    const hint = typeof value === 'number' && times.length > 0 ? ` (times go in the options object, in ms: { ${times.map((key) => `${key}: ...`).join(', ')} })` : '';
    throw new InvalidArgumentError(argument, `must be an object, got ${describe(value)}${hint}`);
  }
  // An AbortSignal, a Date or a Map has no keys of its own, so it passed as "no options": a
  // `lock(signal)` written for `lock({ signal })` took the lock and never heard the signal.
  if (Object.prototype.toString.call(value) !== '[object Object]') {
    throw new InvalidArgumentError(argument, `must be a plain options object, got ${describe(value)}${value instanceof AbortSignal ? ' (pass it as { signal })' : ''}`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      // lock()/acquire() wait as long as it takes: a waitTime belongs to the try… calls and the scopes.
      const hint = key === 'waitTime' ? ' (this call waits as long as it takes, until its signal aborts: a waitTime goes to tryLock(), tryAcquire(), or the with… scope)' : '';
      throw new InvalidArgumentError(`${argument}.${key}`, `is not an option; expected one of ${allowed.join(', ')}${hint}`);
    }
  }
  return value as Record<string, unknown>;
}

/** A whole number of ms within [min, MAX_TIME_MS], or undefined when absent. */
export function checkTime(argument: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIME_MS) {
    throw new InvalidArgumentError(
      argument,
      `must be a whole number of milliseconds from ${min} to ${MAX_TIME_MS}, got ${describe(value)}`,
    );
  }
  return value;
}

export function checkSignal(argument: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) {
    throw new InvalidArgumentError(argument, `must be an AbortSignal, got ${describe(value)}`);
  }
  return value;
}

/** Checks a lock name; with `keyPrefix`, also that the whole key stays within MAX_NAME_BYTES. */
export function checkName(name: unknown, keyPrefix = ''): string {
  if (typeof name !== 'string') {
    throw new InvalidArgumentError('name', `must be a string, got ${describe(name)}`);
  }
  if (name.length === 0) throw new InvalidArgumentError('name', 'must not be empty');
  // The library's own keys are `<keyPrefix>rlock__...`: a name there could be another lock's
  // queue. Anywhere in the key, not only at its start: under a prefix "app:", the prefixless name
  // "app:rlock__kind:{app:s}" was semaphore s's kind marker (and "rlo" + "ck__..." joins to one).
  if ((keyPrefix + name).includes(INTERNAL_KEY_MARK)) {
    throw new InvalidArgumentError('name', `must not contain "${INTERNAL_KEY_MARK}" (nor make it with the key prefix): the library's own keys do`);
  }
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new InvalidArgumentError('name', `must be at most ${MAX_NAME_BYTES} bytes long, got ${Buffer.byteLength(name)}`);
  }
  const keyBytes = Buffer.byteLength(keyPrefix) + Buffer.byteLength(name);
  if (keyBytes > MAX_NAME_BYTES) {
    throw new InvalidArgumentError('name', `with the key prefix makes a key of ${keyBytes} bytes; at most ${MAX_NAME_BYTES} are allowed`);
  }
  return name;
}

export interface CheckedLockOptions {
  leaseTime?: number;
  waitTime?: number;
  signal?: AbortSignal;
}

/** What `forceUnlockIfHolder` takes: a clientId, or `<clientId>:<ownerId>` (ids have no `:` or whitespace). */
const HOLDER = /^[^\s:]+(:[^\s:]+)?$/;

/** A holder for `forceUnlockIfHolder`; an empty one is what `forceUnlock()` sends to mean "whoever holds it", so it is refused. */
export function checkHolder(holder: unknown): string {
  if (typeof holder !== 'string' || !HOLDER.test(holder)) {
    throw new InvalidArgumentError('holder', `must be a clientId or an owner field "<clientId>:<ownerId>" (as inspect() shows them), got ${typeof holder === 'string' ? JSON.stringify(holder.slice(0, 80)) : String(holder)}`);
  }
  return holder;
}

/**
 * Validates the options of `lock`, `tryLock` and `withLock`. A lease must be at least 1 ms: a
 * zero lease would expire before the caller could use it, and Redisson's `-1` for "watchdog" is
 * spelled here by leaving `leaseTime` out.
 */
export function checkLockOptions(options: unknown, withWaitTime: boolean): CheckedLockOptions {
  if (options === undefined) return {};
  const keys = withWaitTime ? TRY_LOCK_OPTION_KEYS : LOCK_OPTION_KEYS;
  const raw = checkPlainObject('options', options, keys);
  return {
    leaseTime: checkTime('options.leaseTime', raw.leaseTime, 1),
    waitTime: withWaitTime ? checkTime('options.waitTime', raw.waitTime, 0) : undefined,
    signal: checkSignal('options.signal', raw.signal),
  };
}

/** The option `keyPrefix`; the `rlock` CLI checks its --prefix with it before connecting. */
export function checkKeyPrefix(keyPrefix: unknown): string {
  if (typeof keyPrefix !== 'string') {
    throw new InvalidArgumentError('options.keyPrefix', `must be a string, got ${describe(keyPrefix)}`);
  }
  if (Buffer.byteLength(keyPrefix) > MAX_NAME_BYTES) {
    throw new InvalidArgumentError('options.keyPrefix', `must be at most ${MAX_NAME_BYTES} bytes long, got ${Buffer.byteLength(keyPrefix)}`);
  }
  // Its locks' keys would be the library's own keys of the prefix before the mark (see checkName).
  if (keyPrefix.includes(INTERNAL_KEY_MARK)) {
    throw new InvalidArgumentError('options.keyPrefix', `must not contain "${INTERNAL_KEY_MARK}": the library's own keys do, got ${describe(keyPrefix)}`);
  }
  // A `{` that opens no hash tag of the prefix's own would let each lock name pick where its
  // tag ends: its channel and latch names could not be made to share its Cluster slot.
  if (keyPrefix.includes('{') && hashTagOf(keyPrefix) === undefined) {
    throw new InvalidArgumentError('options.keyPrefix', `may hold a "{" only as a whole hash tag ("{tag}", non-empty), got ${describe(keyPrefix)}`);
  }
  return keyPrefix;
}

export function checkClientOptions(options: unknown): ResolvedClientOptions & { redis: LockClientOptions['redis'] } {
  const raw = checkPlainObject('options', options, CLIENT_OPTION_KEYS);
  // A URL object passed as ioredis options had none of their keys: the client went to
  // localhost:6379 without a word (a helper audit). Taken as the URL it is; other objects that
  // are not options (a Map, a Date) are refused for the same reason.
  const redis = raw.redis instanceof URL ? raw.redis.href : raw.redis;
  const redisOk =
    typeof redis === 'string'
      ? /^rediss?:\/\//.test(redis)
      : typeof redis === 'object' && redis !== null && Object.prototype.toString.call(redis) === '[object Object]';
  if (redisOk && typeof redis === 'object' && redis !== null && 'clusterNodes' in redis) {
    const nodes = (redis as { clusterNodes: unknown }).clusterNodes;
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new InvalidArgumentError('options.redis.clusterNodes', `must be a non-empty array of startup nodes, got ${describe(nodes)}`);
    }
  }
  if (!redisOk) {
    // A mistyped URL may still hold a password (`redis:/user:secret@host`): it is not echoed.
    const got = typeof redis === 'string' ? 'a string that is not one (not shown: it may hold a password)' : describe(redis);
    throw new InvalidArgumentError('options.redis', `must be a redis:// or rediss:// URL, ioredis options, or an ioredis Redis or Cluster, got ${got}`);
  }
  const keyPrefix = checkKeyPrefix(raw.keyPrefix ?? '');
  const name = raw.name ?? `${hostname()}:${process.pid}`;
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_CLIENT_NAME_LENGTH) {
    throw new InvalidArgumentError('options.name', `must be a string of 1 to ${MAX_CLIENT_NAME_LENGTH} characters, got ${describe(name)}`);
  }
  let syncReplicas: { replicas: number; timeout: number } | undefined;
  if (raw.syncReplicas !== undefined) {
    const sync = checkPlainObject('options.syncReplicas', raw.syncReplicas, SYNC_OPTION_KEYS);
    const replicas = sync.replicas;
    if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1 || replicas > 100) {
      throw new InvalidArgumentError('options.syncReplicas.replicas', `must be a whole number from 1 to 100, got ${describe(replicas)}`);
    }
    const timeout = checkTime('options.syncReplicas.timeout', sync.timeout, 1);
    if (timeout === undefined) throw new InvalidArgumentError('options.syncReplicas.timeout', 'is required (ms to wait for the replicas)');
    syncReplicas = { replicas, timeout };
  }
  return {
    syncReplicas,
    // Redis connection names take printable ASCII but the space only; anything else made Redis
    // refuse the name, silently (inspect() then showed no holder name).
    name: name.replace(/[^\x21-\x7e]/g, '_'),
    redis: redis as LockClientOptions['redis'],
    watchdogTimeout: checkTime('options.watchdogTimeout', raw.watchdogTimeout, MIN_WATCHDOG_TIMEOUT_MS) ?? 30_000,
    offlineTimeout: checkTime('options.offlineTimeout', raw.offlineTimeout, 0) ?? DEFAULT_OFFLINE_TIMEOUT_MS,
    queueTimeout: checkTime('options.queueTimeout', raw.queueTimeout, MIN_QUEUE_TIMEOUT_MS) ?? 5_000,
    keyPrefix,
  };
}

export function checkListOptions(options: unknown): { match: string; count: number } {
  if (options === undefined) return { match: '*', count: 100 };
  const raw = checkPlainObject('options', options, LIST_OPTION_KEYS);
  const match = raw.match ?? '*';
  if (typeof match !== 'string' || match.length === 0 || Buffer.byteLength(match) > MAX_NAME_BYTES) {
    throw new InvalidArgumentError('options.match', `must be a non-empty glob of at most ${MAX_NAME_BYTES} bytes, got ${describe(match)}`);
  }
  const count = raw.count ?? 100;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 100_000) {
    throw new InvalidArgumentError('options.count', `must be a whole number from 1 to 100000, got ${describe(count)}`);
  }
  return { match, count };
}
