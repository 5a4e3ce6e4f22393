/** An error's message; duck-typed, as errors from another realm (vm, jest) fail `instanceof Error`. */
function messageOf(cause: unknown): string {
  const message = (cause as { message?: unknown } | null | undefined)?.message;
  return typeof message === 'string' ? message : String(cause);
}

/** Base class of every error this library throws, so callers can catch them all at once. */
export class LockError extends Error {
  // Not the lib type ErrorOptions: our declarations must compile under a consumer's default lib.
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A public call got an argument it cannot use. Nothing was sent to Redis. */
export class InvalidArgumentError extends LockError {
  constructor(
    /** The argument or option at fault, e.g. `name` or `options.leaseTime`. */
    readonly argument: string,
    message: string,
  ) {
    super(`${argument}: ${message}`);
  }
}

/** The client was closed: by `close()` before or while the call ran. */
export class ClientClosedError extends LockError {
  constructor() {
    super('the LockClient is closed');
  }
}

/** `unlock()` was called by an owner that holds no hold on the lock (never had one, or lost it). */
export class NotLockOwnerError extends LockError {
  constructor(readonly lockName: string, readonly ownerId: string) {
    super(`lock "${lockName}" is not held by owner ${ownerId} (never taken by it, given back already, or gone: its lease ran out, or it was force-unlocked)`);
  }
}

/** A permit-expirable semaphore's `release(id)` named a permit that is not held (unknown, released, or expired). */
export class PermitNotHeldError extends LockError {
  /**
   * Every permit of the call that was not held: `[permitId]` for one permit; for a list given to
   * `release()`, the ones not held (each of the others was released).
   */
  readonly permitIds: readonly string[];

  constructor(readonly semaphoreName: string, readonly permitId: string, permitIds: readonly string[] = [permitId], given = permitIds.length) {
    super(
      permitIds.length === 1 && given === 1
        ? `permit ${permitId} of semaphore "${semaphoreName}" is not held (unknown, already released, or expired)`
        : `${permitIds.length} of the ${given} permits given to release() of semaphore "${semaphoreName}" were not held (unknown, already released, or expired): ${permitIds.join(', ')}; the other ${given - permitIds.length} were released`,
    );
    this.permitIds = [...permitIds];
  }
}

/** A count-down latch was deleted (`delete()`) while `await` waited on it: it will not open. */
export class LatchDeletedError extends LockError {
  constructor(readonly latchName: string) {
    super(`latch "${latchName}" was deleted while awaited`);
  }
}

/**
 * `withLock` could not take the lock within its `waitTime` (a semaphore's `withPermits` /
 * `withPermit` its permits). `what` is how the message names it: `lock "<name>"` unless said.
 */
export class LockTimeoutError extends LockError {
  constructor(
    readonly lockName: string,
    readonly waitTime: number,
    what = `lock "${lockName}"`,
  ) {
    super(`${what} was not acquired within ${waitTime} ms`);
  }
}

/**
 * A RedLock was not acquired within its `waitTime` because in its last round fewer than a
 * majority of its servers answered at all (down, unreachable, or slower than `attemptTimeout`):
 * an outage, not contention, which is a plain `LockTimeoutError` (or `false` from `tryLock`).
 * A `LockTimeoutError` still, so code that catches those catches this. `causes`: the errors of
 * the members that failed in that round (one that timed out has none).
 */
export class QuorumUnavailableError extends LockTimeoutError {
  constructor(
    lockName: string,
    waitTime: number,
    readonly answered: number,
    readonly servers: number,
    readonly quorum: number,
    readonly causes: unknown[],
  ) {
    super(lockName, waitTime);
    const cause = causes.length > 0 ? ` (${messageOf(causes[0])})` : '';
    this.message = `${this.message}: only ${answered} of ${servers} servers answered, ${quorum} needed${cause}`;
  }
}

/** One member of a MultiLock or RedLock whose release failed: its place in the list, its lock's name, and why. */
export interface MemberFailure {
  member: number;
  lockName: string;
  error: unknown;
}

/**
 * `unlock()` of a MultiLock or RedLock (or the end of its `withLock`) could not confirm the
 * release of some members (their Redis failed or did not answer in time; a RedLock tolerates a
 * minority). Every other member was released, or was not held any more. `failures` names each
 * member that failed and its error; `cause` is the first one. A member whose release failed keeps
 * its lock until its lease ends (or its release, sent, still runs).
 */
export class CompositeUnlockError extends LockError {
  constructor(
    readonly lockName: string,
    readonly failures: readonly MemberFailure[],
    readonly members: number,
  ) {
    const each = failures.map(({ member, lockName: name, error }) => `member ${member} "${name}": ${messageOf(error)}`).join('; ');
    super(`unlock of "${lockName}": ${failures.length} of ${members} members could not be released (${each}); the others were`, { cause: failures[0]?.error });
  }
}

/**
 * The owner no longer holds a lock (or a permit) it believed it held: the watchdog found it gone
 * (expired, force-unlocked, Redis lost its data) or its lease ran out inside `withLock`. `what`
 * is how the message names it: `lock "<name>"` unless said (a permit names its semaphore).
 */
export class LockLostError extends LockError {
  constructor(
    readonly lockName: string,
    reason: string,
    what = `lock "${lockName}"`,
  ) {
    super(`${what} was lost: ${reason}`);
  }
}

/**
 * A lock handle was used in a way that would silently break mutual exclusion, such as two
 * concurrent tasks calling `lock()` on one handle outside a `withLock` scope.
 */
export class LockUsageError extends LockError {}

/** ioredis's error for the calls it flushes as it ends a connection (its CONNECTION_CLOSED_ERROR_MSG). */
const CONNECTION_CLOSED = 'Connection is closed.';

function messageOfCause(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause ?? '');
}

/**
 * Error codes of a server that refused a call without running it and will accept it again soon:
 * a failover, loading its data, a Cluster slot in flux (see `RedisCommandError.transient`).
 */
export const TRANSIENT_CODES: readonly string[] = ['CLUSTERDOWN', 'TRYAGAIN', 'LOADING', 'MASTERDOWN', 'MOVED', 'ASK'];

/** Redis answered a lock command with an error (OOM, READONLY, WRONGTYPE, ...). */
export class RedisCommandError extends LockError {
  /** Redis's error code, the first word of its reply (`OOM`, `READONLY`, ...), when it gave one. */
  readonly code: string | undefined;

  constructor(readonly command: string, cause: unknown, message?: string, code?: string) {
    const text = messageOf(cause);
    super(message ?? `${command} failed: ${text}`, { cause });
    // ioredis wraps a Cluster's last error: "Too many Cluster redirections. Last error: ReplyError: CLUSTERDOWN ..."
    this.code = code ?? /^([A-Z][A-Z_]+) /.exec(text)?.[1] ?? /Last error: \w*Error: ([A-Z][A-Z_]+) /.exec(text)?.[1];
  }

  /**
   * Redis refused the call without running it, and will accept it again soon: a failover, a
   * server loading its data, or a slot in flux (ioredis gave up following MOVED/ASK redirections
   * while nodes disagreed on the slot's owner). Also a call ioredis flushed unanswered as it ended
   * its connection for good ("Connection is closed."), which the client makes again: that one may
   * have run (see docs/reliability.md, fault 15).
   */
  get transient(): boolean {
    if (this.code !== undefined && TRANSIENT_CODES.includes(this.code)) return true;
    const cause = messageOfCause(this.cause);
    // ioredis gave up following a Cluster's redirections while a node was going away (its last
    // error "Connection is closed." carries no code): the slot is in flux, as with MOVED. Or it
    // ended the connection under the call: its Sentinel connector gives up so when a failover is
    // announced while it remakes the connection (docs/topologies.md). A wait then asks again once
    // the connection is made again instead of failing; a give-back, under its latch, is sent again.
    return cause === CONNECTION_CLOSED || /Too many Cluster redirections/.test(cause);
  }
}

/**
 * `client.inspect(name)` was asked about a name that holds a semaphore, a permit-expirable
 * semaphore or a count-down latch (`kind`): it answers for locks only (`LockInfo`). `use` is the
 * call that answers for that kind, e.g. `getSemaphore("x").inspect()`. A `RedisCommandError`
 * with code `WRONGTYPE` still, as the same call rejected before it named the kind.
 */
export class WrongKindError extends RedisCommandError {
  constructor(
    readonly lockName: string,
    readonly kind: 'semaphore' | 'permits' | 'latch',
    readonly use: string,
  ) {
    const what = kind === 'semaphore' ? 'a semaphore' : kind === 'permits' ? 'a permit-expirable semaphore' : 'a count-down latch';
    super('inspect', undefined, `inspect: "${lockName}" is ${what}, not a lock: call ${use} instead`, 'WRONGTYPE');
  }
}

/**
 * The call was not sent: the client could not reach Redis. `address` is where it tried
 * (`host:port`), `code` the cause: a network error (`ECONNREFUSED`, `ENOTFOUND`, `ETIMEDOUT`
 * also when the client's `offlineTimeout` ran out, ...) or Redis's refusal (`WRONGPASS`, `NOAUTH`).
 */
export class RedisUnreachableError extends RedisCommandError {
  constructor(command: string, readonly address: string, cause: unknown) {
    const text = messageOf(cause);
    const code = (cause as { code?: unknown } | undefined)?.code;
    // The code named too: a TLS failure's message alone ("self-signed certificate") hides which check failed.
    const named = typeof code === 'string' && !text.includes(code) ? ` (${code})` : '';
    super(command, cause, `${command}: cannot reach Redis at ${address}: ${text}${named}`, typeof code === 'string' ? code : undefined);
  }
}
