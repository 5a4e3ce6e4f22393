import type { LockHandle } from '../../core/LockHandle';
import { ClientClosedError, CompositeUnlockError, LockLostError, type MemberFailure, NotLockOwnerError, RedisCommandError } from '../../errors';
import { boundedWait } from '../../services/bounds';
import { onAbortOfAny } from '../../services/abortListeners';
import { scopedOwner } from '../../services/LockOwner';

/** A member lock taken for a composite: its own handle (a fork) and when its acquire was sent. */
export interface TakenMember {
  handle: LockHandle;
  sentAt: number;
  /** Its index in the composite's list of locks. */
  member: number;
}

/** When a hold kept by the watchdogs stops being extended (a RedLock's `maxHoldTime`). */
export interface ExtensionCap {
  /** performance.now() ms when the acquisition began. */
  readonly start: number;
  /** Each member is renewed until `start + maxHoldTime −` its own watchdog lease, so that it ends by `start + maxHoldTime`. */
  readonly maxHoldTime: number;
  /** The clock drift allowance taken off the members' remaining leases (ms). */
  readonly drift: number;
}

/**
 * What a MultiLock or RedLock holds once it got enough members: the members taken, and when the
 * whole counts as lost: fewer than `needed` members still held (each member's own watchdog found
 * it gone, or could not renew it in time), or the validity running out (a `leaseTime` was given).
 */
export class CompositeHold {
  private readonly lost = new AbortController();
  private readonly undo: (() => void)[] = [];
  /** Says the whole lost, once (see the constructor). */
  private readonly lose: (reason: string, closed?: ClientClosedError) => void;

  constructor(
    private readonly name: string,
    readonly members: readonly TakenMember[],
    /** How many members the composite lists (all of which a MultiLock takes; a RedLock, a quorum or more). */
    private readonly listed: number,
    /** How many members must stay held for the whole to be held (MultiLock: all; RedLock: a quorum). */
    readonly needed: number,
    /** performance.now() when the whole stops being valid; undefined while watchdogs keep the members. */
    readonly validUntil: number | undefined,
    onLost: (error: LockLostError) => void,
    /** Under the watchdog: when it stops extending the members (undefined: never). */
    cap?: ExtensionCap,
  ) {
    let held = members.length;
    this.memberLost = members.map(({ handle }) => handle.asMember.lostSignal());
    const lose = (this.lose = (reason: string, closed?: ClientClosedError): void => {
      if (this.lost.signal.aborted) return;
      // A member's client was closed (its watchdog stopped): said as such, as for a lone lock's
      // scope, and no `lost` event (nothing was taken from the caller, who closed it).
      if (closed) return this.lost.abort(closed);
      const error = new LockLostError(name, reason);
      this.lost.abort(error);
      onLost(error);
    });
    for (const [i, { handle }] of members.entries()) {
      const memberLost = this.memberLost[i];
      if (!memberLost) {
        // Kept by the watchdog, its entry is gone: lost already (with a leaseTime there is none).
        if (validUntil === undefined && --held < needed) lose(`member "${handle.name}" was lost before the whole was held`);
        continue;
      }
      const listener = (): void => {
        held--;
        const cause = memberLost.reason as Error;
        if (held < needed) lose(`member "${handle.name}" was lost (${String(cause?.message)}); ${held} of ${members.length} held, ${needed} needed`, cause instanceof ClientClosedError ? cause : undefined);
      };
      if (memberLost.aborted) listener();
      else {
        memberLost.addEventListener('abort', listener, { once: true });
        this.undo.push(() => memberLost.removeEventListener('abort', listener));
      }
    }
    if (validUntil !== undefined) {
      const timer = setTimeout(() => lose(`its validity ran out (leaseTime minus the time acquiring took)`), Math.max(0, validUntil - performance.now()));
      timer.unref();
      this.undo.push(() => clearTimeout(timer));
    } else if (cap) {
      this.capExtensions(cap);
    }
  }

  /** performance.now() ms when the whole stops being valid, once known: its leaseTime's validity, or its capped extension's. */
  get validityEnd(): number | undefined {
    return this.validUntil ?? this.cappedUntil;
  }

  private cappedUntil: number | undefined;
  private capReason = '';
  /** Each member's watchdog loss signal as of the acquisition (undefined: not kept by a watchdog). */
  private readonly memberLost: (AbortSignal | undefined)[];

  /**
   * Stops each member's renewals at `start + maxHoldTime −` its own watchdog lease, so that every
   * member ends by `start + maxHoldTime` (a member with a longer lease stops sooner). From the
   * first stop on, the whole is valid while `needed` members last: those still renewed, and those
   * stopped until their last lease ends (less the drift); then lost. A member whose client closes
   * after its stop counts as gone, as its watchdog's close would have said. A renewal reply still
   * out when a member stopped may keep it a little longer in Redis than counted: the loss is told
   * early, never late.
   */
  private capExtensions(cap: ExtensionCap): void {
    const reason = (this.capReason = `it was held for its maxHoldTime (${cap.maxHoldTime} ms): extensions are capped`);
    /** Per member: undefined while renewed, else until when its last lease lasts (-Infinity: gone). */
    const ends: (number | undefined)[] = this.members.map(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const recount = (closed?: ClientClosedError): void => {
      const lasting = this.members
        .map((_, i) => ends[i] ?? (this.memberLost[i]?.aborted === false ? Infinity : -Infinity))
        .filter((end) => end > -Infinity)
        .sort((a, b) => b - a);
      if (lasting.length < this.needed) return this.lose(closed ? 'a member’s client was closed' : reason, closed);
      const until = lasting[this.needed - 1]! - cap.drift;
      if (until === Infinity) return;
      this.cappedUntil = until;
      clearTimeout(timer);
      timer = setTimeout(() => this.lose(reason), Math.max(0, until - performance.now()));
      timer.unref();
    };
    this.undo.push(() => clearTimeout(timer));
    // A member still renewed that is lost changes the count too: once others stopped, the whole
    // may now end with theirs (before, it was counted again only at the next stop, which could
    // come after those members ran out in Redis and another owner took a quorum).
    this.memberLost.forEach((memberLost) => {
      if (!memberLost || memberLost.aborted) return;
      const onLoss = (): void => recount(memberLost.reason instanceof ClientClosedError ? memberLost.reason : undefined);
      memberLost.addEventListener('abort', onLoss, { once: true });
      this.undo.push(() => memberLost.removeEventListener('abort', onLoss));
    });
    const now = performance.now();
    this.members.forEach(({ handle }, i) => {
      const stopRenewing = handle.asMember.renewalStopper();
      const stop = (): void => {
        ends[i] = stopRenewing() ?? -Infinity;
        // Its watchdog no longer tells a close (ClientClosedError): said here, as it would have.
        const closing = handle.asMember.closedSignal;
        const closed = (): void => {
          ends[i] = -Infinity;
          recount(closing.reason instanceof ClientClosedError ? closing.reason : new ClientClosedError());
        };
        if (closing.aborted) return closed();
        closing.addEventListener('abort', closed, { once: true });
        this.undo.push(() => closing.removeEventListener('abort', closed));
        recount();
      };
      const stopAt = cap.start + cap.maxHoldTime - handle.asMember.watchdogTimeout;
      // Due already (maxHoldTime equal to the lease): stopped now, so that remainingValidity() answers at once.
      if (stopAt <= now) return stop();
      const stopping = setTimeout(stop, stopAt - now);
      stopping.unref();
      this.undo.push(() => clearTimeout(stopping));
    });
  }

  /** Aborts with a `LockLostError` when the whole is lost (`ClientClosedError` when a member's client closed took it below `needed`). */
  get lostSignal(): AbortSignal {
    return this.lost.signal;
  }

  /**
   * The loss of the whole as of now, if lost. Also a validity that has run out while the event
   * loop was blocked, before its timer could fire: a `withLock` whose callback blocked past the
   * validity and then returned must not resolve as if it had held the lock throughout.
   */
  lostNow(): LockLostError | ClientClosedError | undefined {
    if (this.validUntil !== undefined && performance.now() >= this.validUntil) this.lose('its validity ran out (leaseTime minus the time acquiring took)');
    if (this.cappedUntil !== undefined && performance.now() >= this.cappedUntil) this.lose(this.capReason);
    return this.lost.signal.aborted ? (this.lost.signal.reason as LockLostError | ClientClosedError) : undefined;
  }

  /**
   * Gives back every member in parallel, each bounded by `timeout` when given (a paused server
   * must not stall unlock; its member then expires by itself). A member its owner no longer holds
   * (lost, expired) is not an error: unlock wants it free and it is. Other failures are thrown
   * after every member was tried, unless `tolerate` says how many members may fail. Resolves with
   * how many members were found no longer held.
   */
  async release(timeout: number | undefined, tolerate: number): Promise<number> {
    for (const stop of this.undo.splice(0)) stop();
    // A release that did not answer within `timeout` failed too, as far as the caller can know:
    // unlock() resolved when every member's release timed out.
    const unanswered = (handle: LockHandle): RedisCommandError =>
      new RedisCommandError('unlock', new Error(`no answer within ${timeout} ms`), `unlock of "${handle.name}" got no answer within ${timeout} ms; the hold expires with its lease`, 'ETIMEDOUT');
    const results = await Promise.allSettled(
      this.members.map(async ({ handle }) => {
        if ((await within(handle.asMember.giveBack().then(() => true), timeout)) === undefined) throw unanswered(handle);
      }),
    );
    // Each member's own index in the composite's list (a member not taken, in a RedLock with a
    // minority down, is not among `members`).
    const failures: MemberFailure[] = results.flatMap((result, i) => {
      if (result.status === 'fulfilled' || result.reason instanceof NotLockOwnerError) return [];
      const { handle, member } = this.members[i]!;
      return [{ member, lockName: handle.name, error: result.reason as unknown }];
    });
    if (failures.length > tolerate) throw new CompositeUnlockError(this.name, failures, this.listed);
    return results.filter((result) => result.status === 'rejected' && result.reason instanceof NotLockOwnerError).length;
  }
}

/**
 * How many of the members a round just took are still held as far as this process knows: one the
 * watchdog keeps (`watchdogKept`: no leaseTime) must still have its entry, not lost. A round whose
 * slowest member answered late may find a faster one already lost (its watchdog found it gone
 * meanwhile, and dropped it): the whole must not be returned as held.
 */
export function stillHeld(members: readonly TakenMember[], watchdogKept: boolean): number {
  if (!watchdogKept) return members.length;
  return members.filter(({ handle }) => {
    const lost = handle.asMember.lostSignal();
    return lost !== undefined && !lost.aborted;
  }).length;
}

/** Settles like `promise`, or resolves with undefined after `ms` (leaving `promise` to run on). */
export async function within<T>(promise: Promise<T>, ms: number | undefined): Promise<T | undefined> {
  if (ms === undefined) return promise;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sleeps `ms` between rounds, or rejects as soon as the caller's `signal` or the close() of any
 * member's client stops it (with that stop's reason: the caller's, or ClientClosedError), so that
 * a closed client settles the call at once and lets the process exit.
 */
export function pause(ms: number, signal: AbortSignal | undefined, members: readonly LockHandle[]): Promise<void> {
  const stops = closesOf(members);
  return boundedWait(ms, signal ? [signal, ...stops] : stops, () => undefined);
}

/** The close() signals of the members' clients, each once, but `except`. */
function closesOf(members: readonly LockHandle[], except?: AbortSignal): AbortSignal[] {
  return [...new Set(members.map((member) => member.asMember.closedSignal))].filter((closed) => closed !== except);
}

/**
 * The caller's `signal` joined with the close() of every member's client but `waited`'s (its own
 * wait listens to that one): for a MultiLock's wait on the member that refused it, which, like
 * the pause between rounds, must end at once when any member's client is closed. Before, it
 * listened to the waited member's client only: with another member's client closed, `lock()`
 * stayed parked until the waited member was freed (for good if it never was), then rejected.
 * `undo` drops the listeners once the wait is over.
 */
export function stopsOfMembers(signal: AbortSignal | undefined, members: readonly LockHandle[], waited: LockHandle): { signal: AbortSignal | undefined; undo: () => void } {
  const others = closesOf(members, waited.asMember.closedSignal);
  if (others.length === 0) return { signal, undo: () => undefined };
  const all = signal ? [signal, ...others] : others;
  const joined = new AbortController();
  const stopped = all.find((stop) => stop.aborted);
  if (stopped) {
    joined.abort(stopped.reason);
    return { signal: joined.signal, undo: () => undefined };
  }
  return { signal: joined.signal, undo: onAbortOfAny(all, (stop) => joined.abort(stop.reason)) };
}

/**
 * Whether a member's acquire that rejected with `error` may have taken the member and must be
 * undone: not when the rejection was the caller's abort (the acquire gives back what it took
 * then), nor for a member that entered the caller's own hold again (`reenters`: its unlock would
 * give back that scope's hold; a hold the acquire may have added goes with the scope).
 */
export function mayHaveRun(handle: LockHandle, error: unknown, signal: AbortSignal | undefined, reenters = scopedOwner(handle.identity) !== undefined): boolean {
  if (signal?.aborted && error === signal.reason) return false;
  return !reenters;
}
