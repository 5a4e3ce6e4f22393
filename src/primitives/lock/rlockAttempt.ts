import type { LockRelease } from '../../core/LockRelease';
import { OUTCOME_UNKNOWN } from '../../services/LocalHandoff';
import type { CommandBound, LockContext } from '../../services/LockContext';
import type { LockOwner } from '../../services/LockOwner';
import { syncedAcquire } from '../../services/syncedAcquire';

/**
 * What one acquire of an RLock (or a variant) asks of its handle `H`: its steps, in one table for
 * every handle (`RLock.attempting`), each given the handle, so that a held lock carries no
 * closures of its own (see `AcquiringSteps`).
 */
export interface AttemptingSteps<H> {
  context(handle: H): LockContext;
  /** Made on first use: most attempts never give anything back. */
  releases(handle: H): Pick<LockRelease, 'giveBackUnbooked' | 'reentryFoundHoldGone'>;
  field(handle: H, owner: LockOwner): string;
  /** The acquire script and its keys for `owner` (see `RLock.acquireScript`). */
  acquireScript(handle: H, owner: LockOwner): { command: string; keys: string[] };
}

export class RLockAttempt<H> {
  // Private fields, not properties: logging or JSON.stringify of a handle reaches this part, and
  // the handle back from here would be a circle (JSON.stringify throws on one).
  readonly #handle: H;
  readonly #steps: AttemptingSteps<H>;

  constructor(handle: H, steps: AttemptingSteps<H>) {
    this.#handle = handle;
    this.#steps = steps;
  }

  /** One acquire: the PTTL when someone else holds the lock, else the script's answer. */
  async attempt(owner: LockOwner, lease: number, join: 0 | 1, waitBound: CommandBound): Promise<unknown> {
    const handle = this.#handle;
    const steps = this.#steps;
    const context = steps.context(handle);
    const { command, keys } = steps.acquireScript(handle, owner);
    const args = [...keys, lease, steps.field(handle, owner), join, context.queueTimeout, owner.holds > 0 ? 1 : 0];
    const sync = context.syncReplicas;
    // An attempt Redis answers after the wait ended (frozen, a silent connection) may have taken
    // the lock for a caller that is gone: give that hold back (a number is a refusal, its PTTL).
    // Its fields copied one by one, not spread: this runs for every attempt.
    const bound: CommandBound = {
      deadline: waitBound.deadline,
      signals: waitBound.signals,
      cutShort: waitBound.cutShort,
      idempotent: waitBound.idempotent,
      lateReply: (reply) => {
        // No answer at all: it may not have run. Undone only for a composite member's single-use
        // owner that books nothing: a handle's own owner may ask again meanwhile, and the
        // give-back, written after that ask, took its new hold (a third reader's repro: two
        // holders); a re-entry's give-back took the enclosing scope's hold (a second reader's).
        // Otherwise what it took, if it ran, stays for its lease, as before.
        if (reply === OUTCOME_UNKNOWN && !owner.undoesUnknown) return undefined;
        return typeof reply !== 'number' ? steps.releases(handle).giveBackUnbooked(owner) : undefined;
      },
    };
    if (sync) return this.syncedAttempt(owner, command, args, sync, bound);
    return context.command('acquire', (redis) => (redis as unknown as Record<string, AcquireCall>)[command]!(...args), bound);
  }

  /**
   * Synced acquire (see syncedAcquire): an unconfirmed hold is given back, unbooked and untold
   * (no `rlock:acquired` announced it), and reported as a refused attempt (`Unconfirmed`).
   */
  private async syncedAttempt(owner: LockOwner, command: string, args: (string | number)[], sync: { replicas: number; timeout: number }, bound: CommandBound): Promise<unknown> {
    const { reply, confirmed, waitRefused } = await syncedAcquire(this.#steps.context(this.#handle), sync, command, args, bound);
    if (typeof reply === 'number' || confirmed) return reply;
    const releases = this.#steps.releases(this.#handle);
    await releases.giveBackUnbooked(owner).catch(() => undefined);
    // A re-entry that took the lock afresh: the hold it entered was lost, confirmed or not.
    if (tookAfresh(reply)) releases.reentryFoundHoldGone(owner, 'free');
    if (waitRefused) throw waitRefused;
    return new Unconfirmed(sync.timeout);
  }
}

/** An attempt that took the lock but whose replicas did not confirm it in time (given back): try again within `ttl`. */
export class Unconfirmed {
  constructor(readonly ttl: number) {}
}

/**
 * Whether an acquire's answer says the owner's hold was lost and the lock taken afresh: the plain
 * script's "afresh", the fenced one's token in a table (lua/lock/acquire-3.lua, fencedLock/acquire-4.lua).
 */
export function tookAfresh(reply: unknown): boolean {
  return reply === 'afresh' || Array.isArray(reply);
}

/** An acquire script command: keys, then lease, field, join, queue timeout and whether the owner re-enters. */
type AcquireCall = (...args: (string | number)[]) => Promise<unknown>;
