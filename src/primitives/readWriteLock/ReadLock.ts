import type { Hold } from '../../services/Hold';
import { rwLeasesKeyOf, rwReadChannelOf, rwWritersKeyOf } from '../../names';
import type { CommandBound, LockContext } from '../../services/LockContext';
import type { LockOwner } from '../../services/LockOwner';
import { ReadWriteHandle, type ReadWriteFamily } from './ReadWriteHandle';
import { readWriteScripts } from './readWriteScripts';

/**
 * The read half of a `ReadWriteLock`: any number of owners read together; none while a writer
 * holds it, and no newcomer while a writer waits (owners already reading, or holding the write
 * lock, still enter again).
 */
export class ReadLock extends ReadWriteHandle {
  readonly mode = 'read';

  /** @internal Use `client.getReadWriteLock(name).readLock()`. */
  constructor(context: LockContext, name: unknown, family: ReadWriteFamily) {
    super(context, name, family);
  }

  protected async acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
    const { key, context } = this;
    const lease = leaseTime ?? context.watchdogTimeout;
    const field = this.field(owner);
    const attempt = (_listening: boolean, bound: CommandBound): Promise<number | null> =>
      context.command('acquire', (redis) => readWriteScripts(redis).rlock_readWriteLock_acquireRead(key, rwLeasesKeyOf(this.context.keyPrefix, key), rwWritersKeyOf(this.context.keyPrefix, key), lease, field), {
        ...bound,
        lateReply: (late) => this.lateAttempt(owner, late),
      });
    return this.waitOn(owner, rwReadChannelOf(this.context.keyPrefix, key), attempt, waitTime, signal, undefined, attemptDeadline);
  }
}
