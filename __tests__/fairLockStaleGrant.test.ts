// A fair-lock grant that is no longer in Redis is never taken for the lock. The soak found it
// (2026-11-25: lost updates around a Redis pause): a grant message published just before Redis
// froze reached its waiter only after the grant had run out and the waiter had queued again, and
// the waiter took it, beside the owner who had the lock by then.
import type { Redis } from 'ioredis';
import type { LockClient } from '../src';
import { queueKeyOf } from '../src/names';
import { usePrivateRedis } from './helpers/privateRedis';
import { sleep, until } from './helpers/time';

const redis = usePrivateRedis();

/** `client`'s subscriber connection (client internals). */
const subscriber = (client: LockClient): Redis => (client as unknown as { pubsub: { connection: Redis } }).pubsub.connection;

/** The socket of `client`'s subscriber connection: paused, the messages for it wait in the kernel. */
const subscriberSocket = (client: LockClient): { pause(): void; resume(): void } => subscriber(client).stream;

/** Resolves when `client`'s subscriber connection next delivers a message (to the client's listener, registered before). */
const nextMessage = (client: LockClient): Promise<void> =>
  new Promise((resolve) => {
    const connection = subscriber(client);
    const seen = (): void => {
      for (const event of ['message', 'pmessage', 'smessage']) connection.off(event, seen);
      resolve();
    };
    for (const event of ['message', 'pmessage', 'smessage']) connection.on(event, seen);
  });

/** How many commands `client` sent that await their reply (client internals). */
const unanswered = (client: LockClient): number => (client as unknown as { context: { redis: { commandQueue: { length: number } } } }).context.redis.commandQueue.length;

test('a grant message that arrives after its grant ran out and its waiter queued again is not taken for the lock', async () => {
  const name = 'stale-grant';
  const queueKey = queueKeyOf('', name);
  const holder = redis.client().getFairLock(name);
  await holder.lock({ leaseTime: 60_000 });
  // Under the watchdog with a 600 ms lease: its grant lives 600 ms.
  const waitingClient = redis.client({ watchdogTimeout: 600, queueTimeout: 6_000 });
  let held = false;
  const waiting = waitingClient
    .getFairLock(name)
    .lock()
    .then(() => (held = true));
  await until('the waiter is queued', async () => (await redis.admin.zcard(queueKey)) === 1);
  const socket = subscriberSocket(waitingClient);
  socket.pause(); // its grant message will come late
  const seen = nextMessage(waitingClient);
  try {
    await holder.unlock(); // grants the lock to the waiter, for 600 ms
    await until('the grant ran out', async () => (await redis.admin.exists(name)) === 0);
    // Someone else takes the free lock; the waiter's heartbeat (every 2 s) finds it out of the
    // queue and it asks again: the lock is taken, so it queues again.
    const other = redis.client().getFairLock(name);
    expect(await other.tryLock({ leaseTime: 60_000 })).toBe(true);
    await until('the waiter queued again', async () => (await redis.admin.zcard(queueKey)) === 1, 5_000);
    await until('the reply that queued it again is in', () => unanswered(waitingClient) === 0);
  } finally {
    socket.resume(); // the stale grant message arrives now
  }
  await seen;
  // A negative (the stale grant is not taken), and whatever the message set off has no event of
  // its own to wait for: time for it to show.
  await sleep(300);
  // Before the fix the waiter held the lock here, beside `other`.
  expect(held).toBe(false);
  expect(await redis.admin.hkeys(name)).toHaveLength(1);
  await redis.client().getFairLock(name).forceUnlock(); // `other` is done: the waiter is next
  await waiting;
  expect(held).toBe(true);
});

test("a grant message names the owner field, Redis's time in whole µs (not rounded) within the release's run, and the lease the grant got", async () => {
  const name = 'stamped-grant';
  const holder = redis.client().getFairLock(name);
  await holder.lock({ leaseTime: 60_000 });
  const waiter = redis.client();
  const waiting = waiter.getFairLock(name).lock({ leaseTime: 60_000 });
  await until('the waiter is queued', async () => (await redis.admin.zcard(queueKeyOf('', name))) === 1);
  const listener = redis.admin.duplicate();
  const messages: string[] = [];
  listener.on('message', (_channel: string, message: string) => messages.push(message));
  await listener.subscribe(`rlock__grant:{${name}}:${waiter.id}`);
  const micros = async (): Promise<number> => {
    const [seconds, us] = await redis.admin.time();
    return Number(seconds) * 1_000_000 + Number(us);
  };
  const before = await micros();
  await holder.unlock();
  const after = await micros();
  await waiting;
  await until('the grant message is seen', () => messages.length === 1);
  await listener.quit();
  const [field, stamped] = messages[0]!.split('@');
  const [stamp, ttl] = stamped!.split(':');
  expect(field).toMatch(new RegExp(`^${waiter.id}:`));
  // Lua's own number-to-string keeps 14 digits: the stamp came as 1.7956132845478e+15 before.
  expect(stamp).toMatch(/^\d{16}$/);
  expect(ttl).toBe('5000'); // min(60 s lease, the granter's 5 s queue timeout)
  expect(Number(stamp)).toBeGreaterThanOrEqual(before);
  expect(Number(stamp)).toBeLessThanOrEqual(after);
});
