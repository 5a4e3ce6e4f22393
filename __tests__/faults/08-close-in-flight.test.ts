// Fault 8: client.close() while calls are in flight and waiters wait.
import { getEventListeners } from 'node:events';
import { ClientClosedError, MultiLock, type LockClient } from '../../src';
import { queueKeyOf } from '../../src/names';
import { startFixture } from '../helpers/child';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { atNextScript, parkedOnChannel, parkedWaiters, usePrivateRedis } from '../helpers/privateRedis';
import { scriptCallCount } from '../helpers/testRedis';
import { aborted, until } from '../helpers/time';

const redis = usePrivateRedis();

async function closeUnderCalls(client: ReturnType<typeof redis.client>, name: string): Promise<number> {
  const held = client.getLock(`${name}:held`);
  await held.lock();
  await redis.admin.hset(name, 'someone-else:1', 1); // a lock held by another client
  await redis.admin.pexpire(name, 60_000);
  const parked = client.getLock(name).lock();
  await until('the waiter parked', () => client.stats.waiters === 1);
  redis.server.pause(); // and from now on nothing Redis would answer arrives
  const sent = (client as unknown as { context: { redis: { commandQueue: { length: number } } } }).context.redis.commandQueue;
  const before = sent.length;
  const inFlight = [
    parked,
    client.getLock(`${name}:new`).tryLock({ waitTime: 60_000 }),
    held.unlock(),
    client.getLock(name).isLocked(),
    client.getLock(name).withLock(() => undefined, { waitTime: 60_000 }),
  ];
  const settled = Promise.allSettled(inFlight);
  // The four new calls are on the wire, unanswered (the parked waiter sends nothing).
  await until('the calls were sent', () => sent.length >= before + 4);
  const start = performance.now();
  await client.close();
  const results = await settled;
  const elapsed = performance.now() - start;
  redis.server.resume();
  for (const result of results) {
    expect(result.status).toBe('rejected');
    expect((result as PromiseRejectedResult).reason).toBeInstanceOf(ClientClosedError);
  }
  expect(client.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
  return elapsed;
}

test('every call under way settles with ClientClosedError, even with Redis frozen', async () => {
  const elapsed = await closeUnderCalls(redis.client({ watchdogTimeout: 3000 }), 'close:owned');
  // close() gives QUIT one second, then cuts the connection.
  expect(elapsed).toBeLessThan(2000);
});

test('the same with a connection the user owns, which stays open', async () => {
  const connection = redis.server.connect();
  try {
    const elapsed = await closeUnderCalls(redis.client({ redis: connection, watchdogTimeout: 3000 }), 'close:borrowed');
    // It waits for the replies of the calls sent (see below) as long as it would QUIT an own one.
    expect(elapsed).toBeLessThan(2000);
    expect(connection.status).toBe('ready');
    expect(await connection.ping()).toBe('PONG');
  } finally {
    connection.disconnect();
  }
});

test('a process that closes its client under parked waiters exits by itself', async () => {
  await redis.admin.hset('close:child', 'the-test:1', 1);
  await redis.admin.pexpire('close:child', 60_000);
  const child = startFixture('closeWhileWaiting.ts', [redis.server.url, 'close:child']);
  await child.line((line) => line.startsWith('closed'), 15_000);
  const closedAt = performance.now();
  const { code, stderr } = await child.exited(15_000);
  // Nothing left to wait for: no timer (ioredis's disconnect timer included) holds it open.
  expect(performance.now() - closedAt).toBeLessThan(1000);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  expect(child.lines).toEqual(['closed 3/3']);
});

describe('close() as an acquire is on its way: what Redis grants for the caller it settled is given back before close() resolves', () => {
  // Before, close() settled the call and dropped its reply: Redis ran the acquire (it was
  // sent), and the hold stayed for its lease with nobody renewing or releasing it, a plain
  // semaphore's permit for good. A shutdown under contention lost permits this way.
  test.each(heldKindNames)('%s', async (kind) => {
    const name = `close-racing-${kind}`;
    const { prepare, tryTake, free } = heldKinds[kind];
    const checker = redis.client();
    await prepare?.(checker, name);
    for (let round = 0; round < 3; round++) {
      const client = redis.client();
      // Connected, and the scripts loaded: the attempt goes out at once, as one EVALSHA.
      await client.getLock(`${name}:warm`).withLock(() => undefined);
      const before = await scriptCallCount(redis.admin);
      const closed = atNextScript(client, () => client.close());
      const attempt = tryTake(client, name).then(
        () => 'taken',
        (error: unknown) => error,
      );
      await closed;
      // The attempt reached Redis (else this round would prove nothing) and ran there.
      expect(await scriptCallCount(redis.admin)).toBeGreaterThan(before);
      expect(await attempt).toBeInstanceOf(ClientClosedError);
      // Right away, not after a lease: close() waited for the reply and gave the take back.
      expect(await free(checker, redis.admin, name)).toBe(true);
    }
  });

  test('an acquire a primitive would send only after close() (it awaited something first) is not sent: its caller settles at once, even with Redis frozen, and nothing is taken', async () => {
    // The fair lock and the permit-expirable semaphore learn how to publish before they send.
    for (const kind of ['fair', 'permitSemaphore'] as const) {
      const name = `close-before-send-${kind}`;
      const { prepare, tryTake, free } = heldKinds[kind];
      const checker = redis.client();
      await prepare?.(checker, name);
      const client = redis.client();
      await client.getLock(`${name}:warm`).withLock(() => undefined);
      redis.server.pause();
      let settled: unknown;
      let took = 0;
      try {
        const started = performance.now();
        const attempt = tryTake(client, name).then(
          () => 'taken',
          (error: unknown) => error,
        );
        const closed = client.close();
        settled = await attempt;
        took = performance.now() - started;
        await closed;
      } finally {
        redis.server.resume();
      }
      expect(settled).toBeInstanceOf(ClientClosedError);
      // Before, the attempt went out after close() and its caller waited for the cut socket.
      expect(took).toBeLessThan(500);
      // Had it been written before the socket was cut, Redis would have run it on resuming.
      expect(await free(checker, redis.admin, name)).toBe(true);
    }
  });

  test('on a connection the user owns, which stays open, close() waits the same way; a reply that comes later is given back through it', async () => {
    const connection = redis.server.connect();
    try {
      for (const kind of ['lock', 'semaphore'] as const) {
        const name = `close-racing-borrowed-${kind}`;
        const { prepare, tryTake, free } = heldKinds[kind];
        const checker = redis.client();
        await prepare?.(checker, name);
        const client = redis.client({ redis: connection });
        await client.getLock(`${name}:warm`).withLock(() => undefined);
        redis.server.pause();
        const closed = atNextScript(client, () => client.close());
        const attempt = tryTake(client, name).catch((error: unknown) => error);
        const started = performance.now();
        await closed;
        // Redis frozen: close() waited its second for the reply, then returned.
        expect(performance.now() - started).toBeGreaterThanOrEqual(900);
        expect(performance.now() - started).toBeLessThan(2_000);
        expect(await attempt).toBeInstanceOf(ClientClosedError);
        expect(connection.status).toBe('ready');
        redis.server.resume();
        await until('what the attempt took is back', () => free(checker, redis.admin, name), 2_000);
      }
    } finally {
      connection.disconnect();
    }
  });

  test('a local handoff under way when close() comes: the hold or permit the release handed to the waiter close() woke goes back', async () => {
    for (const kind of ['lock', 'fair', 'permitSemaphore'] as const) {
      const name = `close-racing-handoff-${kind}`;
      const client = redis.client();
      let release: () => Promise<unknown>;
      let wait: () => Promise<unknown>;
      let candidate: () => Promise<boolean>;
      let free: () => Promise<boolean>;
      if (kind === 'permitSemaphore') {
        const sem = client.getPermitExpirableSemaphore(name);
        await sem.trySetPermits(1);
        // A permit with a lease of its own: the handoff waits for the script's reply (not pipelined).
        const held = await sem.acquire({ leaseTime: 30_000 });
        release = () => sem.release(held);
        wait = () => client.getPermitExpirableSemaphore(name).acquire();
        candidate = async () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`) === 1;
        const checker = redis.client();
        free = async () => (await checker.getPermitExpirableSemaphore(name).availablePermits()) === 1;
      } else {
        const holder = kind === 'lock' ? client.getLock(name) : client.getFairLock(name);
        await holder.lock();
        release = () => holder.unlock();
        wait = () => (kind === 'lock' ? client.getLock(name) : client.getFairLock(name)).lock();
        // A lock's waiter parks as its client's handoff candidate; a fair one queues in Redis,
        // and the release grants it in the script, telling it from the reply.
        candidate = async () => (kind === 'lock' ? parkedWaiters(client, name) === 1 : (await redis.admin.zcard(queueKeyOf('', name))) === 1);
        free = async () => (await redis.admin.exists(name)) === 0;
      }
      const waiter = wait().then(
        () => 'held',
        (error: unknown) => error,
      );
      await until('the waiter waits where the release hands over', candidate);
      const released = release().catch((error: unknown) => error);
      await client.close();
      expect(await waiter).toBeInstanceOf(ClientClosedError);
      await released;
      expect(await free()).toBe(true);
    }
  });
});

describe('close() while scopes hold: their signals abort with ClientClosedError (the watchdog stops)', () => {
  // Before, close() dropped the watchdog's entries without a word: the holds ran out a lease
  // later, another client took them, and the scopes' callbacks went on with signals that never
  // aborted (two holders).
  type Scope = (client: LockClient, name: string, fn: (signal: AbortSignal) => Promise<unknown>) => Promise<unknown>;
  const scopes: Record<string, Scope> = {
    'lock withLock': (client, name, fn) => client.getLock(name).withLock(fn),
    'fair withLock': (client, name, fn) => client.getFairLock(name).withLock(fn),
    'fenced withLock': (client, name, fn) => client.getFencedLock(name).withLock(fn),
    'write withLock': (client, name, fn) => client.getReadWriteLock(name).writeLock().withLock(fn),
    'read withLock': (client, name, fn) => client.getReadWriteLock(name).readLock().withLock(fn),
    'lock hold()': async (client, name, fn) => {
      const held = await client.getLock(name).hold();
      return fn(held.signal);
    },
    withPermit: async (client, name, fn) => {
      await client.getPermitExpirableSemaphore(name).trySetPermits(1);
      return client.getPermitExpirableSemaphore(name).withPermit(fn);
    },
    'MultiLock withLock': (client, name, fn) => new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`)]).withLock(fn),
    // No watchdog, no lease: told so that it stops while its permits can still go back (before:
    // its signal never aborted, and the give-back after close() failed: the permit gone for good).
    withPermits: async (client, name, fn) => {
      await client.getSemaphore(name).trySetPermits(1);
      return client.getSemaphore(name).withPermits(fn);
    },
  };
  test.each(Object.keys(scopes))('%s', async (kind) => {
    const client = redis.client({ watchdogTimeout: 3000 });
    let inside: AbortSignal | undefined;
    const run = scopes[kind]!(client, `close-scope-${kind}`, async (signal) => {
      inside = signal;
      await aborted(signal);
      signal.throwIfAborted(); // what a callback that heeds its signal does
    }).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await until('the scope runs', () => inside !== undefined);
    expect(inside!.aborted).toBe(false);
    await client.close();
    // Told by close() itself, not a lease later.
    expect(inside!.aborted).toBe(true);
    expect(inside!.reason).toBeInstanceOf(ClientClosedError);
    expect(await run).toBeInstanceOf(ClientClosedError);
  });
});

test('holds given one long-lived signal (an app’s shutdown signal) and never released before their client closes: the signal lets go of each once its scope ended, and keeps no closed client alive', async () => {
  const app = new AbortController();
  const listeners = (): number => getEventListeners(app.signal, 'abort').length;
  // A watchdog hold: close() ends its scope.
  const kept = redis.client({ watchdogTimeout: 3000 });
  const watched = await kept.getLock(`long-signal-${process.pid}:a`).hold({ signal: app.signal });
  expect(listeners()).toBe(1);
  await kept.close();
  expect(watched.signal.aborted).toBe(true);
  expect(listeners()).toBe(0); // before: 1, for as long as the app's signal lived
  // A hold with a lease: its end ends the scope.
  const leased = redis.client();
  const timed = await leased.getLock(`long-signal-${process.pid}:b`).hold({ signal: app.signal, leaseTime: 300 });
  await leased.close();
  expect(listeners()).toBe(1);
  await aborted(timed.signal);
  expect(listeners()).toBe(0);
});

test('a second close() resolves only once the first is done (its give-backs sent, its connections closed)', async () => {
  // Before, it resolved at once: a caller that then quit a connection it passed in put QUIT
  // ahead of close()'s give-backs (a helper audit: a hold an in-flight acquire took stayed for its lease).
  const client = redis.client();
  await client.getLock('close-twice:warm').tryLock(); // connected, scripts loaded
  let firstDone = false;
  const first = client.close().then(() => {
    firstDone = true;
  });
  await client.close();
  expect(firstDone).toBe(true);
  await first;
});
