import type { LockContext } from '../../services/LockContext';
import { LockOwner } from '../../services/LockOwner';
import { ReadLock } from './ReadLock';
import type { ReadWriteHandle } from './ReadWriteHandle';
import type { ReadWriteMode } from './readWriteOwners';
import { WriteLock } from './WriteLock';

/**
 * Redisson's RReadWriteLock without its writer starvation: `readLock()` is shared by any number
 * of owners, `writeLock()` excludes every other owner. Both have the RLock interface. The two
 * handles of one `ReadWriteLock` act as one owner outside `withLock` (so `write; read; unlock
 * write` downgrades); inside `withLock`, every handle of the client and name acts as the scope's
 * owner, as RLock's do. See docs/design.md, "The read-write lock".
 */
export class ReadWriteLock {
  readonly name: string;
  private readonly read: ReadLock;
  private readonly write: WriteLock;

  /** @internal Use `client.getReadWriteLock(name)`. */
  constructor(context: LockContext, name: unknown) {
    let owner: LockOwner | undefined; // made on first use: a process may keep many handles
    const family = {
      get owner(): LockOwner {
        return (owner ??= new LockOwner());
      },
      handle: (mode: ReadWriteMode): ReadWriteHandle => (mode === 'read' ? this.read : this.write),
      fork: (mode: ReadWriteMode): ReadWriteHandle => {
        const pair = new ReadWriteLock(context, this.name);
        return mode === 'read' ? pair.read : pair.write;
      },
    };
    this.read = new ReadLock(context, name, family);
    this.write = new WriteLock(context, name, family);
    this.name = this.read.name;
  }

  /** The shared lock: any number of owners at once, none while a writer holds it. */
  readLock(): ReadLock {
    return this.read;
  }

  /** The exclusive lock: one owner, and no reader but its own. */
  writeLock(): WriteLock {
    return this.write;
  }
}
