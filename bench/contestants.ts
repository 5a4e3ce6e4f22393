// The libraries the bench compares, behind one small interface, each driven through its public
// API with its default retry settings.
import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { LockClient } from './shippedLibrary';

/** One process's use of a library: its own connection(s). */
export interface Session {
  /** Waits until `key` is held; resolves with the release. */
  acquire(key: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface Contestant {
  name: string;
  open(url: string): Promise<Session>;
}

const LEASE_MS = 10_000;

export const rlock: Contestant = {
  name: 'rlock',
  async open(url) {
    const client = new LockClient({ redis: url });
    return {
      async acquire(key) {
        const lock = client.getLock(key);
        await lock.lock(); // the default: watchdog-kept, as an app would call it
        return () => lock.unlock();
      },
      close: () => client.close(),
    };
  },
};

/** rlock's fair lock: a queue in Redis, the release hands the lock to the next waiter. */
export const rlockFair: Contestant = {
  name: 'rlock fair',
  async open(url) {
    const client = new LockClient({ redis: url });
    return {
      async acquire(key) {
        const lock = client.getFairLock(key);
        await lock.lock();
        return () => lock.unlock();
      },
      close: () => client.close(),
    };
  },
};

/** redis-semaphore's Mutex: polls every 10 ms (its default retryInterval), refreshes its lease. */
export const redisSemaphore: Contestant = {
  name: 'redis-semaphore',
  async open(url) {
    const redis = new Redis(url);
    return {
      async acquire(key) {
        // acquireTimeout is not a retry setting; raised so that a long contended wait is measured, not failed.
        const mutex = new Mutex(redis, key, { lockTimeout: LEASE_MS, acquireTimeout: 600_000 });
        await mutex.acquire();
        return () => mutex.release();
      },
      close: async () => void (await redis.quit()),
    };
  },
};

/** Redlock v5 on one node: retries every 200 ms ± 200 ms jitter (its defaults), 10 retries per call. */
export const redlock: Contestant = {
  name: 'redlock',
  async open(url) {
    const redis = new Redis(url);
    const locker = new Redlock([redis]);
    locker.on('error', () => undefined); // contention is reported per attempt; we retry below
    return {
      async acquire(key) {
        for (;;) {
          try {
            const lock = await locker.acquire([key], LEASE_MS);
            return async () => void (await lock.release());
          } catch (error) {
            // Its default gives up after 10 retries (~2 s); an app would call again.
            if (!(error instanceof ExecutionError)) throw error;
          }
        }
      },
      close: async () => void (await redis.quit()),
    };
  },
};

/** The floor for uncontended locking: SET NX PX to take, compare-and-delete to release. */
export const raw: Contestant = {
  name: 'raw SET NX',
  async open(url) {
    const redis = new Redis(url);
    redis.defineCommand('benchCompareAndDelete', {
      numberOfKeys: 1,
      lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    });
    let seq = 0;
    return {
      async acquire(key) {
        const token = `${process.pid}:${++seq}`;
        if ((await redis.set(key, token, 'PX', LEASE_MS, 'NX')) !== 'OK') throw new Error(`raw: ${key} is taken (the floor does not wait)`);
        return async () => void (await (redis as unknown as { benchCompareAndDelete(k: string, t: string): Promise<number> }).benchCompareAndDelete(key, token));
      },
      close: async () => void (await redis.quit()),
    };
  },
};

/**
 * The hash-lock floor: RLock's own acquire and release scripts (as shipped in dist/lua) sent as two
 * bare EVALSHAs, with no client logic (owner ids, renewal, wrappers, events): what RLock's
 * protocol costs by itself, so that its client-side overhead shows as a ratio.
 */
export const hashFloor: Contestant = {
  name: 'hash-lock floor',
  async open(url) {
    const redis = new Redis(url);
    const lua = (file: string): string =>
      readFileSync(join(__dirname, '..', 'dist', 'lua', file), 'utf8').replace(/^--@include (\S+)$/gm, (_, name: string) => lua(join('includes', name)));
    redis.defineCommand('floorAcquire', { numberOfKeys: 3, lua: lua('lock/acquire-3.lua') });
    redis.defineCommand('floorRelease', { numberOfKeys: 4, lua: lua('lock/release-4.lua') });
    const scripted = redis as unknown as {
      floorAcquire(key: string, clients: string, deadlines: string, lease: number, field: string, join: 0, queueTimeout: number): Promise<number | null>;
      floorRelease(
        key: string, clients: string, deadlines: string, latch: string, field: string, latchTtl: number,
        publish: string, wakePrefix: string, trust: 1, queueTimeout: number, stayInLine: 0, mustYield: 0,
      ): Promise<number | null>;
    };
    const clientId = `floor${process.pid}`.padEnd(21, 'x');
    let seq = 0;
    return {
      async acquire(key) {
        const field = `${clientId}:${String(++seq).padStart(21, '0')}`;
        const queue = [key, `rlock__clients:{${key}}`, `rlock__clients_timeout:{${key}}`] as const;
        if ((await scripted.floorAcquire(...queue, LEASE_MS, field, 0, 5000)) !== null) throw new Error(`floor: ${key} is taken (the floor does not wait)`);
        return async () => void (await scripted.floorRelease(...queue, `rlock__unlock_latch:{${key}}:${field}`, field, 60_000, 'publish', `rlock__channel:{${key}}:`, 1, 5000, 0, 0));
      },
      close: async () => void (await redis.quit()),
    };
  },
};

export const lockLibraries = [rlock, redisSemaphore, redlock];
export const byName = new Map([rlock, rlockFair, redisSemaphore, redlock, raw].map((c) => [c.name, c]));
