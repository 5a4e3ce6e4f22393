import { InvalidArgumentError } from '../errors';
import { checkPlainObject, checkSignal, checkTime, describe } from '../options';

/** The largest permit count or delta accepted (Redis counts in 64 bits; this keeps sums exact in JS). */
export const MAX_PERMITS = 2_147_483_647;

export interface PermitOptions {
  /** Permits to take or give back at once. Default 1. */
  permits?: number;
  /** Aborting rejects the call with `signal.reason` and leaves nothing behind. */
  signal?: AbortSignal;
}

/** How long Redis remembers an `operationId` (of a count down, a release, an addPermits) after its call. */
export const OPERATION_ID_TTL_MS = 10 * 60_000;

export interface OperationOptions {
  /**
   * The caller's id of this call (1 to 100 characters): a second call with the same id changes
   * nothing, so a call whose outcome is unknown (it rejected with `RedisCommandError` after the
   * connection dropped) may be made again, by any process. An idempotency key, remembered 10
   * minutes (OPERATION_ID_TTL_MS) from the id's first run (a latch's ids: from its latest count
   * down): make it unique for the primitive, with the job, round or batch in it, and retry within
   * about 9 minutes of the first call (a retry's resend later than that could count again). With an id, a call whose connection drops before its reply
   * rejects `offlineTimeout` after the drop, as an `unlock()` does; without one, it waits for
   * ioredis to resend it (a retry would count it twice).
   */
  operationId?: string;
}

/** What a semaphore's `release` takes: how many permits, and the caller's id of the call. */
export interface ReleaseOptions extends OperationOptions {
  /** Permits to give back at once. Default 1. */
  permits?: number;
}

export interface TryPermitOptions extends PermitOptions {
  /** How long to wait, in ms. Default 0: a single attempt. */
  waitTime?: number;
}

export interface ExpirablePermitOptions {
  /** Lease in ms after which the permit comes back by itself; omit to have the watchdog keep it. */
  leaseTime?: number;
  signal?: AbortSignal;
}

export interface TryExpirablePermitOptions extends ExpirablePermitOptions {
  /** How long to wait, in ms. Default 0: a single attempt. */
  waitTime?: number;
}

export interface AwaitOptions {
  /** How long to wait for the count to reach 0, in ms. Default: as long as it takes. */
  waitTime?: number;
  signal?: AbortSignal;
  /**
   * Wait while the latch was never set (Redisson's await returns at once then, the count of a
   * missing key reading 0): resolve only once a count was set and reached 0. Default false.
   */
  requireInit?: boolean;
}

/** A whole number within [min, MAX_PERMITS] (or ±MAX_PERMITS when `min` is negative). */
export function checkCount(argument: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < Math.max(min, -MAX_PERMITS) || value > MAX_PERMITS) {
    throw new InvalidArgumentError(argument, `must be a whole number from ${Math.max(min, -MAX_PERMITS)} to ${MAX_PERMITS}, got ${describe(value)}`);
  }
  return value;
}

interface Checked {
  permits: number;
  waitTime: number | undefined;
  leaseTime: number | undefined;
  signal: AbortSignal | undefined;
  requireInit: boolean;
  operationId: string | undefined;
}

/** Validates the options object of a semaphore or latch call; `allowed` lists the keys it takes. */
export function checkPermitOptions(options: unknown, allowed: readonly ('permits' | 'waitTime' | 'leaseTime' | 'signal' | 'requireInit' | 'operationId')[]): Checked {
  if (options === undefined) return { permits: 1, waitTime: undefined, leaseTime: undefined, signal: undefined, requireInit: false, operationId: undefined };
  const raw = checkPlainObject('options', options, allowed);
  return {
    permits: raw.permits === undefined ? 1 : checkCount('options.permits', raw.permits, 1),
    waitTime: checkTime('options.waitTime', raw.waitTime, 0),
    leaseTime: checkTime('options.leaseTime', raw.leaseTime, 1),
    signal: checkSignal('options.signal', raw.signal),
    requireInit: checkFlag('options.requireInit', raw.requireInit),
    operationId: checkOperationId(raw.operationId),
  };
}

function checkFlag(argument: string, value: unknown): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new InvalidArgumentError(argument, `must be a boolean, got ${describe(value)}`);
  return value === true;
}

/** A latch's `countDown` options (see OperationOptions: with an id, it counts once per id). */
export type CountDownOptions = OperationOptions;

/** The `operationId` of a `countDown` or `addPermits` options object, checked. */
export function checkOperationOptions(options: unknown): string | undefined {
  if (options === undefined) return undefined;
  return checkOperationId(checkPlainObject('options', options, ['operationId']).operationId);
}

function checkOperationId(operationId: unknown): string | undefined {
  if (operationId !== undefined && (typeof operationId !== 'string' || operationId.length === 0 || operationId.length > 100)) {
    throw new InvalidArgumentError('options.operationId', `must be a string of 1 to 100 characters, got ${describe(operationId)}`);
  }
  return operationId;
}

/** Checks a permit id given back to a permit-expirable semaphore. */
export function checkPermitId(value: unknown, argument = 'permitId'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) {
    throw new InvalidArgumentError(argument, `must be a permit id returned by acquire(), got ${describe(value)}`);
  }
  return value;
}

/** The most permit ids one release() or tryRelease() takes. */
export const MAX_PERMIT_IDS = 1_000;

/** Checks a list of permit ids given back at once: each an id, none twice (the second would read as "not held"). */
export function checkPermitIds(value: readonly unknown[]): string[] {
  if (value.length > MAX_PERMIT_IDS) throw new InvalidArgumentError('permitIds', `must list at most ${MAX_PERMIT_IDS} permit ids, got ${value.length}`);
  const seen = new Set<string>();
  // A plain loop, not map: map skips the holes of a sparse array.
  const ids: string[] = [];
  for (let i = 0; i < value.length; i++) {
    const id = checkPermitId(value[i], `permitIds[${i}]`);
    if (seen.has(id)) throw new InvalidArgumentError(`permitIds[${i}]`, `is permit ${id}, listed already`);
    seen.add(id);
    ids.push(id);
  }
  return ids;
}

