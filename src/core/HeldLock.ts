/**
 * A hold taken by `lock.hold()`, for `await using held = await lock.hold()`: the end of the
 * scope gives it back. Releasing twice is harmless (the second call answers what the first did).
 */
export class HeldLock {
  private released: Promise<void> | undefined;

  /** @internal Made by `hold()`. */
  constructor(
    /** The lock's name. */
    readonly name: string,
    /** Aborts when the lock is lost (the watchdog found it gone, or `leaseTime` ran out) or the call's `signal` aborts. */
    readonly signal: AbortSignal,
    private readonly giveBack: () => Promise<void>,
  ) {}

  /**
   * Gives the hold back. Rejects with `LockLostError` when the lock was lost while held, as
   * `withLock` does, so that a scope that ended normally still reports the loss.
   */
  release(): Promise<void> {
    return (this.released ??= this.giveBack());
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
