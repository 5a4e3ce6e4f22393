import { OUTCOME_UNKNOWN } from '../../services/bounds';
import { LockHandle } from '../../core/LockHandle';
import { LockUsageError } from '../../errors';
import { forceWhileRefused, waitFor } from '../../core/waitLoop';
import type { Hold } from '../../services/Hold';
import type { LockInfo } from '../../introspection';
import { RELEASE_LATCH_TTL_MS, rwLeasesKeyOf, rwReadChannelOf, rwTurnKeyOf, rwWriteChannelOf, rwWritersKeyOf, WAKE_ALL_MESSAGE, UNLOCK_MESSAGE } from '../../names';
import type { RenewalTarget } from '../../services/RenewalTarget';
import type { CommandBound, LockContext } from '../../services/LockContext';
import type { LockOwner } from '../../services/LockOwner';
import type { ScriptedRedis } from '../../services/scripts';
import { inspectReadWriteLock } from './readWriteInspect';
import { facetOf, type ReadWriteMode } from './readWriteOwners';
import { READ_WRITE_RENEW, readWriteScripts, WRITERS_TURN_MS } from './readWriteScripts';

/** What the two handles of one `ReadWriteLock` share. */
export interface ReadWriteFamily {
  /** Who both handles act as outside `withLock`, so that `write; read; unlock write` downgrades. */
  readonly owner: LockOwner;
  handle(mode: ReadWriteMode): ReadWriteHandle;
  /** The handle of `mode` of a new read-write lock of the same name, with an owner of its own. */
  fork(mode: ReadWriteMode): ReadWriteHandle;
}

/**
 * What the read and the write handle of a read-write lock share: its keys (the lock hash, the
 * per-holder leases, the waiting writers; see docs/design.md, "The read-write lock"), its
 * release, renewal, force-unlock and read-only calls. Both handles of one name share `withLock`
 * scopes, so a scope's owner counts its reads and writes apart (see `facetOf`).
 */
export abstract class ReadWriteHandle extends LockHandle {
  abstract readonly mode: ReadWriteMode;

  protected constructor(
    context: LockContext,
    name: unknown,
    private readonly family: ReadWriteFamily,
  ) {
    super(context, name);
  }

  /** Deletes the whole read-write lock whoever holds it and wakes every waiter; true when anyone held it. */
  async forceUnlock(): Promise<boolean> {
    this.context.assertOpen();
    const { key } = this;
    const publish = await this.context.publishCommand();
    const holders = await forceWhileRefused(this.context, (redis) =>
      readWriteScripts(redis).rlock_readWriteLock_forceUnlock(key, rwLeasesKeyOf(this.context.keyPrefix, key), rwWritersKeyOf(this.context.keyPrefix, key), rwReadChannelOf(this.context.keyPrefix, key), rwWriteChannelOf(this.context.keyPrefix, key), publish, WAKE_ALL_MESSAGE),
    );
    if (holders === -1) {
      throw new LockUsageError(`"${this.name}" is held as a plain, fair or fenced lock, not a read-write lock: force-unlock it with that kind's forceUnlock(); nothing removed`);
    }
    return this.forced(holders);
  }

  /** Mode, holders with their kind and remaining lease, waiting writers, and subscribed clients. */
  async inspect(): Promise<LockInfo> {
    this.context.assertOpen();
    const sharded = (await this.context.publishCommand()) === 'spublish';
    return this.context.command('inspect', (redis) => inspectReadWriteLock(redis, this.name, this.context.keyPrefix, this.key, sharded));
  }

  /** Holds of this kind the current owner has now (a hold whose lease ended counts no more). */
  override async getHoldCount(): Promise<number> {
    this.context.assertOpen();
    return (await this.peek(this.field(this.currentOwner())))[1];
  }

  override async isHeldByCurrentOwner(): Promise<boolean> {
    return (await this.getHoldCount()) > 0;
  }

  /** Whether the lock is held in this handle's mode (Redisson's: the read lock is "locked" while anyone reads). */
  override async isLocked(): Promise<boolean> {
    this.context.assertOpen();
    return (await this.peek(''))[0] === this.mode;
  }

  /**
   * @internal As `LockHandle.fork`, for a composite lock's member: the same kind of handle of
   * its own read-write lock, as the constructor alone would make one without its pair.
   */
  override fork(): this {
    return LockHandle.singleUse(this.family.fork(this.mode) as this);
  }

  protected override unscopedOwner(): LockOwner {
    return this.family.owner;
  }

  protected override holder(owner: LockOwner): LockOwner {
    return facetOf(owner, this.mode);
  }

  /**
   * A write pending while a read asks (or the other way round): both would be granted to the one
   * owner, a write beside a read of another task. Once the write is held, a read is a downgrade.
   */
  protected override acquiringBeside(owner: LockOwner): string | undefined {
    const otherMode = this.mode === 'read' ? 'write' : 'read';
    return facetOf(owner, otherMode).pending > 0 ? `its ${otherMode} lock` : undefined;
  }

  protected override renewalTarget(owner: LockOwner): RenewalTarget {
    return { ...super.renewalTarget(owner), renewCommand: READ_WRITE_RENEW, renewKeys: [this.key, rwLeasesKeyOf(this.context.keyPrefix, this.key)] };
  }

  /**
   * Holds of the other kind that `fn` left behind (a read taken under the write lock) go with
   * the scope too: nobody could release them once its owner is gone, and the watchdog would
   * keep them forever.
   */
  protected override async endScope(scopeOwner: LockOwner, owner: LockOwner): Promise<void> {
    try {
      await super.endScope(scopeOwner, owner);
    } finally {
      const otherMode = this.mode === 'read' ? 'write' : 'read';
      const other = facetOf(scopeOwner, otherMode);
      if (other.holds > 0) await this.family.handle(otherMode).releases.releaseAll(other);
    }
  }

  protected async releaseCall(redis: ScriptedRedis, field: string, latch: string): Promise<0 | 1 | null> {
    const { key } = this;
    // Written as sent, no await when known (see RLock's releaseCall).
    const publish = this.context.knownPublishCommand() ?? (await this.context.publishCommand());
    return readWriteScripts(redis).rlock_readWriteLock_release(
      key,
      rwLeasesKeyOf(this.context.keyPrefix, key),
      rwWritersKeyOf(this.context.keyPrefix, key),
      rwReadChannelOf(this.context.keyPrefix, key),
      rwWriteChannelOf(this.context.keyPrefix, key),
      latch,
      rwTurnKeyOf(this.context.keyPrefix, key),
      field,
      RELEASE_LATCH_TTL_MS,
      publish,
      WAKE_ALL_MESSAGE,
      UNLOCK_MESSAGE,
      WRITERS_TURN_MS,
    );
  }

  /**
   * The shared waiting loop on `channel`: `attempt` answers null when held, else how long to
   * sleep at most; each message on the channel wakes one waiter of this client (a reader
   * channel's wake-all message wakes them all), which tries again.
   */
  protected waitOn(
    owner: LockOwner,
    channel: string,
    attempt: (listening: boolean, bound: CommandBound) => Promise<number | null>,
    waitTime: number,
    signal: AbortSignal | undefined,
    giveUp?: () => Promise<void>,
    attemptDeadline?: number,
  ): Promise<Hold | undefined> {
    return waitFor(
      this.context,
      {
        channel,
        attempt: async (listening, bound) => {
          const sentAt = performance.now();
          const ttl = await attempt(listening !== undefined, bound);
          return ttl === null ? { held: true, sentAt } : { held: false, ttl };
        },
        sleep: async (entry, ms, stops, _deadline, debt) => {
          await entry.untilReleased(ms, stops, undefined, debt);
          return undefined;
        },
        giveUp,
        ...this.waitEvents(owner),
      },
      waitTime,
      signal,
      attemptDeadline,
    );
  }

  /**
   * An attempt Redis answered after its wait ended (see CommandBound.lateReply): a hold it took
   * for the caller that is gone is given back; a refusal that queued a writer calls `leave`.
   */
  protected lateAttempt(owner: LockOwner, late: unknown, leave?: () => Promise<void>): Promise<unknown> | undefined {
    // Holds are counted, so one given back never touches a hold the owner booked since.
    if (late === null || late === 'afresh') return this.releases.giveBackUnbooked(owner);
    // A newer wait of the same owner queues under the same field: its entry is not ours to take.
    const leaving = owner.pending === 0 && owner.holds === 0 ? leave : undefined;
    // It may have taken the lock or queued (or neither): undone for a single-use owner only (see
    // RLock's attempt).
    if (late === OUTCOME_UNKNOWN) return owner.undoesUnknown ? this.releases.giveBackUnbooked(owner).then(() => leaving?.()) : undefined;
    return leaving?.();
  }

  /** [mode now ('' when free), holds of `field`], leases checked against Redis's clock. */
  private peek(field: string): Promise<[string, number]> {
    const { key } = this;
    return this.context.command('peek', (redis) => readWriteScripts(redis).rlock_readWriteLock_peek(key, rwLeasesKeyOf(this.context.keyPrefix, key), field));
  }
}
