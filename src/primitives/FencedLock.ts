import calculateSlot from 'cluster-key-slot';
import { InvalidArgumentError, LockUsageError } from '../errors';
import { MAX_NAME_BYTES } from '../options';
import type { LockInfo } from '../introspection';
import { fencedByKeyOf, INTERNAL_KEY_MARK, kindKeyOf } from '../names';
import { type LockOptions, type TryLockOptions, type WithLockOptions } from '../options';
import type { LockContext } from '../services/LockContext';
import type { LockOwner } from '../services/LockOwner';
import { RLock } from './lock/RLock';

/** The script this primitive adds (lua/fencedLock/), beside the plain lock's. */
interface FencedScripts {
  rlock_fencedLock_token(key: string, tokenKey: string): Promise<string | null>;
  rlock_fencedLock_fencedSet(dataKey: string, fenceKey: string, kindKey: string, token: string, value: string): Promise<-2 | -1 | 0 | 1>;
}


/** The largest token fencedSet takes (see there). */
const MAX_TOKEN = 2n ** 63n - 1n;
/**
 * The plain lock with a fencing token: the same hash, release, watchdog and wake-up as `RLock`,
 * only its acquire script also mints the token on a first acquire and answers it on every one.
 */
class FencedHold extends RLock {
  /** The token of each owner's current hold; an owner is gone with its handle or withLock call. */
  private readonly tokens = new WeakMap<LockOwner, bigint>();

  /** Every hold must come from the acquire script, which mints its token: no handoff between waiters. */
  protected override get handsOverLocally(): boolean {
    return false;
  }

  protected override acquireScript(): { command: string; keys: string[] } {
    return { command: 'rlock_fencedLock_acquire', keys: [...this.queue.keys, this.tokenKey] };
  }

  /** The hold has a token: the watchdog extends the token key with the lock (RLock's renewalTarget), so it lives as long as the lock. */
  protected override held(owner: LockOwner, reply: unknown): void {
    owner.fenced = true;
    // A re-entry that took the lock afresh answers its new token in a table (see RLock).
    this.tokens.set(owner, BigInt(String(Array.isArray(reply) ? reply[0] : reply)));
  }

  /** The token of the current owner's hold (it just acquired). */
  currentToken(): bigint {
    const token = this.tokens.get(this.currentOwner());
    if (token === undefined) throw new Error('no token was recorded for this hold');
    return token;
  }
}

/**
 * A lock whose every first acquire returns a fencing token (a bigint) greater than every token
 * minted before for this name, even after Redis lost its data (see lua/fencedLock/acquire-4.lua).
 * Hand the token to the storage the lock protects, which must refuse a write carrying a token
 * lower than one it has already seen: a holder that paused past its lease then cannot overwrite
 * its successor's work (docs/topologies.md, "Fencing tokens"). A reentrant hold keeps its token.
 */
export class FencedLock {
  private readonly hold: FencedHold;

  /** @internal Use `client.getFencedLock(name)`. */
  constructor(private readonly context: LockContext, name: unknown) {
    this.hold = new FencedHold(context, name);
  }

  get name(): string {
    return this.hold.name;
  }

  /** The Redis key of the lock hash: `<keyPrefix><name>`. */
  get key(): string {
    return this.hold.key;
  }

  /** Waits as long as it takes (or until `signal` aborts), takes the lock and resolves with its token. */
  async lock(options?: LockOptions): Promise<bigint> {
    await this.hold.lock(options);
    return this.hold.currentToken();
  }

  /** Takes the lock if it can within `waitTime` (default: one attempt): its token, or null. */
  async tryLock(options?: TryLockOptions): Promise<bigint | null> {
    return (await this.hold.tryLock(options)) ? this.hold.currentToken() : null;
  }

  /** Gives back one hold; throws `NotLockOwnerError` when the current owner holds none. */
  unlock(): Promise<void> {
    return this.hold.unlock();
  }

  /** As `RLock.withLock`; `fn` also gets the hold's token. */
  async withLock<T>(fn: (signal: AbortSignal, token: bigint) => T | Promise<T>, options?: WithLockOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`);
    return this.hold.withLock((signal) => fn(signal, this.hold.currentToken()), options);
  }

  /** The current holder's token (whoever holds it), or null when the lock is free. */
  async getToken(): Promise<bigint | null> {
    this.context.assertOpen();
    const { key } = this;
    const token = await this.context.command('getToken', (redis) => (redis as unknown as FencedScripts).rlock_fencedLock_token(key, this.hold.tokenKey));
    return token === null ? null : BigInt(token);
  }

  /**
   * What a storage must do with the token, for data kept in Redis: writes `value` to `dataKey`
   * (your own key, no prefix added) only if `token` is not older than the newest token a write
   * to it was accepted with; true when written. A holder that paused past its lease, whose
   * successor has written since, gets false and must stop. Storage elsewhere must do the same
   * check atomically with its write (see docs/topologies.md, "Fencing tokens").
   */
  async fencedSet(dataKey: string, value: string, token: bigint): Promise<boolean> {
    if (typeof dataKey !== 'string' || dataKey.length === 0 || Buffer.byteLength(dataKey) > MAX_NAME_BYTES) {
      throw new InvalidArgumentError('dataKey', `must be a non-empty string of at most ${MAX_NAME_BYTES} bytes`);
    }
    if (typeof value !== 'string') throw new InvalidArgumentError('value', `must be a string, got ${typeof value}`);
    // Tokens are Redis's clock in µs (or one more than the last): far below 2^63 for ages. A
    // larger one no lock mints would fence the key against every real token for good.
    if (typeof token !== 'bigint' || token < 1n || token > MAX_TOKEN) throw new InvalidArgumentError('token', 'must be a token (a positive bigint below 2^63) from lock(), tryLock() or withLock()');
    // The lock's own keys are not data: written as a string, the lock's hash was gone for good
    // (every call on the name failed with WRONGTYPE, forceUnlock and the CLI too).
    if (dataKey === this.key || dataKey.startsWith(`${this.context.keyPrefix}${INTERNAL_KEY_MARK}`)) {
      throw new InvalidArgumentError('dataKey', `must be a key of your data, not the lock's own key or one of the library's (under "${this.context.keyPrefix}${INTERNAL_KEY_MARK}"), got ${JSON.stringify(dataKey)}`);
    }
    const fenceKey = fencedByKeyOf(this.context.keyPrefix, dataKey);
    // The script names both keys: on a Cluster they must share a slot. A keyPrefix with a hash
    // tag puts the fence in the prefix's slot; a data key without that tag is elsewhere, and every
    // write failed with CROSSSLOT. Told here, with what to do.
    if (this.context.isCluster && calculateSlot(fenceKey) !== calculateSlot(dataKey)) {
      throw new InvalidArgumentError('dataKey', `must hash to the Cluster slot of its fence, which the keyPrefix's hash tag decides: give it the same tag (e.g. "${this.context.keyPrefix}${dataKey.slice(0, 40)}")`);
    }
    this.context.assertOpen();
    const written = await this.context.command('fencedSet', (redis) =>
      (redis as unknown as FencedScripts).rlock_fencedLock_fencedSet(dataKey, fenceKey, kindKeyOf(this.context.keyPrefix, dataKey), token.toString(), value),
    );
    if (written === -1) throw new LockUsageError(`fencedSet: data key ${JSON.stringify(dataKey)} holds a hash (another lock's?), which it would have replaced; nothing written`);
    if (written === -2) throw new LockUsageError(`fencedSet: data key ${JSON.stringify(dataKey)} is the count of a semaphore or a latch, which it would have replaced; nothing written`);
    return written === 1;
  }

  isLocked(): Promise<boolean> {
    return this.hold.isLocked();
  }

  isHeldByCurrentOwner(): Promise<boolean> {
    return this.hold.isHeldByCurrentOwner();
  }

  getHoldCount(): Promise<number> {
    return this.hold.getHoldCount();
  }

  remainTimeToLive(): Promise<number> {
    return this.hold.remainTimeToLive();
  }

  /** Deletes the lock whoever holds it; the token key lives out its lease, and the next token is larger either way. */
  forceUnlock(): Promise<boolean> {
    return this.hold.forceUnlock();
  }

  inspect(): Promise<LockInfo> {
    return this.hold.inspect();
  }
}
