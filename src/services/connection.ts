import { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors';
import { type LockClientOptions, MAX_DATABASE } from '../options';
import { displayUrl } from '../redact';

/**
 * ioredis's ready check sends INFO on every connect, which a least-privilege ACL refuses
 * (`@dangerous`), and then prints a warning. It only waits out a server still loading its data;
 * without it a command sent meanwhile fails with LOADING, which rlock treats as transient (a
 * waiter retries it, the watchdog retries at its next tick within the lease), so nothing is lost.
 */
const NO_READY_CHECK = { enableReadyCheck: false } as const;

/**
 * Without the ready check, ioredis 5 marks a connection ready once its handshake (CLIENT SETNAME,
 * CLIENT SETINFO) settles, with no check that it is still the connection it made (ioredis #2099,
 * fixed in 6.0.0). When a connection closes during its handshake and ioredis then gives up on its
 * calls (past `maxRetriesPerRequest`: a Redis at maxclients, or a proxy whose Redis is down,
 * accepting and closing connections), the stale handshake marks the closed connection ready, the
 * reconnect ioredis had scheduled is refused ("already connected"), and every call hangs for good.
 * Such a `ready` is caught as ioredis emits it (its socket is closed already) and never reaches a
 * listener: rlock's own would send the calls waiting for the connection into ioredis's offline
 * queue, which the next give-up rejects. The status goes back to what ioredis had made it,
 * reconnecting (the scheduled reconnect then goes ahead) or ended when it had given up, and so
 * does its count of attempts, which the stale handshake reset (its backoff never grew: a full
 * Redis was asked again every 50 to 150 ms). Reads ioredis internals (`stream`,
 * `reconnectTimeout`, `retryAttempts`, `setStatus`), kept to ioredis 5: on 6 no such `ready` comes.
 */
function guardStaleReady<T extends Redis>(node: T): T {
  if (node.options.enableReadyCheck !== false) return node;
  const internals = node as unknown as { stream?: { destroyed?: boolean }; reconnectTimeout?: unknown; retryAttempts?: number; setStatus?: (status: string) => void };
  let attempts = 0;
  const emit = node.emit;
  node.emit = function (this: T, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'reconnecting') attempts = internals.retryAttempts ?? 0;
    if (event === 'ready' && internals.stream?.destroyed === true && typeof internals.setStatus === 'function') {
      internals.retryAttempts = attempts;
      internals.setStatus.call(node, internals.reconnectTimeout ? 'reconnecting' : 'end');
      return false;
    }
    return emit.call(this, event, ...args);
  } as T['emit'];
  return node;
}

/** The client's command connection, and whether the client made it (and so closes it). */
export interface CommandConnection {
  readonly redis: Redis | Cluster;
  readonly owned: boolean;
}

function isConnection(value: unknown): value is Redis | Cluster {
  return value instanceof Redis || value instanceof Cluster ||
    (typeof value === 'object' && value !== null &&
      typeof (value as Redis).defineCommand === 'function' && typeof (value as Redis).duplicate === 'function');
}

/**
 * The connection the option `redis` names: the one passed in, or one made from a URL, from
 * ioredis options (a Sentinel's too) or from Cluster nodes, named `connName`.
 */
export function openConnection(given: LockClientOptions['redis'], connName: string): CommandConnection {
  if (isConnection(given)) {
    const own = (given as Redis).options;
    if (!given.isCluster && own?.sentinels?.length && !own.failoverDetector) {
      process.emitWarning('a Sentinel connection without failoverDetector: true keeps writing to the old master for seconds after SENTINEL FAILOVER (see docs/topologies.md)', {
        type: 'RLockWarning',
        code: 'RLOCK_NO_FAILOVER_DETECTOR',
      });
    }
    return refuseBadOptions({ redis: given, owned: false });
  }
  if (typeof given === 'object' && 'keyPrefix' in given && given.keyPrefix) {
    throw new InvalidArgumentError('options.redis.keyPrefix', 'is not supported; use the LockClient option keyPrefix');
  }
  // ioredis sets the connection name again on every reconnect; inspect() reads it.
  // NO_READY_CHECK: see its comment; options given explicitly win.
  // disconnectTimeout 0: on disconnect() ioredis otherwise arms a ref'ed 2 s timer that waits
  // for a socket 'close' which never comes when the socket was already gone (Redis down), and
  // that timer would hold the process open after close().
  if (typeof given === 'string') return refuseBadOptions({ redis: fromUrl(given, connName), owned: true });
  if ('clusterNodes' in given) {
    const { clusterNodes, clusterOptions = {} } = given;
    const redis = new Cluster(clusterNodes, {
      ...clusterOptions,
      redisOptions: { disconnectTimeout: 0, connectionName: connName, ...NO_READY_CHECK, ...clusterOptions.redisOptions },
    });
    redis.on('+node', guardStaleReady);
    return refuseBadOptions({ redis, owned: true });
  }
  // failoverDetector (Sentinel only): on SENTINEL FAILOVER the old master lives on and
  // keeps taking writes for seconds until the Sentinel demotes it; ioredis drops the
  // connection as soon as a Sentinel announces +switch-master, so renewals and releases
  // move to the new master at once instead of renewing a lock nobody else can see.
  // A Sentinel connection keeps the ready check: ioredis checks the node's role in its INFO.
  refuseMisspeltOptions(given as Record<string, unknown>);
  const readyCheck = given.sentinels?.length ? {} : NO_READY_CHECK;
  return refuseBadOptions({ redis: guardStaleReady(new Redis({ disconnectTimeout: 0, connectionName: connName, failoverDetector: true, ...readyCheck, ...given })), owned: true });
}

/** A connection to `url`; a URL ioredis cannot read is refused without being echoed (its TypeError holds the whole URL, password and all). */
function fromUrl(url: string, connName: string): Redis {
  try {
    return guardStaleReady(new Redis(url, { disconnectTimeout: 0, connectionName: connName, ...NO_READY_CHECK }));
  } catch {
    throw new InvalidArgumentError('options.redis', 'must be a redis:// or rediss:// URL that ioredis can read, got one it cannot (not shown: it may hold a password)');
  }
}

/** Refuses what ioredis would get wrong: a database it cannot select, a keyPrefix (keys, not the channels the waiters subscribe to). */
function refuseBadOptions(connection: CommandConnection): CommandConnection {
  const { redis, owned } = connection;
  // A database ioredis cannot select (NaN from a URL path that is no number, a negative one): it
  // skipped the SELECT on connect, then sent SELECT NaN unhandled (the process crashed), and the
  // calls ran in database 0. One beyond Redis's int is refused here too: no Redis can have it,
  // and only a SELECT sent after connecting said so.
  const db = redis.isCluster ? undefined : (redis as Redis).options?.db;
  if (db !== undefined && !(Number.isInteger(db) && db >= 0 && db <= MAX_DATABASE)) {
    if (owned) redis.disconnect();
    throw new InvalidArgumentError('options.redis.db', `must be a database number (a whole number from 0 to ${MAX_DATABASE}, in the URL path: redis://host:6379/2), got one that is not`);
  }
  const prefix = redis.isCluster ? (redis as Cluster).options.keyPrefix : (redis as Redis).options?.keyPrefix;
  if (!prefix) return connection;
  if (owned) redis.disconnect();
  throw new InvalidArgumentError('options.redis', 'must not have an ioredis keyPrefix; use the LockClient option keyPrefix');
}

/** A maker of the pub/sub subscriber connection, a duplicate of `redis` (sharded or not on a Cluster). */
export function subscriberOf(redis: Redis | Cluster, connName: string): (sharded: boolean) => Redis | Cluster {
  return (sharded) =>
    redis.isCluster
      ? // Its slot map is refreshed now and then by LockPubSub (refreshSlotsEvery), not by ioredis's slotsRefreshInterval.
        (redis as Cluster).duplicate([], { shardedSubscribers: sharded, slotsRefreshInterval: 0 }).on('+node', guardStaleReady)
      : handleOwnResubscribes(guardStaleReady((redis as Redis).duplicate({ disconnectTimeout: 0, connectionName: connName })));
}

/**
 * ioredis re-subscribes by itself once connected again (`autoResubscribe`) and drops the
 * promises of those calls: when the connection closes again before they are answered and its
 * retries run out (`maxRetriesPerRequest`), each rejects with nobody listening, an unhandled
 * rejection that ends a Node process (a second reader's repro, with `maxRetriesPerRequest: 0`).
 * Every call of these commands on the subscriber gets a handler of its own; a caller awaiting one
 * still sees its rejection. The subscriber's own resubscribe (LockPubSub) follows the connection.
 */
function handleOwnResubscribes(subscriber: Redis): Redis {
  for (const command of ['subscribe', 'psubscribe', 'ssubscribe', 'select'] as const) {
    const original = subscriber[command] as (...args: unknown[]) => Promise<unknown>;
    (subscriber as unknown as Record<string, unknown>)[command] = function (this: Redis, ...args: unknown[]) {
      const sent = original.apply(this, args);
      sent.catch(() => undefined);
      return sent;
    };
  }
  return subscriber;
}

/**
 * A connection passed in without a name of its own gets ours, so that inspect() can say who
 * holds a lock: ioredis re-applies `connectionName` on every (re)connect, and a Cluster gives its
 * `redisOptions` to each node connection it makes; those already open are named now. Returns the undo.
 */
export function nameConnection(redis: Redis | Cluster, name: string): () => void {
  const nameNode = (node: Redis): void => {
    if (node.options.connectionName) return;
    node.options.connectionName = name; // re-applied by ioredis on each reconnect
    if (node.status === 'ready') node.client('SETNAME', name).catch(() => undefined);
    else node.once('ready', () => void node.client('SETNAME', name).catch(() => undefined));
  };
  if (!redis.isCluster) {
    nameNode(redis as Redis);
    return () => undefined;
  }
  const cluster = redis as Cluster;
  if (cluster.options.redisOptions?.connectionName) return () => undefined;
  for (const node of cluster.nodes()) nameNode(node);
  cluster.on('+node', nameNode);
  return () => cluster.off('+node', nameNode);
}

/** QUIT, and the socket cut after `ms` at the latest. */
export async function quitWithin(redis: Redis | Cluster, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([redis.quit().catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

/** Where the connection points, for error messages: `host:port`, a Sentinel's master, or the Cluster's startup nodes. */
export function addressOf(redis: Redis | Cluster): string {
  if (redis.isCluster) {
    const nodes = (redis as unknown as { startupNodes?: unknown[] }).startupNodes ?? [];
    // A startup node given as a URL may hold a password.
    const names = nodes.map((node: unknown) => (typeof node === 'object' && node ? `${(node as { host?: string }).host ?? '127.0.0.1'}:${(node as { port?: number }).port ?? 6379}` : displayUrl(String(node))));
    return `Cluster ${names.join(',')}`;
  }
  const { host, port, path, sentinels, name } = (redis as Redis).options;
  if (sentinels?.length) return `Sentinel master "${name}" (${sentinels.map((s) => `${s.host ?? '127.0.0.1'}:${s.port ?? 26379}`).join(',')})`;
  return path ?? `${host}:${port}`;
}

/**
 * ioredis's connection options, as of ioredis 5: its defaults' keys and the ones it reads
 * without a default. A key outside it that is one typo away from one of these is refused.
 */
const IOREDIS_OPTIONS = new Set([
  ...Object.keys((Redis as unknown as { defaultOptions?: object }).defaultOptions ?? {}),
  ...['host', 'path', 'family', 'tls', 'commandTimeout', 'socketTimeout', 'blockingTimeout', 'sentinelUsername', 'sentinelPassword', 'sentinelTLS', 'sentinelCommandTimeout', 'preferredSlaves'],
  ...['Connector', 'showFriendlyErrorStack', 'offlineQueue', 'scripts', 'commandQueue', 'monitor'],
  // node:net's, which ioredis passes on to the socket.
  ...['localAddress', 'localPort', 'hints', 'lookup', 'timeout', 'keepAliveInitialDelay', 'autoSelectFamily', 'autoSelectFamilyAttemptTimeout', 'allowHalfOpen'],
]);

/**
 * A misspelt ioredis option (`prot` for `port`, `hots` for `host`) is not an error to ioredis:
 * it connected to localhost:6379, where another Redis (another set of locks) may answer, and two
 * processes configured alike in all but a typo would not exclude each other (a helper audit).
 * Only near misses are refused: an option of a newer ioredis, unknown here, is let through.
 */
function refuseMisspeltOptions(given: Record<string, unknown>): void {
  for (const key of Object.keys(given)) {
    if (IOREDIS_OPTIONS.has(key)) continue;
    const meant = [...IOREDIS_OPTIONS].find((known) => key.toLowerCase() === known.toLowerCase() || (key.length > 2 && editDistance(key, known) <= (key.length > 5 ? 2 : 1)));
    if (meant) throw new InvalidArgumentError(`options.redis.${key}`, `is not an ioredis option: did you mean "${meant}"?`);
  }
}

/** Edits (insert, delete, replace, swap two neighbours) between two short strings. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}
