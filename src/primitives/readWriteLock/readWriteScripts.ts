import type { PublishCommand, ScriptedRedis } from '../../services/scripts';

/** The read-write lock's scripts (lua/readWriteLock/), as `defineCommand` adds them to a connection. */
export interface ReadWriteScripts {
  rlock_readWriteLock_acquireRead(key: string, leasesKey: string, writersKey: string, leaseMs: number, field: string): Promise<number | null>;
  rlock_readWriteLock_acquireWrite(
    key: string,
    leasesKey: string,
    writersKey: string,
    turnKey: string,
    leaseMs: number,
    field: string,
    register: 0 | 1,
    entryTtlMs: number,
    reentry: 0 | 1,
  ): Promise<number | 'reading' | 'afresh' | null>;
  rlock_readWriteLock_release(
    key: string,
    leasesKey: string,
    writersKey: string,
    readChannel: string,
    writeChannel: string,
    latchKey: string,
    turnKey: string,
    field: string,
    latchTtlMs: number,
    publishCommand: PublishCommand,
    wakeAllMessage: string,
    wakeOneMessage: string,
    turnMs: number,
  ): Promise<0 | 1 | null>;
  rlock_readWriteLock_leave(
    key: string,
    leasesKey: string,
    writersKey: string,
    readChannel: string,
    field: string,
    publishCommand: PublishCommand,
    wakeAllMessage: string,
  ): Promise<0 | 1>;
  rlock_readWriteLock_forceUnlock(
    key: string,
    leasesKey: string,
    writersKey: string,
    readChannel: string,
    writeChannel: string,
    publishCommand: PublishCommand,
    wakeAllMessage: string,
  ): Promise<string[] | -1>;
  rlock_readWriteLock_peek(key: string, leasesKey: string, field: string): Promise<[string, number]>;
}

/**
 * How long a client whose writer passed the lock on to writers of other clients that waited
 * keeps its own writers from taking it back (see acquireWrite-4.lua): long enough for the woken
 * writer's attempt (a message and a round trip), short enough that a woken writer that is gone
 * costs little. As RLock's and the semaphores' yield (LocalHandoff).
 */
export const WRITERS_TURN_MS = 50;

/** The renew script's command name, for the watchdog (`RenewalTarget.renewCommand`). */
export const READ_WRITE_RENEW = 'rlock_readWriteLock_renew';

/** The waiting writers' heartbeat script, for the client's QueueHeartbeat (`QueuedEntry.heartbeatCommand`). */
export const READ_WRITE_HEARTBEAT = 'rlock_readWriteLock_heartbeat';

export function readWriteScripts(redis: ScriptedRedis): ReadWriteScripts {
  return redis as unknown as ReadWriteScripts;
}
