import { LatchDeletedError } from '../errors';
import { subscriberCount, type LatchInfo, type LatchState } from '../introspection';
import { kindKeyOf, latchChannelOf, latchOpsKeyOf, latchRoundsKeyOf, RELEASE_LATCH_TTL_MS } from '../names';
import { type CommandBound, IDEMPOTENT, type LockContext } from '../services/LockContext';
import type { PublishCommand, ScriptedRedis } from '../services/scripts';
import { checkCount, checkOperationOptions, checkPermitOptions, OPERATION_ID_TTL_MS, type AwaitOptions, type CountDownOptions } from './permitOptions';
import { type Attempt, Primitive } from './Primitive';

/** The scripts of src/lua/latch/, as `defineCommand` adds them. */
interface LatchScripts {
  rlock_latch_trySetCount(key: string, kindKey: string, latch: string, roundsKey: string, count: number, latchTtlMs: number): Promise<0 | 1>;
  rlock_latch_countDown(key: string, channel: string, opsKey: string, roundsKey: string, kindKey: string, publish: PublishCommand, opId: string, opTtlMs: number, notAfter: number): Promise<number>;
  rlock_latch_delete(key: string, kindKey: string, channel: string, latch: string, roundsKey: string, publish: PublishCommand, deletedTtlMs: number, latchTtlMs: number, notAfter: number): Promise<0 | 1>;
  rlock_latch_read(key: string, kindKey: string, roundsKey: string, since: string, exact: 0 | 1): Promise<[string | null, string | null, string | null, RoundOutcome | null, string | null]>;
}

const scripts = (redis: ScriptedRedis): LatchScripts => redis as unknown as LatchScripts;

/** How a round of the latch ended (see lua/includes/latchRounds.lua). */
type RoundOutcome = 'open' | 'deleted' | 'lost';

/** How long a deleted latch says so: its awaiters, woken by the delete's message, read it within ms. */
export const LATCH_DELETED_TTL_MS = 60_000;

/**
 * Redisson's RCountDownLatch: a count at `<keyPrefix><name>`. `await` resolves once the count is
 * 0; the `countDown` that reaches 0 deletes the count and wakes every awaiter with one message.
 * Unlike Redisson, a latch knows whether it was never set, opened or deleted (a marker key, see
 * `LatchState`): `await({ requireInit: true })` waits on a latch never set, and a `delete()`
 * makes its awaiters reject with `LatchDeletedError` instead of resolving as if it opened. Each
 * `countDown` carries an operation id, so that one resent after a lost reply counts once.
 */
export class CountDownLatch extends Primitive {
  private readonly channel: string;
  private readonly kindKey: string;
  private readonly opsKey: string;
  private readonly roundsKey: string;

  /** @internal Use `client.getCountDownLatch(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
    this.channel = latchChannelOf(context.keyPrefix, this.key);
    this.kindKey = kindKeyOf(context.keyPrefix, this.key);
    this.opsKey = latchOpsKeyOf(context.keyPrefix, this.key);
    this.roundsKey = latchRoundsKeyOf(context.keyPrefix, this.key);
  }

  /** Sets the count (>= 1) if none is set; true when it did. */
  async trySetCount(count: number): Promise<boolean> {
    checkCount('count', count, 1);
    this.context.assertOpen();
    const latch = this.requestLatch(); // a resend after a lost reply answers what the first run did
    return (await this.context.command('trySetCount', (redis) => scripts(redis).rlock_latch_trySetCount(this.key, this.kindKey, latch, this.roundsKey, count, RELEASE_LATCH_TTL_MS))) === 1;
  }

  /**
   * Counts down by one (never below 0; once per call, even when resent after a reconnect); the one
   * that reaches 0 opens the latch. With `operationId`, once per id: a caller that does not know
   * whether a failed call counted (with an id, a call whose connection drops rejects
   * `offlineTimeout` after the drop, its outcome unknown) may call again with the same id. Ids
   * are remembered across the latch's rounds until 10 minutes pass without a count down: make
   * them unique for the latch (with the round or batch in them).
   */
  async countDown(options?: CountDownOptions): Promise<void> {
    const operationId = checkOperationOptions(options);
    this.context.assertOpen();
    const publish = await this.publishCommand();
    // A caller's id is kept apart from the calls' own ids (nanoids), which it could spell.
    const opId = operationId === undefined ? this.newId() : `op:${operationId}`;
    // The recorded ids outlive any resend by ioredis (its offline queue), so that none counts twice.
    const run = (redis: ScriptedRedis, notAfter: number): Promise<number> => scripts(redis).rlock_latch_countDown(this.key, this.channel, this.opsKey, this.roundsKey, this.kindKey, publish, opId, OPERATION_ID_TTL_MS, notAfter);
    // With the caller's id, a call whose connection drops ends at offlineTimeout: its retry is safe.
    // The deadline's window: its own record's for a fresh id; a request latch's for the caller's id,
    // whose record may date from a first call minutes before this one (see Primitive.counted).
    await this.counted('countDown', operationId === undefined ? OPERATION_ID_TTL_MS : RELEASE_LATCH_TTL_MS, run, operationId === undefined ? undefined : IDEMPOTENT);
  }

  /**
   * Deletes the latch (its count, or its opened state); every `await` on it rejects with
   * `LatchDeletedError`, and so does one that starts within LATCH_DELETED_TTL_MS. True when there
   * was a latch to delete.
   */
  async delete(): Promise<boolean> {
    this.context.assertOpen();
    const publish = await this.publishCommand();
    const latch = this.requestLatch(); // a resend after a lost reply deletes nothing set since
    return (await this.counted('delete', RELEASE_LATCH_TTL_MS, (redis, notAfter) => scripts(redis).rlock_latch_delete(this.key, this.kindKey, this.channel, latch, this.roundsKey, publish, LATCH_DELETED_TTL_MS, RELEASE_LATCH_TTL_MS, notAfter))) === 1;
  }

  /** The count now (0: open, never set, or deleted). */
  async getCount(): Promise<number> {
    this.context.assertOpen();
    return (await this.read()).count;
  }

  /** `closed` (a count is set), `open` (it reached 0), `unset` (never set), or `deleted` (for a while after `delete()`). */
  async getState(): Promise<LatchState> {
    this.context.assertOpen();
    return (await this.read()).state;
  }

  /**
   * Waits until the count is 0, at most `waitTime` ms (default: as long as it takes) or until
   * `signal` aborts (rejects with its reason); true when the latch opened, false on timeout. A
   * latch never set counts as open, as in Redisson, unless `requireInit`; a deleted one rejects
   * with `LatchDeletedError`. It waits for the round it found counting: a latch that opened and
   * was set again before this awaiter looked again has opened for it.
   */
  async await(options?: AwaitOptions): Promise<boolean> {
    const { waitTime, signal, requireInit } = checkPermitOptions(options, ['waitTime', 'signal', 'requireInit']);
    this.context.assertOpen();
    // The round this awaiter waits for: the one it found counting (`exact`), or, found never set
    // (requireInit) or without rounds, the first one from `since` on. None for a latch set by a
    // version that kept no rounds.
    let since: string | undefined;
    let exact = false;
    const attempt = async (_listening: unknown, bound: CommandBound): Promise<Attempt> => {
      const sentAt = performance.now();
      // A read: an answer that comes after the wait ended has nothing to give back.
      // `round`: the round counting now (none for a count set by a client without rounds);
      // `latest`: the latest round's id, counting or not (none: no rounds at all).
      const { state, round, outcome, latest } = await this.read({ ...bound, lateReply: () => undefined }, since, exact);
      const opened = { held: true, sentAt } as const;
      if (outcome === 'open') return opened;
      // 'lost': its round is gone without a trace (deleted and expired, or a restart's loss, with a round set since).
      if (outcome === 'deleted' || outcome === 'lost' || state === 'deleted') throw new LatchDeletedError(this.name);
      // No rounds at all: the data is gone (a restart without persistence; or deleted, and its
      // rounds expired since): the latch is what it reads now, as for a new awaiter.
      if (latest === undefined) [since, exact] = [undefined, false];
      if (state === 'open' || (state === 'unset' && !requireInit)) return opened;
      if (state === 'closed' && round !== undefined && !exact) [since, exact] = [round, true];
      // Found no round counting: waits for the first one after the latest (a count set by a
      // client without rounds opens by the state it reads).
      else if (!exact) since = String(Number(latest ?? 0) + 1);
      return { held: false, ttl: -1 };
    };
    return (await this.wait(this.newId(), this.channel, attempt, waitTime ?? Infinity, signal)) !== undefined;
  }

  /** The count, the state, and how many clients have awaiters on it. */
  async inspect(): Promise<LatchInfo> {
    this.context.assertOpen();
    const sharded = (await this.publishCommand()) === 'spublish';
    const { count, state } = await this.read();
    const waitingClients = await this.context.command('inspect', (redis) => subscriberCount(redis, this.channel, sharded));
    return { name: this.name, key: this.key, count, state, waitingClients };
  }

  /**
   * The count and the marker in one call (one slot: the marker and the rounds are named after
   * the key), the current round, and how the awaited round ended; see latch/read-3.lua.
   */
  private async read(bound?: CommandBound, since = '', exact = false): Promise<{ count: number; state: LatchState; round?: string; outcome?: RoundOutcome; latest?: string }> {
    const [count, marker, round, outcome, latest] = await this.context.command('getCount', (redis) => scripts(redis).rlock_latch_read(this.key, this.kindKey, this.roundsKey, since, exact ? 1 : 0), bound);
    return { ...latchStateOf(count ?? null, marker ?? null), round: round ?? undefined, outcome: outcome ?? undefined, latest: latest ?? undefined };
  }
}

/** The state of a latch from its count and its kind marker. */
export function latchStateOf(count: string | null, marker: string | null): { count: number; state: LatchState } {
  if (count !== null) return { count: Math.max(0, Number(count)), state: 'closed' };
  if (marker === 'latch') return { count: 0, state: 'open' };
  return { count: 0, state: marker === 'deleted' ? 'deleted' : 'unset' };
}
