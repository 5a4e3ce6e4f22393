import { subscriberCount, type LatchInfo } from '../introspection';
import { RELEASE_LATCH_TTL_MS } from '../core/LockHandle';
import { latchChannelOf, latchPrefixOf } from '../names';
import type { LockContext } from '../services/LockContext';
import type { PublishCommand, ScriptedRedis } from '../services/scripts';
import { checkCount, checkPermitOptions, type AwaitOptions } from './permitOptions';
import { type Attempt, Primitive } from './Primitive';

/** The scripts of src/lua/latch/, as `defineCommand` adds them. */
interface LatchScripts {
  rlock_latch_trySetCount(key: string, count: number): Promise<0 | 1>;
  rlock_latch_countDown(key: string, channel: string, latch: string, publish: PublishCommand, latchTtlMs: number): Promise<number>;
}

const scripts = (redis: ScriptedRedis): LatchScripts => redis as unknown as LatchScripts;

/**
 * Redisson's RCountDownLatch: a count at `<keyPrefix><name>`. `await` resolves once the count is
 * 0 (a missing key, as in Redisson: a latch never set, or one that opened, is open); the
 * `countDown` that reaches 0 deletes the key and wakes every awaiter with one message.
 */
export class CountDownLatch extends Primitive {
  private readonly channel: string;

  /** @internal Use `client.getCountDownLatch(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
    this.channel = latchChannelOf(context.keyPrefix, this.key);
  }

  /** Sets the count (>= 1) if none is set; true when it did. */
  async trySetCount(count: number): Promise<boolean> {
    checkCount('count', count, 1);
    this.context.assertOpen();
    return (await this.context.command('trySetCount', (redis) => scripts(redis).rlock_latch_trySetCount(this.key, count))) === 1;
  }

  /**
   * Counts down by one (never below 0); the one that reaches 0 opens the latch. Once per call:
   * a call that ioredis resends after a reconnect is answered from its request latch.
   */
  async countDown(): Promise<void> {
    this.context.assertOpen();
    const publish = await this.publishCommand();
    const latch = `${latchPrefixOf(this.context.keyPrefix, this.key)}${this.context.clientId}:${this.newId()}`;
    await this.context.command('countDown', (redis) => scripts(redis).rlock_latch_countDown(this.key, this.channel, latch, publish, RELEASE_LATCH_TTL_MS));
  }

  /** The count now (0: open). */
  async getCount(): Promise<number> {
    this.context.assertOpen();
    return this.readCount();
  }

  /**
   * Waits until the count is 0, at most `waitTime` ms (default: as long as it takes) or until
   * `signal` aborts (rejects with its reason); true when the latch opened, false on timeout.
   */
  async await(options?: AwaitOptions): Promise<boolean> {
    const { waitTime, signal } = checkPermitOptions(options, ['waitTime', 'signal']);
    this.context.assertOpen();
    const attempt = async (): Promise<Attempt> => {
      const sentAt = performance.now();
      return (await this.readCount()) === 0 ? { held: true, sentAt } : { held: false, ttl: -1 };
    };
    return (await this.wait(this.newId(), this.channel, attempt, waitTime ?? Infinity, signal)) !== undefined;
  }

  /** The count and how many clients have awaiters on it. */
  async inspect(): Promise<LatchInfo> {
    this.context.assertOpen();
    const sharded = (await this.publishCommand()) === 'spublish';
    const count = await this.readCount();
    const waitingClients = await this.context.command('inspect', (redis) => subscriberCount(redis, this.channel, sharded));
    return { name: this.name, key: this.key, count, waitingClients };
  }

  private async readCount(): Promise<number> {
    const value = await this.context.command('getCount', (redis) => redis.get(this.key));
    return value === null ? 0 : Math.max(0, Number(value));
  }
}
