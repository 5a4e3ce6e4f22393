// Fault 15: ioredis ends the client's command connection for good under a call in flight. It does
// so when its Sentinel connector gives up as a failover is announced while it remakes the
// connection (docs/topologies.md; a clean-clone CI run caught faults/09's waiter failing so). The
// client makes the connection again (reviveWhenEnded), but the calls ioredis had in its queues are
// flushed with "Connection is closed.", unanswered: they may have run. Here the end is brought
// about by disconnect() while Redis is paused, which flushes them the same way.
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { type LockClient, RedisCommandError } from '../../src';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { atNextScript, usePrivateRedis } from '../helpers/privateRedis';
import { until } from '../helpers/time';

const redis = usePrivateRedis();

/** The client's command connection (client internals). */
const connectionOf = (client: LockClient): Redis => (client as unknown as { redis: Redis }).redis;

test.each(heldKindNames)(
  '%s: a wait whose attempt ioredis flushed unanswered as it ended the connection for good rides it out: it takes the lock once the connection is made again, and its release leaves nothing held',
  async (kindName) => {
    const kind = heldKinds[kindName];
    const name = `ended-${kindName}`;
    const client = redis.client();
    await kind.prepare?.(client, name);
    await client.getLock(name).isLocked(); // the connection is ready before Redis pauses
    const connection = connectionOf(client);
    redis.server.pause(); // the attempt goes out and stays unanswered
    const sent = atNextScript(client, () => undefined);
    const taking = kind.hold(client, name);
    taking.catch(() => undefined); // awaited below; not unhandled while the connection ends
    await sent; // the attempt is on the wire
    const ended = once(connection, 'end');
    connection.disconnect(); // ioredis flushes its queues with "Connection is closed."
    await ended;
    redis.server.resume(); // Redis may still run the attempt it had read
    // Before: the wait rejected with RedisCommandError "acquire failed: Connection is closed.".
    const release = await taking;
    expect(connection.status).toBe('ready'); // made again
    expect(await kind.free(client, redis.admin, name)).toBe(false);
    await release();
    // What the flushed attempt took, if Redis ran it, went back too.
    await until('nothing is held', () => kind.free(client, redis.admin, name));
  },
);

/** Ends `client`'s command connection for good under the script call `start` sends, Redis paused meanwhile. */
async function endUnderScript<T>(client: LockClient, start: () => Promise<T>): Promise<{ call: Promise<T> }> {
  const connection = connectionOf(client);
  redis.server.pause();
  const sent = atNextScript(client, () => undefined);
  const call = start();
  call.catch(() => undefined); // awaited by the caller
  await sent;
  const ended = once(connection, 'end');
  connection.disconnect();
  await ended;
  redis.server.resume();
  return { call };
}

test('an unlock() whose release ioredis flushed unanswered as it ended the connection is sent again (under its latch): the lock is released, once', async () => {
  const name = 'ended-unlock';
  const client = redis.client();
  const lock = client.getLock(name);
  await lock.lock();
  // Before: unlock() rejected with RedisCommandError "release failed: Connection is closed.", the lock kept for its lease.
  const { call: unlocking } = await endUnderScript(client, () => lock.unlock());
  await unlocking;
  expect(await redis.admin.exists(name)).toBe(0);
  expect(await lock.getHoldCount()).toBe(0);
});

test('a single attempt (tryLock without waitTime) flushed so reports it: RedisCommandError, transient, and the next try takes the lock', async () => {
  const name = 'ended-try';
  const client = redis.client();
  await client.getLock(name).isLocked(); // the connection is ready before Redis pauses
  const lock = client.getLock(name);
  const { call: trying } = await endUnderScript(client, () => lock.tryLock());
  const error = await trying.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(RedisCommandError);
  expect((error as RedisCommandError).transient).toBe(true);
  // What the flushed attempt took, if Redis ran it, is this owner's: the next try enters it, and unlock() gives back all.
  expect(await lock.tryLock()).toBe(true);
  await lock.unlock();
  expect(await redis.admin.exists(name)).toBe(0);
});
