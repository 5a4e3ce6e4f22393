import type { PublishCommand, ScriptedRedis } from '../../services/scripts';

/** The semaphore's scripts (src/lua/semaphore/), as `defineCommand` adds them. */
export interface SemaphoreScripts {
  rlock_semaphore_acquire(key: string, reservationKey: string, latch: string, kindKey: string, permits: number, field: string, mayReserve: 0 | 1, reservationTtlMs: number, latchTtlMs: number, notAfter: number): Promise<[0 | 1 | 2, number, number?]>;
  rlock_semaphore_undoAcquire(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, releaser: string, latchTtlMs: number): Promise<0 | 1>;
  rlock_semaphore_add(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, delta: number, publish: PublishCommand, releaser: string, latchTtlMs: number, notAfter: number): Promise<[number, number, 1?]>;
  rlock_semaphore_trySetPermits(key: string, reservationKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, latchTtlMs: number): Promise<0 | 1>;
  rlock_semaphore_drain(key: string, latch: string, kindKey: string, latchTtlMs: number, notAfter: number): Promise<number>;
  rlock_semaphore_leave(key: string, reservationKey: string, channel: string, field: string, publish: PublishCommand): Promise<0 | 1>;
}

export const semaphoreScripts = (redis: ScriptedRedis): SemaphoreScripts => redis as unknown as SemaphoreScripts;
