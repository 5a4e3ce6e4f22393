// Every primitive that a caller holds, behind one shape: for the fault tests that run the same
// scenario against each of them (faults/02 and 08).
import type { Redis } from 'ioredis';
import type { LockClient } from '../../src';

export interface HeldKind {
  /** Sets up what taking it once needs (a semaphore's single permit), through `client`. */
  prepare?(client: LockClient, name: string): Promise<void>;
  /** One try within `waitTime` (none: a single attempt); true when it took it. */
  tryTake(client: LockClient, name: string, waitTime?: number): Promise<boolean>;
  /** Waits until it takes it, or `signal` aborts. */
  take(client: LockClient, name: string, signal: AbortSignal): Promise<unknown>;
  /** Waits as long as it takes, through a handle of its own; resolves with that hold's release. */
  hold(client: LockClient, name: string): Promise<() => Promise<unknown>>;
  /** Nothing of `name` is held: the lock's key is gone, or the semaphore's one permit is back. */
  free(client: LockClient, admin: Redis, name: string): Promise<boolean>;
}

const keyGone = async (_client: LockClient, admin: Redis, name: string): Promise<boolean> => (await admin.exists(name)) === 0;
const waitOptions = (waitTime: number | undefined) => (waitTime === undefined ? undefined : { waitTime });
const held = async (lock: { lock(): Promise<unknown>; unlock(): Promise<void> }): Promise<() => Promise<void>> => {
  await lock.lock();
  return () => lock.unlock();
};

export const heldKinds: Record<'lock' | 'fair' | 'fenced' | 'read' | 'write' | 'semaphore' | 'permitSemaphore', HeldKind> = {
  lock: {
    tryTake: (client, name, waitTime) => client.getLock(name).tryLock(waitOptions(waitTime)),
    take: (client, name, signal) => client.getLock(name).lock({ signal }),
    hold: (client, name) => held(client.getLock(name)),
    free: keyGone,
  },
  fair: {
    tryTake: (client, name, waitTime) => client.getFairLock(name).tryLock(waitOptions(waitTime)),
    take: (client, name, signal) => client.getFairLock(name).lock({ signal }),
    hold: (client, name) => held(client.getFairLock(name)),
    free: keyGone,
  },
  fenced: {
    tryTake: async (client, name, waitTime) => (await client.getFencedLock(name).tryLock(waitOptions(waitTime))) !== null,
    take: (client, name, signal) => client.getFencedLock(name).lock({ signal }),
    hold: (client, name) => held(client.getFencedLock(name)),
    free: keyGone,
  },
  // The read-write lock's holds live in its hash: nothing of it is left when no one holds it.
  read: {
    tryTake: (client, name, waitTime) => client.getReadWriteLock(name).readLock().tryLock(waitOptions(waitTime)),
    take: (client, name, signal) => client.getReadWriteLock(name).readLock().lock({ signal }),
    hold: (client, name) => held(client.getReadWriteLock(name).readLock()),
    free: keyGone,
  },
  write: {
    tryTake: (client, name, waitTime) => client.getReadWriteLock(name).writeLock().tryLock(waitOptions(waitTime)),
    take: (client, name, signal) => client.getReadWriteLock(name).writeLock().lock({ signal }),
    hold: (client, name) => held(client.getReadWriteLock(name).writeLock()),
    free: keyGone,
  },
  semaphore: {
    prepare: async (client, name) => void (await client.getSemaphore(name).trySetPermits(1)),
    tryTake: (client, name, waitTime) => client.getSemaphore(name).tryAcquire(waitOptions(waitTime)),
    take: (client, name, signal) => client.getSemaphore(name).acquire({ signal }),
    hold: async (client, name) => {
      const semaphore = client.getSemaphore(name);
      await semaphore.acquire();
      return () => semaphore.release();
    },
    free: async (client, _admin, name) => (await client.getSemaphore(name).availablePermits()) === 1,
  },
  permitSemaphore: {
    prepare: async (client, name) => void (await client.getPermitExpirableSemaphore(name).trySetPermits(1)),
    tryTake: async (client, name, waitTime) => (await client.getPermitExpirableSemaphore(name).tryAcquire(waitOptions(waitTime))) !== null,
    take: (client, name, signal) => client.getPermitExpirableSemaphore(name).acquire({ signal }),
    hold: async (client, name) => {
      const semaphore = client.getPermitExpirableSemaphore(name);
      const id = await semaphore.acquire();
      return () => semaphore.release(id);
    },
    free: async (client, _admin, name) => (await client.getPermitExpirableSemaphore(name).availablePermits()) === 1,
  },
};

export const heldKindNames = Object.keys(heldKinds) as (keyof typeof heldKinds)[];
