import type { Redis } from 'ioredis';
import { LockClient, type LockClientOptions } from '../../src';
import { wakeChannelPrefixOf } from '../../src/names';
import { RedisServer } from './testRedis';

export interface PrivateRedis {
  /** The private server: tests may kill, pause and restart it. */
  readonly server: RedisServer;
  /** A plain connection for the test to look at (and tamper with) the server. */
  readonly admin: Redis;
  /** A LockClient on the server (or on `options.redis`), closed after each test. */
  client(options?: Partial<LockClientOptions>): LockClient;
}

/** Registers jest hooks that give the file a private `redis-server` and tidy up after each test. */
export function usePrivateRedis(extraArgs: string[] = []): PrivateRedis {
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  const clients: LockClient[] = [];
  beforeAll(async () => {
    server = await RedisServer.start(extraArgs);
    admin = server.connect();
    admin.on('error', () => undefined); // tests restart the server under it; it reconnects
  });
  afterEach(async () => {
    server?.resume();
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });
  return {
    get server() {
      if (!server) throw new Error('the server starts in beforeAll');
      return server;
    },
    get admin() {
      if (!admin) throw new Error('the server starts in beforeAll');
      return admin;
    },
    client(options = {}) {
      const client = new LockClient({ redis: this.server.url, ...options });
      clients.push(client);
      return client;
    },
  };
}

/**
 * How many clients listen for wake-ups of lock `key` (of a client with `keyPrefix`): subscribers
 * of its per-client wake channels `<keyPrefix>rlock__channel:{<key>}:<clientId>`.
 */
export async function subscribers(admin: Redis, key: string, keyPrefix = ''): Promise<number> {
  const pattern = `${wakeChannelPrefixOf(keyPrefix, key).replace(/[*?[\]\\]/g, '\\$&')}*`;
  const channels = (await admin.pubsub('CHANNELS', pattern)) as string[];
  if (channels.length === 0) return 0;
  const counts = (await admin.pubsub('NUMSUB', ...channels)) as (string | number)[];
  return counts.filter((_, i) => i % 2 === 1).reduce<number>((sum, n) => sum + Number(n), 0);
}

/**
 * How many waiters of `client` are parked as handoff candidates on plain lock `name` (past their
 * first attempts): client internals, read only by tests that count script calls after parking.
 */
export function parkedWaiters(client: LockClient, name: string, keyPrefix = ''): number {
  return parkedOnChannel(client, wakeChannelPrefixOf(keyPrefix, keyPrefix + name) + client.id);
}

/** The same for any primitive's wake-up `channel` (a semaphore's, e.g. `rlock__semaphore:{<name>}`). */
export function parkedOnChannel(client: LockClient, channel: string): number {
  const internals = client as unknown as { pubsub: { peek(channel: string): { local?: { parkedCount: number } } | undefined } };
  return internals.pubsub.peek(channel)?.local?.parkedCount ?? 0;
}

/** Whether `client`'s in-process handoffs on `channel` stand suspended by a cut of a semaphore's permits (client internals). */
export function handoffsSuspended(client: LockClient, channel: string): boolean {
  const internals = client as unknown as { pubsub: { peek(channel: string): { local?: { suspended?: boolean } } | undefined } };
  return internals.pubsub.peek(channel)?.local?.suspended === true;
}

/**
 * How many waiters of `client` sleep on `channel`'s wake-up queue now (client internals): every
 * wait that ended leaves it, so it never holds more than the waiters still waiting.
 */
export function wakeQueueLength(client: LockClient, channel: string): number {
  const internals = client as unknown as { pubsub: { peek(channel: string): { wakeups: { size: number } } | undefined } };
  return internals.pubsub.peek(channel)?.wakeups.size ?? 0;
}

/**
 * Calls `then` the moment `client` hands its next script call (EVALSHA or EVAL) to its socket:
 * right after it was written, or just before (`when: 'before'`); resolves with what `then`
 * returned. It hooks the client's ioredis object (Redis itself is real), so that a test can close
 * the client or pause Redis at an exact point of a call's life.
 */
export function atNextScript<T>(client: LockClient, then: () => T, when: 'before' | 'after' = 'after'): Promise<Awaited<T>> {
  type Send = (command: { name: string }, ...rest: unknown[]) => unknown;
  const connection = (client as unknown as { context: { redis: { sendCommand: Send } } }).context.redis;
  const send = connection.sendCommand;
  return new Promise((resolve) => {
    connection.sendCommand = function (this: unknown, command, ...rest) {
      if (command.name !== 'evalsha' && command.name !== 'eval') return send.call(this, command, ...rest);
      connection.sendCommand = send;
      const before = when === 'before' ? then() : undefined;
      const result = send.call(this, command, ...rest);
      resolve((when === 'before' ? before : then()) as Awaited<T>);
      return result;
    };
  });
}
