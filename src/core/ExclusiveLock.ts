import { LockUsageError } from '../errors';
import { checkHolder } from '../options';
import { LockHandle } from './LockHandle';

/** What a force-unlock script answers: whether it removed the lock, and the owner fields the lock had. */
export interface ForceUnlockResult {
  removed: boolean;
  holders: string[];
}

/**
 * A lock one owner holds at a time (RLock, FairLock): unlike a read-write lock's readers, its
 * holder can be named, so an admin can remove it only while that holder still holds it.
 */
export abstract class ExclusiveLock extends LockHandle {
  /** Deletes the lock whoever holds it and passes it on to whoever waits; true when there was one. */
  async forceUnlock(): Promise<boolean> {
    this.context.assertOpen();
    return this.forced((await this.forceUnlockCall('')).holders);
  }

  /**
   * Deletes the lock only while `holder` holds it (a clientId, any owner of that client, or an
   * owner field `<clientId>:<ownerId>`), in one atomic step: an operator removes the stuck holder
   * they looked at, never an owner that took the lock since. Answers whether it did, and the
   * owner fields the lock had (the ones removed, or the ones holding it instead).
   */
  async forceUnlockIfHolder(holder: string): Promise<ForceUnlockResult> {
    checkHolder(holder);
    this.context.assertOpen();
    const result = await this.forceUnlockCall(holder);
    if (result.removed) this.forced(result.holders);
    return result;
  }

  /** The script call: `holder` '' removes whoever holds it. */
  protected abstract forceUnlockCall(holder: string): Promise<ForceUnlockResult>;

  /** What a force-unlock script's first number says; a read-write lock's name is refused (the script answered -1). */
  protected forceUnlockAnswered(removed: number, holders: string[]): ForceUnlockResult {
    if (removed === -1) {
      throw new LockUsageError(`"${this.name}" is a read-write lock: force-unlock it with getReadWriteLock(name).writeLock().forceUnlock(), which removes its readers' leases and waiting writers too; nothing removed`);
    }
    return { removed: removed === 1, holders };
  }
}
