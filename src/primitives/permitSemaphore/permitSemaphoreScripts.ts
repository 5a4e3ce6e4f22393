import type { PublishCommand, ScriptedRedis } from '../../services/scripts';

/** The scripts of src/lua/permitSemaphore/, as `defineCommand` adds them. */
export interface PermitScripts {
  rlock_permitSemaphore_acquire(
    key: string,
    permitsKey: string,
    channel: string,
    claimKey: string,
    kindKey: string,
    id: string,
    leaseMs: number,
    publish: PublishCommand,
    clientId: string,
    claims: 0 | 1,
    claimMs: number,
  ): Promise<number | null>;
  rlock_permitSemaphore_release(key: string, permitsKey: string, channel: string, latch: string, id: string, publish: PublishCommand, releaser: string, latchTtlMs: number): Promise<[0 | 1, number]>;
  rlock_permitSemaphore_handoff(key: string, permitsKey: string, latch: string, id: string, newId: string, leaseMs: number, latchTtlMs: number, pipelined: 0 | 1): Promise<0 | 1 | 2 | 3>;
  rlock_permitSemaphore_updateLease(permitsKey: string, id: string, leaseMs: number): Promise<0 | 1>;
  rlock_permitSemaphore_available(key: string, permitsKey: string, kindKey: string): Promise<number>;
  rlock_permitSemaphore_trySetPermits(key: string, permitsKey: string, channel: string, kindKey: string, latch: string, permits: number, publish: PublishCommand, latchTtlMs: number): Promise<0 | 1>;
  rlock_permitSemaphore_add(key: string, permitsKey: string, channel: string, kindKey: string, latch: string, delta: number, publish: PublishCommand, latchTtlMs: number, notAfter: number): Promise<number>;
  rlock_permitSemaphore_inspect(key: string, permitsKey: string, claimKey: string, kindKey: string): Promise<[string | null, number, string[], string | null, number]>;
}

export const permitScripts = (redis: ScriptedRedis): PermitScripts => redis as unknown as PermitScripts;
