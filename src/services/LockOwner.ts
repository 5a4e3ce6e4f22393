import { AsyncLocalStorage } from 'node:async_hooks';
import { nanoid } from 'nanoid';

/**
 * What Redisson calls a thread: the party whose holds a lock counts, written to the lock hash
 * as the field `<clientId>:<ownerId>`. Every handle is an owner of its own; every outermost
 * `withLock` call is a fresh owner, and code running inside it acts as that owner for the same
 * lock (see docs/design.md, "Owners").
 */
export class LockOwner {
  // nanoid builds its id a character at a time, which V8 keeps as a chain of ~9 cons strings
  // (~300 B); copied once it is one flat 21-byte string. 10 000 parked waiters are 10 000 owners.
  readonly id: string;
  /** Holds this process believes the owner has; Redis's count is the truth, this may lag behind it. */
  holds = 0;
  /** Acquire calls under way. */
  pending = 0;
  /**
   * Acquire calls made, ever (never goes down): a queue's leave sent again after a refusal
   * (`leaveWhileRefused`) goes only while none was made since its first send, or it could take out the
   * entry, or the grant, of the owner's newer wait, written after the first send.
   */
  asked = 0;
  /**
   * Redis counts holds of this owner beyond those it booked: a release meant to give back its
   * last booked hold found more (an acquire that ioredis resent after a reconnect ran twice). The
   * releases that give them back (`releaseAll`) announce nothing: they had no `rlock:acquired`.
   */
  unbookedHolds = false;
  /** Release calls made, to name each one's latch. */
  releases = 0;
  /**
   * What scopes listen to for the loss of this owner's hold on a key (`lostSignal`): kept here,
   * not on the watchdog's entry, so that a hold the owner gives back and takes again inside one
   * scope is still watched (the new hold's entry takes the same controller).
   */
  lossWatches: Map<string, AbortController> | undefined = undefined;
  /**
   * The owner's hold has a fencing token (a FencedLock took it): a plain handle of the same name
   * re-entering it (inside the fenced scope) keeps the token key alive with the lock, or the key
   * ran out at the fenced hold's lease while the lock lived on (see RLock's `renewalTarget`).
   */
  fenced = false;
  /**
   * The owner of a composite's member for one round (`LockHandle.fork`): nothing but that round's
   * one acquire ever acquires as it, so a give-back of holds it may have, made while it books
   * none, cannot meet a newer acquire of its own (a handle's owner may ask again at any moment,
   * and a give-back written after that ask took its new hold: two holders, a third reader's repro).
   */
  singleUse = false;
  /**
   * The outermost `withLock` this owner was made for has ended: the last nested `withLock` still
   * inside (`scopesInside`) ends the scope when it leaves (`LockScopes.leaveScope`). Whether code
   * still acts as this owner is its `ScopeCall`'s business, not this flag's.
   */
  scopeOver = false;
  /**
   * A handle's own owner whose hold was taken with a `leaseTime`: when that lease ends at the
   * latest, performance.now() ms (Redis's TTL counted from the send of the call that set it, so
   * it ends here first). Once it has passed, the hold is gone whatever is booked; a second
   * `lock()` says so (see `LockAcquisition.stillBooked`).
   */
  leasedUntil: number | undefined = undefined;
  /**
   * Scopes nested in this owner's that still run (`withLock` calls, `hold()`s not yet given back,
   * a composite's member that re-entered: `CompositeMember.enteredScope`), counted from the call on
   * (their re-entry may still be on its way to Redis). One `fn` started without awaiting it
   * can outlive the outermost scope: the lock stays theirs until the last of them ends (see
   * `LockScopes.withLock`).
   */
  scopesInside = 0;

  /**
   * Whether what an attempt whose outcome is unknown may have taken is given back: only for a
   * single-use owner that books nothing (see `singleUse`; a re-entry's give-back took the
   * enclosing scope's hold).
   */
  get undoesUnknown(): boolean {
    return this.singleUse && this.holds === 0 && this.pending === 0;
  }
  /** The last release of the owner whose outcome is unknown (it failed): the next release retries it under its latch. */
  unansweredRelease: { readonly field: string; readonly latch: string } | undefined = undefined;
  /** `<clientId>:<id>`, made once for the client that last asked (see `fieldFor`). */
  private field: string | undefined;
  private fieldClientId: string | undefined;

  /**
   * The owner holds nothing from now on (its last hold released, or its holds lost): its next
   * hold is a fresh one, with no token unless a fenced acquire mints one, and no release of an
   * earlier hold is left to retry (a replay of it would pass for the release of the new hold).
   */
  dropHolds(): void {
    this.holds = 0;
    this.leasedUntil = undefined;
    this.unbookedHolds = false;
    this.fenced = false;
    this.unansweredRelease = undefined;
  }

  /** `id`: the id of an owner this one is a facet of (a read-write lock's reads and writes count apart). */
  constructor(id?: string) {
    this.id = id ?? Buffer.from(nanoid(), 'latin1').toString('latin1');
  }

  /**
   * The owner's field in a lock hash of `clientId`'s client. Asked several times per acquire and
   * release (the scripts' arguments, the watchdog's and the handoff's lookups): one string, made
   * once, whose hash the Map lookups compute once.
   */
  fieldFor(clientId: string): string {
    if (this.fieldClientId !== clientId) {
      this.field = `${clientId}:${this.id}`;
      this.fieldClientId = clientId;
    }
    return this.field!;
  }
}

/** One lock of one client: `<clientId>\n<lock key>`. */
type LockIdentity = string;

/**
 * One `withLock` call on a lock (the outermost, or one nested in it as the same owner): `over`
 * once it has ended. Code that runs inside it acts as its owner while this call, or one it is
 * nested in (`parent`), still runs: a nested call that outlives the outermost one keeps its code
 * the owner (its re-entries, `unlock()`, `getHoldCount()`), and code either started that runs on
 * after all of them ended (a timer, a promise chain not awaited) no longer is: before, two such
 * tasks both re-entered the lock as the ended scope's owner and were inside at once.
 */
export interface ScopeCall {
  readonly owner: LockOwner;
  over: boolean;
  readonly parent: ScopeCall | undefined;
}

const scopes = new AsyncLocalStorage<ReadonlyMap<LockIdentity, ScopeCall>>();

/** The owner of the innermost `withLock` on this lock that the calling code runs inside, if any (not once that call, and every call it is nested in, has ended). */
export function scopedOwner(identity: LockIdentity): LockOwner | undefined {
  for (let call = scopes.getStore()?.get(identity); call !== undefined; call = call.parent) if (!call.over) return call.owner;
  return undefined;
}

/**
 * A new `withLock` call on lock `identity` as `owner`: nested in the call the calling code runs
 * inside when that call's owner is `owner` (a re-entry), else one of its own.
 */
export function newScopeCall(identity: LockIdentity, owner: LockOwner): ScopeCall {
  const around = scopes.getStore()?.get(identity);
  return { owner, over: false, parent: around?.owner === owner ? around : undefined };
}

/** Runs `fn` so that code it calls, across awaits, acts as `call`'s owner on that lock while `call` (or a call it is nested in) runs. */
export function runAsOwner<T>(identity: LockIdentity, call: ScopeCall, fn: () => T): T {
  const outer = scopes.getStore();
  const scope = new Map(outer);
  scope.set(identity, call);
  return scopes.run(scope, fn);
}

/**
 * The locks held by the MultiLock/RedLock `withLock` scopes the calling code runs inside (their
 * member forks own them): taking one of them again would wait for itself.
 */
const compositeScopes = new AsyncLocalStorage<ReadonlyMap<LockIdentity, CompositeScope>>();

/** One composite `withLock` call; `over` once it has ended (as a `ScopeCall`). */
export interface CompositeScope {
  over: boolean;
}

/** Whether an enclosing MultiLock/RedLock `withLock`, not ended, holds lock `identity`. */
export function heldByCompositeScope(identity: LockIdentity): boolean {
  const held = compositeScopes.getStore();
  return held !== undefined && heldByCompositeScopeIn(held, identity);
}

/**
 * Runs `fn` inside the composite `withLock` call `scope` that holds the locks `identities` (and
 * those of the composites around it, which keep their own record: an inner one ending does not
 * end theirs).
 */
export function runHoldingMembers<T>(identities: readonly LockIdentity[], scope: CompositeScope, fn: () => T): T {
  const held = new Map(compositeScopes.getStore());
  for (const identity of identities) if (!heldByCompositeScopeIn(held, identity)) held.set(identity, scope);
  return compositeScopes.run(held, fn);
}

function heldByCompositeScopeIn(held: ReadonlyMap<LockIdentity, CompositeScope>, identity: LockIdentity): boolean {
  const scope = held.get(identity);
  return scope !== undefined && !scope.over;
}
