import { atLeaseEnd, leaseRanOut } from '../core/holdScope';
import { LockLostError } from '../errors';

/**
 * The `withPermit` scopes running in this process, by semaphore key and permit id, so that
 * `updateLeaseTime` (through any handle of the semaphore) can tell the scope holding that permit
 * what became of it: a new lease to end the scope at, or the permit gone.
 */
const running = new Map<string, PermitScope>();

/** One `withPermit` scope's view of its permit: when its lease ends, if it has one of its own. */
export class PermitScope {
  private readonly id: string;
  private timer: NodeJS.Timeout | undefined;
  /** The permit has a lease of its own (a `leaseTime`, or one `updateLeaseTime` gave it): no watchdog reports its end. */
  leased = false;
  /** Its loss was reported already (`lockLost`, `rlock:lost`): the scope's end does not report it again. */
  told = false;

  constructor(
    key: string,
    permitId: string,
    private readonly name: string,
    private readonly scope: AbortController,
    /** How its errors name the permit (see `LockLostError`). */
    private readonly what: string,
  ) {
    this.id = `${key}\n${permitId}`;
    running.set(this.id, this);
  }

  /** The permit's lease now ends `leaseTime` ms after `sentAt` (performance.now() of the call that set it): the scope ends then. */
  lease(sentAt: number, leaseTime: number): void {
    this.leased = true;
    clearTimeout(this.timer);
    this.timer = atLeaseEnd(sentAt, leaseTime, () => this.scope.abort(leaseRanOut(this.name, leaseTime, this.what)));
  }

  lose(reason: string): void {
    this.scope.abort(new LockLostError(this.name, reason, this.what));
  }

  stop(): void {
    clearTimeout(this.timer);
    if (running.get(this.id) === this) running.delete(this.id);
  }
}

/** The scope of this process holding permit `permitId` of the semaphore at `key`, if one runs. */
export function permitScopeOf(key: string, permitId: string): PermitScope | undefined {
  return running.get(`${key}\n${permitId}`);
}
