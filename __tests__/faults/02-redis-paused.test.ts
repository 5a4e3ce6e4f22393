// Fault 2: Redis is paused (SIGSTOP) for longer than the lease, then resumed.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { type LockClient, LockLostError, MultiLock, NotLockOwnerError, RedisCommandError } from '../../src';
import { rwWritersKeyOf } from '../../src/names';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { atNextScript, parkedOnChannel, parkedWaiters, usePrivateRedis, subscribers } from '../helpers/privateRedis';
import { TcpProxy } from '../helpers/tcpProxy';
import { aborted, orAfter, settled, sleep, until } from '../helpers/time';

const redis = usePrivateRedis();

/** The longest a test keeps Redis paused. */
const PAUSE_MS = 6_000;

/** Runs `during` while Redis is paused (at most PAUSE_MS); resumes Redis in any case. */
async function whilePaused<T>(during: () => Promise<T>): Promise<T> {
  redis.server.pause();
  const resumeAt = setTimeout(() => redis.server.resume(), PAUSE_MS);
  try {
    return await during();
  } finally {
    clearTimeout(resumeAt);
    redis.server.resume();
  }
}

test('the owner stops believing before Redis can expire its lock, so no two owners overlap', async () => {
  // Not shorter: a loaded machine that stalls the holder past 0.57 × lease before the pause
  // loses the lock before the pause began.
  const lease = 1_500;
  const holder = redis.client({ watchdogTimeout: lease });
  const other = redis.client({ watchdogTimeout: lease });
  const name = 'paused';
  let lostAt = Infinity;
  let holding = false;
  const held = holder.getLock(name).withLock(async (signal) => {
    holding = true;
    await aborted(signal);
    lostAt = performance.now();
  });
  const heldOutcome = held.then(() => 'resolved', (error: unknown) => error); // judged below
  await until('the holder holds', () => holding);
  let acquiredAt = -Infinity;
  const waiter = other.getLock(name).withLock(async () => {
    acquiredAt = performance.now();
  });
  await until('the waiter subscribed', async () => (await subscribers(redis.admin, name)) === 1);

  const pausedAt = performance.now();
  redis.server.pause();
  await sleep(lease * 2.5);
  const resumedAt = performance.now();
  redis.server.resume();

  expect(await heldOutcome).toBeInstanceOf(LockLostError);
  await waiter;
  // The holder learned it while Redis was still frozen, from its own lease clock...
  expect(lostAt).toBeGreaterThan(pausedAt);
  expect(lostAt).toBeLessThan(resumedAt);
  // ...so it had given up before the other owner could take the lock.
  expect(lostAt).toBeLessThan(acquiredAt);
});

test('lock() without withLock: the lockLost event comes during the pause', async () => {
  // The deadline is at most 0.9 × lease after the pause began (the last confirmed renewal was
  // sent before it); 5 s leaves the timer 500 ms of lag on a loaded box.
  const lease = 5_000;
  const client = redis.client({ watchdogTimeout: lease });
  const lock = client.getLock('paused:plain');
  await lock.lock();
  const lost = once(client, 'lockLost');
  redis.server.pause();
  const pausedAt = performance.now();
  const [event] = await lost;
  const lostAfter = performance.now() - pausedAt;
  redis.server.resume();
  expect(event.error).toBeInstanceOf(LockLostError);
  expect(lostAfter).toBeLessThan(lease);
  expect(client.stats.renewals).toBe(0);
});

test('a pause shorter than 0.9 × lease − the renewal period (lease / 3), about 0.57 × lease, loses nothing', async () => {
  // Worst case: the pause begins just before a renewal is sent, a full period after the last
  // confirmed one; that renewal's reply arrives at the resume and must beat the deadline at
  // 0.9 × lease after the last confirmed send. 0.45 × lease leaves 0.12 × lease (720 ms) of lag.
  const lease = 6_000;
  const client = redis.client({ watchdogTimeout: lease });
  const lost = jest.fn();
  client.on('lockLost', lost);
  const lock = client.getLock('paused:short');
  await lock.lock();
  await sleep(lease / 3 - 50); // just before the first renewal is sent
  redis.server.pause();
  await sleep(lease * 0.45);
  redis.server.resume();
  await sleep(lease * 0.6); // past the deadline the pause threatened (0.9 × lease after the acquire)
  expect(lost).not.toHaveBeenCalled();
  expect(await redis.admin.pttl('paused:short')).toBeGreaterThan(lease / 3); // renewed since
  await lock.unlock();
});

test('a pause shorter than the lease can still lose it: 0.95 × lease beginning just before a renewal', async () => {
  const lease = 3000;
  const client = redis.client({ watchdogTimeout: lease });
  const lock = client.getLock('paused:long');
  await lock.lock();
  await sleep(lease / 3 - 50);
  const lost = once(client, 'lockLost');
  redis.server.pause();
  await sleep(lease * 0.95);
  redis.server.resume();
  const [event] = await lost;
  expect(event.error).toBeInstanceOf(LockLostError);
  await expect(lock.unlock()).rejects.toBeInstanceOf(NotLockOwnerError); // expired in Redis meanwhile
});

/**
 * Starts `wait(signal)` and, once its waiter is parked as a handoff candidate (`parked()` is 1),
 * pauses Redis, starts `release` and aborts the waiter as soon as the release has claimed it
 * (its script sent, not run while Redis is paused). Resolves with what the waiter ended with
 * within 1 s ('still waiting' if it had not) and with the release's outcome after the resume.
 */
/** The `rlock:released` diagnostics messages published while `fn` runs. */
async function releasedDiagnostics(fn: () => Promise<void>): Promise<Record<string, unknown>[]> {
  const seen: Record<string, unknown>[] = [];
  const listener = (message: unknown): void => void seen.push(message as Record<string, unknown>);
  subscribe('rlock:released', listener);
  try {
    await fn();
  } finally {
    unsubscribe('rlock:released', listener);
  }
  return seen;
}

async function abortClaimedWaiter(wait: (signal: AbortSignal) => Promise<unknown>, parked: () => number, release: () => Promise<unknown>): Promise<{ waiter: string; released: unknown }> {
  const controller = new AbortController();
  const waiting = wait(controller.signal).then(
    () => 'held',
    (error: Error) => error.name,
  );
  await until('the waiter is parked as a handoff candidate', () => parked() === 1);
  let released: Promise<unknown> | undefined;
  const waiter = await whilePaused(async () => {
    released = release().catch((error: unknown) => error);
    await until('the release claimed the waiter', () => parked() === 0);
    controller.abort();
    return orAfter(waiting, 1_000, 'still waiting');
  });
  return { waiter, released: await released };
}

test('a waiter claimed by a release that Redis does not answer still ends on its signal; the hold handed over later is given back', async () => {
  const client = redis.client();
  const name = 'paused-handoff';
  const holder = client.getLock(name);
  await holder.lock();
  const told = await releasedDiagnostics(async () => {
    const outcome = await abortClaimedWaiter(
      (signal) => client.getLock(name).lock({ signal }),
      () => parkedWaiters(client, name),
      () => holder.unlock(),
    );
    // Before the fix it waited for the release's reply (here: for as long as Redis is paused).
    expect(outcome).toEqual({ waiter: 'AbortError', released: undefined });
    // The release handed the lock to the waiter that had gone: given back, not kept or renewed.
    await until('the lock is free again', async () => (await redis.admin.exists(name)) === 0);
  });
  expect(client.stats.renewals).toBe(0);
  // Only the holder's release is news; the give-back of a hold nobody was told of is not.
  expect(told).toEqual([expect.objectContaining({ name, released: true })]);
  expect(await redis.client().getLock(name).tryLock()).toBe(true);
}, 30_000);

describe("a release that ioredis gives up on (its commandTimeout) while it claimed a waiter: Redis runs it later", () => {
  const clientWithTimeout = (): LockClient => redis.client({ redis: { host: '127.0.0.1', port: redis.server.port, commandTimeout: 300 } });

  /** A client with a short commandTimeout whose holder holds `name` and whose waiter (with a signal) is parked as its handoff candidate. */
  async function heldWithStoppableWaiter(name: string): Promise<{ client: LockClient; holder: ReturnType<LockClient['getLock']>; controller: AbortController; waiting: Promise<string> }> {
    const client = clientWithTimeout();
    const holder = client.getLock(name);
    await holder.lock();
    const controller = new AbortController();
    const waiting = client
      .getLock(name)
      .lock({ signal: controller.signal })
      .then(() => 'held', (error: Error) => error.name);
    await until('the waiter is parked as a handoff candidate', () => parkedWaiters(client, name) === 1);
    return { client, holder, controller, waiting };
  }

  test('the waiter had stopped: the hold handed over to it then is given back (it held the lock for a whole lease, nobody to release it)', async () => {
    const name = 'timed-out-handoff-stopped';
    const { client, holder, controller, waiting } = await heldWithStoppableWaiter(name);
    const released = await whilePaused(async () => {
      const releasing = holder.unlock().catch((error: unknown) => error);
      await until('the release claimed the waiter', () => parkedWaiters(client, name) === 0);
      controller.abort();
      expect(await waiting).toBe('AbortError');
      return releasing; // rejected by ioredis after 300 ms, Redis still paused
    });
    expect(String(released)).toMatch(/timed out/);
    await until('the lock is free again', async () => (await redis.admin.exists(name)) === 0, 5_000);
    expect(await redis.client().getLock(name).tryLock()).toBe(true);
  }, 30_000);

  test('the waiter still waits and is stopped while its give-back is out: it ends on its signal and sends no attempt after it (that took the lock for nobody)', async () => {
    const name = 'timed-out-handoff-stopped-later';
    const { client, holder, controller, waiting } = await heldWithStoppableWaiter(name);
    const outcome = await whilePaused(async () => {
      const releasing = holder.unlock().catch((error: unknown) => error);
      await until('the release claimed the waiter', () => parkedWaiters(client, name) === 0);
      expect(String(await releasing)).toMatch(/timed out/); // the waiter's give-back is out now
      // The waiter still waits (nothing ended it): a negative, given 100 ms to show.
      expect(await orAfter(waiting, 100, 'still waiting')).toBe('still waiting');
      controller.abort();
      const ended = await waiting;
      await sleep(1_000); // Redis stays paused past the give-back's own timeout
      return ended;
    });
    expect(outcome).toBe('AbortError');
    await until('the lock is free again', async () => (await redis.admin.exists(name)) === 0, 5_000);
    expect(await redis.client().getLock(name).tryLock()).toBe(true);
  }, 30_000);

  test('the waiter still waits: it gives the handover back before it asks again, so Redis counts its hold once', async () => {
    const client = clientWithTimeout();
    const name = 'timed-out-handoff-waiting';
    const holder = client.getLock(name);
    await holder.lock();
    const waiter = client.getLock(name);
    const waiting = waiter.tryLock({ waitTime: 20_000 });
    await until('the waiter is parked as a handoff candidate', () => parkedWaiters(client, name) === 1);
    const released = await whilePaused(async () => {
      const releasing = holder.unlock().catch((error: unknown) => error);
      await until('the release claimed the waiter', () => parkedWaiters(client, name) === 0);
      return releasing;
    });
    expect(String(released)).toMatch(/timed out/);
    expect(await waiting).toBe(true);
    expect(await waiter.getHoldCount()).toBe(1); // 2 before: the handover and its own attempt's
    await waiter.unlock();
    expect(await redis.admin.exists(name)).toBe(0);
  }, 30_000);
});

test('a permit waiter claimed by a release that Redis does not answer still ends on its signal; the permit handed over later is given back', async () => {
  const client = redis.client();
  const name = 'paused-permit-handoff';
  const sem = client.getPermitExpirableSemaphore(name);
  await sem.trySetPermits(1);
  // A permit with a lease of its own: the handoff waits for the script's reply (not pipelined).
  const held = await sem.acquire({ leaseTime: 30_000 });
  const told = await releasedDiagnostics(async () => {
    const outcome = await abortClaimedWaiter(
      (signal) => client.getPermitExpirableSemaphore(name).acquire({ signal }),
      () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`),
      () => sem.release(held),
    );
    // Before the fix it waited for the release's reply (here: for as long as Redis is paused).
    expect(outcome).toEqual({ waiter: 'AbortError', released: undefined });
    // The release handed the permit to the waiter that had gone: given back, not kept or renewed.
    await until('the permit is free again', async () => (await sem.availablePermits()) === 1);
  });
  expect(client.stats.renewals).toBe(0);
  // Only the holder's release is news: the give-back of a permit nobody was told of is not
  // (before, it was published as a release of a permit no `rlock:acquired` had announced).
  expect(told).toEqual([expect.objectContaining({ name, ownerId: held, released: true })]);
  expect(await redis.client().getPermitExpirableSemaphore(name).tryAcquire()).not.toBeNull();
}, 30_000);

test.each([
  ['lock', 'paused-claimed-deadline'],
  ['permit', 'paused-claimed-deadline-permit'],
])('a %s waiter claimed by a release that Redis does not answer still ends with its waitTime (or 1 s after the claim, if later); what was handed over is given back', async (kind, name) => {
  const client = redis.client();
  let wait: () => Promise<boolean>;
  let release: () => Promise<unknown>;
  let parked: () => number;
  let free: () => Promise<boolean>;
  if (kind === 'lock') {
    const holder = client.getLock(name);
    await holder.lock();
    wait = () => client.getLock(name).tryLock({ waitTime: 1_500 });
    release = () => holder.unlock();
    parked = () => parkedWaiters(client, name);
    free = async () => (await redis.admin.exists(name)) === 0;
  } else {
    const sem = client.getPermitExpirableSemaphore(name);
    await sem.trySetPermits(1);
    const held = await sem.acquire({ leaseTime: 30_000 });
    wait = async () => (await client.getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 1_500 })) !== null;
    release = () => sem.release(held);
    parked = () => parkedOnChannel(client, `rlock__permits_channel:{${name}}`);
    free = async () => (await sem.availablePermits()) === 1;
  }
  const started = performance.now();
  const waiting = wait().then((got) => ({ got, took: performance.now() - started }));
  await until('the waiter is parked as a handoff candidate', () => parked() === 1);
  let released: Promise<unknown> | undefined;
  const outcome = await whilePaused(async () => {
    released = release().catch((error: unknown) => error);
    await until('the release claimed the waiter', () => parked() === 0);
    // Before, it waited for the release's reply: for as long as Redis is paused (here 6 s).
    return orAfter(waiting, 5_000, 'still waiting');
  });
  expect(outcome).toEqual({ got: false, took: expect.any(Number) });
  // Its deadline (1.5 s: long enough that the release claims it well before) and not the pause.
  expect((outcome as { took: number }).took).toBeGreaterThanOrEqual(1_450);
  expect((outcome as { took: number }).took).toBeLessThan(3_000);
  await released;
  await until('what the release handed over is free again', free, 5_000);
}, 30_000);

test.each(['lock', 'semaphore', 'permitSemaphore'])('%s: an acquire that takes just as its signal aborted gives back before rejecting, but waits at most 1 s for that while Redis is frozen', async (kind) => {
  const name = `paused-giveback-${kind}`;
  const client = redis.client();
  const checker = redis.client();
  let take: (signal: AbortSignal) => Promise<unknown>;
  let free: () => Promise<boolean>;
  // One take and give-back first, so that Redis has the primitive's scripts: the two script
  // calls hooked below are then the acquire and its give-back, not an EVALSHA and its EVAL.
  let warm: () => Promise<unknown>;
  const handle = client.getLock(name);
  if (kind === 'lock') {
    take = (signal) => handle.lock({ signal });
    free = async () => (await redis.admin.exists(name)) === 0;
    warm = () => handle.withLock(() => undefined);
  } else if (kind === 'semaphore') {
    await checker.getSemaphore(name).trySetPermits(1);
    const semaphore = client.getSemaphore(name);
    take = (signal) => semaphore.acquire({ signal });
    free = async () => (await checker.getSemaphore(name).availablePermits()) === 1;
    warm = async () => {
      await semaphore.acquire();
      await semaphore.release();
    };
  } else {
    await checker.getPermitExpirableSemaphore(name).trySetPermits(1);
    const semaphore = client.getPermitExpirableSemaphore(name);
    take = (signal) => semaphore.acquire({ signal });
    free = async () => (await checker.getPermitExpirableSemaphore(name).availablePermits()) === 1;
    warm = async () => semaphore.release(await semaphore.acquire());
  }
  await warm();
  const controller = new AbortController();
  // The acquire goes out and its signal aborts at once: its reply (taken) comes within the
  // grace, so the caller gives it back before rejecting; Redis freezes just as that give-back
  // is about to go out (the soak saw this at a pause: a wait ended 2.6 s late).
  const abortedAt = atNextScript(client, () => {
    controller.abort();
    return performance.now();
  });
  const outcome = take(controller.signal).then(
    () => 'taken',
    (error: Error) => ({ name: error.name, after: performance.now() }),
  );
  const sentAt = await abortedAt;
  const frozen = atNextScript(client, () => redis.server.pause(), 'before');
  let settled: { name: string; after: number } | string;
  let retried: unknown;
  try {
    settled = await orAfter(outcome, 5_000, 'still waiting');
    await frozen;
    // The same handle asks again at once: the hold on its way back was never booked for it, so
    // this is a plain attempt (cut ~1 s later, Redis frozen), not "already holds it".
    if (kind === 'lock') retried = await handle.tryLock({ waitTime: 200 }).catch((error: Error) => error.name);
  } finally {
    redis.server.resume();
  }
  if (kind === 'lock') expect(retried).toBe(false);
  // Before, it waited for the give-back's reply: until Redis resumed.
  expect(settled).toEqual({ name: 'AbortError', after: expect.any(Number) });
  expect((settled as { after: number }).after - sentAt).toBeLessThan(2_500);
  await until('what it took is back', free, 5_000);
}, 30_000);

test('a hold handed over to a waiter that gave up is given back without touching the same owner\'s new hold', async () => {
  // 1 s leases: a loaded CI machine can stall a renewal past most of a 300 ms one.
  const client = redis.client({ watchdogTimeout: 1_000 });
  const lost: unknown[] = [];
  client.on('lockLost', (event) => lost.push(event));
  const name = 'paused-handoff-again';
  const holder = client.getLock(name);
  await holder.lock({ leaseTime: 30_000 });
  const handle = client.getLock(name);
  const controller = new AbortController();
  const first = handle.lock({ signal: controller.signal }).catch((error: Error) => error.name);
  await until('the waiter is parked as a handoff candidate', () => parkedWaiters(client, name) === 1);
  let unlocked: Promise<void> | undefined;
  let again: Promise<void> | undefined;
  await whilePaused(async () => {
    unlocked = holder.unlock();
    await until('the release claimed the waiter', () => parkedWaiters(client, name) === 0);
    controller.abort();
    expect(await first).toBe('AbortError');
    // The same handle (the same owner, the same field) asks again while Redis is still paused:
    // its acquire goes out behind the release, so Redis will run it after the handover (2 holds
    // of the field), and the give-back after both.
    const sent = (client as unknown as { context: { redis: { commandQueue: { length: number } } } }).context.redis.commandQueue;
    const before = sent.length;
    again = handle.lock();
    await until('its acquire was sent', () => sent.length > before);
  });
  await unlocked;
  await again;
  // The release handed the field the lock for the waiter that gave up; that hold was given back
  // and the owner's own wait got the lock: one hold in Redis, booked once, under the watchdog.
  expect(Object.values(await redis.admin.hgetall(name))).toEqual(['1']);
  // Three leases later the owner still holds it: the give-back left its watchdog entry alone.
  await sleep(3_000);
  expect(await handle.isHeldByCurrentOwner()).toBe(true);
  expect(lost).toEqual([]);
  await handle.unlock();
  expect(await redis.admin.exists(name)).toBe(0);
}, 30_000);

describe('an attempt Redis does not answer ends with its wait, and what it took is given back', () => {
  // Before, a wait could not end while its attempt was unanswered: a frozen Redis, or a
  // connection gone silent, held tryLock({ waitTime }) and an aborted lock() for as long as that
  // lasted, and what Redis then granted to the caller that had left stayed for a whole lease.
  /** `kind`'s handle of `name` on a new client whose connection is up (a connection still being made waits for offlineTimeout). */
  async function connected(kind: keyof typeof heldKinds, name: string) {
    const client = redis.client();
    await client.getLock(name).isLocked();
    const { prepare, tryTake, take, free } = heldKinds[kind];
    await prepare?.(client, name);
    return {
      client,
      tryLock: (waitTime: number) => tryTake(client, name, waitTime),
      lock: (signal: AbortSignal) => take(client, name, signal),
      /** Nothing is held (the lock key is gone, or every permit is back). */
      free: () => free(client, redis.admin, name),
    };
  }

  test.each(heldKindNames)('%s: a try with waitTime 200 ms gives up about 1 s after its attempt was sent; what Redis granted later is given back', async (kind) => {
    const name = `paused-attempt-${kind}`;
    const handle = await connected(kind, name);
    expect(await handle.free()).toBe(true);
    const { got, took } = await whilePaused(async () => {
      const started = performance.now();
      // Bug mode: the answer comes only once Redis resumes (PAUSE_MS), and it is true.
      const got = await orAfter(handle.tryLock(200), PAUSE_MS - 1_000, 'still waiting');
      return { got, took: performance.now() - started };
    });
    expect(got).toBe(false);
    // The attempt in flight gets IN_FLIGHT_GRACE_MS (1 s) before the deadline may end it.
    expect(took).toBeGreaterThanOrEqual(990);
    expect(took).toBeLessThan(3_000);
    // Redis ran the attempt on resuming and granted it to the caller that had left: given back
    // at once, not kept for the 30 s watchdog lease.
    await until('it is free again', handle.free, 5_000);
  }, 30_000);

  test.each(heldKindNames)('%s: a wait aborted while its attempt is unanswered rejects about 1 s later; what Redis granted later is given back', async (kind) => {
    const name = `paused-abort-${kind}`;
    const handle = await connected(kind, name);
    const { outcome, took } = await whilePaused(async () => {
      const controller = new AbortController();
      const sent = atNextScript(handle.client, () => undefined);
      const waiting = handle.lock(controller.signal).then(
        () => 'held',
        (error: Error) => error.message,
      );
      await sent; // the attempt is on its way to the frozen Redis
      const abortedAt = performance.now();
      controller.abort(new Error('given up'));
      // Bug mode: still waiting until Redis resumes (PAUSE_MS), then 'held'.
      const outcome = await orAfter(waiting, PAUSE_MS - 2_000, 'still waiting');
      return { outcome, took: performance.now() - abortedAt };
    });
    expect(outcome).toBe('given up');
    // A reply within IN_FLIGHT_GRACE_MS of the abort would still have been taken (and given back
    // before the call rejected, as on a Redis that answers); a frozen one is not waited for longer.
    expect(took).toBeGreaterThanOrEqual(990);
    expect(took).toBeLessThan(3_000);
    await until('it is free again', handle.free, 5_000);
  }, 30_000);

  // Waiters already queued in Redis (a fair lock's, a writer behind a reader, a semaphore waiter
  // for 2 permits, which reserves) leave the queue as they give up: that call is waited for at
  // most 1 s too (before, it held the wait until Redis answered).
  const queued: Record<string, (holder: LockClient, waiter: LockClient, name: string) => Promise<{ wait: (waitTime: number) => Promise<boolean>; queued: () => Promise<boolean> }>> = {
    fair: async (holder, waiter, name) => {
      await holder.getFairLock(name).lock();
      const lock = waiter.getFairLock(name);
      return { wait: (waitTime) => lock.tryLock({ waitTime }), queued: async () => (await lock.inspect()).queue?.length === 1 };
    },
    write: async (holder, waiter, name) => {
      await holder.getReadWriteLock(name).readLock().lock();
      const lock = waiter.getReadWriteLock(name).writeLock();
      return { wait: (waitTime) => lock.tryLock({ waitTime }), queued: async () => (await redis.admin.zcard(rwWritersKeyOf('', name))) === 1 };
    },
    semaphore: async (holder, waiter, name) => {
      await holder.getSemaphore(name).trySetPermits(2);
      await holder.getSemaphore(name).acquire();
      const semaphore = waiter.getSemaphore(name);
      return { wait: (waitTime) => semaphore.tryAcquire({ permits: 2, waitTime }), queued: async () => (await semaphore.inspect()).reservation !== null };
    },
  };

  test.each(Object.keys(queued))('%s: a queued waiter whose waitTime runs out while Redis is frozen ends about 1 s after it, its leave sent but not waited for', async (kind) => {
    const name = `paused-queued-${kind}`;
    const holder = redis.client();
    // Entries that cannot run out by themselves within the test: only the leave removes them.
    const waiterClient = redis.client({ queueTimeout: 30_000 });
    const { wait, queued: isQueued } = await queued[kind]!(holder, waiterClient, name);
    const waiting = wait(2_000);
    const startedAt = performance.now();
    await until('the waiter is queued in Redis', isQueued);
    const { got, took } = await whilePaused(async () => {
      // Bug mode: the wait ends only once Redis resumes (PAUSE_MS after the pause began).
      const got = await orAfter(waiting, PAUSE_MS - 1_000, 'still waiting');
      return { got, took: performance.now() - startedAt };
    });
    expect(got).toBe(false);
    // At the deadline one more attempt gets its 1 s grace; the leave then goes out behind it
    // and is not waited for (before: up to 1 s more, ~4 s in all).
    expect(took).toBeLessThan(2_000 + 1_850);
    await until('its queue entry is gone', async () => !(await isQueued()), 5_000);
  }, 30_000);

  test('fair: a retry on the same handle while the first try is unanswered keeps the hold it takes (the late give-back leaves it alone)', async () => {
    const name = 'paused-fair-retry';
    const client = redis.client();
    await client.getLock(name).isLocked();
    const lock = client.getFairLock(name);
    const second = await whilePaused(async () => {
      expect(await orAfter(lock.tryLock({ waitTime: 200 }), PAUSE_MS - 1_000, 'still waiting')).toBe(false);
      // Sent behind the first attempt on the same connection: when Redis resumes, the first
      // takes the free lock for this owner and this one finds its field and keeps it.
      const sent = atNextScript(client, () => undefined);
      const second = lock.tryLock({ waitTime: 20_000 });
      await sent;
      return second;
    });
    expect(await second).toBe(true);
    // Before, the first attempt's late give-back deleted the lock under the owner that held it.
    // Nothing tells when it lands (what is checked is that it took nothing): time for it to.
    await sleep(500);
    expect(await lock.isHeldByCurrentOwner()).toBe(true);
    expect(await redis.client().getFairLock(name).tryLock()).toBe(false);
    await lock.unlock();
    expect(await redis.admin.exists(name)).toBe(0);
  }, 30_000);

  test('a latch await with waitTime 200 ms gives up about 1 s after its read was sent', async () => {
    const client = redis.client();
    const latch = client.getCountDownLatch('paused-latch');
    await latch.trySetCount(1);
    const { opened, took } = await whilePaused(async () => {
      const started = performance.now();
      const opened = await orAfter(latch.await({ waitTime: 200 }), PAUSE_MS - 1_000, 'still waiting');
      return { opened, took: performance.now() - started };
    });
    expect(opened).toBe(false);
    expect(took).toBeGreaterThanOrEqual(990);
  }, 30_000);
});

test.each([
  ['a MultiLock member’s attempt', 1],
  ['a MultiLock round over two locks of one client (one call for both)', 2],
])('%s cut short by its waitTime whose command ioredis then gives up on (commandTimeout) may still run: what it takes when Redis comes back is given back (before: held for its lease by nobody)', async (_what, members) => {
  const name = `cut-then-failed:${members}:${process.pid}`;
  const client = redis.client({ redis: { host: '127.0.0.1', port: redis.server.port, commandTimeout: 1_500 } });
  const multi = new MultiLock(Array.from({ length: members }, (_, i) => client.getLock(i === 0 ? name : `${name}:${i}`)));
  expect(await multi.isLocked()).toBe(false); // connected, scripts loaded
  redis.server.pause();
  try {
    // Cut at its grace (1 s), then ioredis rejects the command (1.5 s): its outcome is unknown.
    const started = performance.now();
    expect(await multi.tryLock({ waitTime: 300, leaseTime: 30_000 })).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_500);
    await sleep(800); // past the commandTimeout
  } finally {
    redis.server.resume();
  }
  // The acquire Redis still had runs now, then the give-back sent when ioredis gave up: the
  // member's owner served that one round only, so nothing of its own can come between.
  await until('the hold nobody asked for is given back', async () => (await redis.admin.exists(name, `${name}:1`)) === 0, 3_000);
}, 20_000);

test('a MultiLock over two locks of one client inside a withLock of one of them, whose round’s outcome is unknown, leaves the enclosing scope’s hold alone (the member entered again is taken alone, not in one call with the other)', async () => {
  const name = `grouped-reentry:${process.pid}`;
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    // No retries: a command in flight when the connection closes is rejected, never resent.
    const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0 } });
    const lock = client.getLock(name);
    await lock.withLock(async (signal) => {
      proxy.silenced = true; // the round goes nowhere: cut at its grace, outcome unknown
      expect(await new MultiLock([client.getLock(name), client.getLock(`${name}:b`)]).tryLock({ waitTime: 100 })).toBe(false);
      proxy.silenced = false;
      proxy.cutAll(); // ioredis rejects what was in flight: it never ran
      await until('reconnected', async () => (await lock.isLocked().catch(() => false)) === true, 5_000);
      await sleep(200); // any give-back has gone out by now (a negative: none may take the scope's hold, and none can be waited for)
      expect(signal.aborted).toBe(false);
      expect(await redis.admin.hvals(name)).toEqual(['1']); // the scope's hold, still there
      expect(await redis.client().getLock(name).tryLock({ leaseTime: 5_000 })).toBe(false);
    });
    expect(await redis.admin.exists(name, `${name}:b`)).toBe(0);
  } finally {
    await proxy.close();
  }
}, 20_000);

test('a MultiLock round over two locks of one client cut short by its waitTime while Redis is paused: what Redis takes on resuming is given back', async () => {
  const name = `grouped-cut:${process.pid}`;
  const client = redis.client();
  const multi = new MultiLock([client.getLock(name), client.getLock(`${name}:b`)]);
  expect(await multi.isLocked()).toBe(false); // connected, scripts loaded
  await whilePaused(async () => {
    expect(await multi.tryLock({ waitTime: 300 })).toBe(false); // cut at its grace (1 s)
  });
  await until('what the late round took is given back', async () => (await redis.admin.exists(name, `${name}:b`)) === 0, 3_000);
}, 20_000);

test.each(['plain', 'fair', 'read', 'write'] as const)('%s: a handle whose attempt’s outcome is unknown (flushed by ioredis, never run) and that asks again at once holds alone (a third reader’s repro: the give-back, written after the new acquire, took its hold: two holders)', async (kind) => {
  const name = `unknown-then-again:${kind}:${process.pid}`;
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0, retryStrategy: () => 100 } });
    const of = (c: LockClient) => (kind === 'fair' ? c.getFairLock(name) : kind === 'read' ? c.getReadWriteLock(name).readLock() : kind === 'write' ? c.getReadWriteLock(name).writeLock() : c.getLock(name));
    const lock = of(client);
    await lock.isLocked();
    proxy.silenced = true; // the attempt never reaches Redis: cut at its grace
    expect(await lock.tryLock({ waitTime: 100 })).toBe(false);
    proxy.silenced = false;
    proxy.closingNew = true; // reconnects fail until the new acquire waits too
    proxy.cutAll(); // maxRetriesPerRequest 0: ioredis rejects the attempt, outcome unknown
    const connection = (client as unknown as { context: { redis: { status: string } } }).context.redis;
    await until('the connection is down', () => connection.status !== 'ready');
    const again = lock.lock({ leaseTime: 30_000 }); // waits for the connection, as any give-back would
    proxy.closingNew = false;
    await again;
    expect(await redis.admin.exists(name)).toBe(1);
    const other = redis.client(); // a writer for a read hold: readers share it
    expect(await (kind === 'read' ? other.getReadWriteLock(name).writeLock() : of(other)).tryLock({ leaseTime: 5_000 })).toBe(false);
    await lock.unlock();
  } finally {
    await proxy.close();
  }
}, 20_000);

test.each(['plain', 'fair', 'read', 'write'] as const)('%s: a re-entry inside withLock whose outcome is unknown (never sent to Redis, then dropped by ioredis) does not give back the enclosing scope’s hold (a second reader’s repro: another client got in while the scope ran)', async (kind) => {
  const name = `unknown-reentry:${kind}:${process.pid}`;
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    // No retries: a command in flight when the connection closes is rejected, never resent.
    const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0 } });
    const of = (c: LockClient) => (kind === 'fair' ? c.getFairLock(name) : kind === 'read' ? c.getReadWriteLock(name).readLock() : kind === 'write' ? c.getReadWriteLock(name).writeLock() : c.getLock(name));
    const lock = of(client);
    await lock.isLocked();
    await lock.withLock(async (signal) => {
      proxy.silenced = true; // the re-entry goes nowhere: cut at its grace, outcome unknown
      await expect(lock.withLock(() => 'inner', { waitTime: 100 })).rejects.toThrow();
      proxy.silenced = false;
      proxy.cutAll(); // ioredis rejects it now (MaxRetriesPerRequestError): it never ran
      await until('reconnected', async () => (await lock.isLocked().catch(() => false)) === true, 5_000);
      expect(signal.aborted).toBe(false);
      expect(await redis.admin.exists(name)).toBe(1); // before: {} while this scope still ran
      const other = redis.client(); // a writer for a read hold: readers share it
      expect(await (kind === 'read' ? other.getReadWriteLock(name).writeLock() : of(other)).tryLock({ leaseTime: 5_000 })).toBe(false);
    });
    expect(await redis.admin.exists(name)).toBe(0);
  } finally {
    await proxy.close();
  }
}, 20_000);

test('a waiter told a handover’s outcome is unknown (the release flushed by ioredis, never run) whose owner asks again while the connection is down holds alone (a second reader’s repro: its give-back, written after the new acquire, took the new hold)', async () => {
  const name = `handoff-unknown:${process.pid}`;
  const proxy = await TcpProxy.start(redis.server.port);
  try {
    const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0, retryStrategy: () => 100 } });
    type Internals = { context: { redis: { status: string; commandQueue: { length: number } } }; commands: { waitingForReady: { size: number } } };
    const internals = client as unknown as Internals;
    const holder = client.getLock(name);
    const waiter = client.getLock(name);
    await holder.lock({ leaseTime: 1_500 });
    const waiting = waiter.tryLock({ waitTime: 1_200, leaseTime: 30_000 });
    await until('the waiter parked as its client’s candidate', () => parkedWaiters(client, name) === 1);
    proxy.silenced = true; // the release, handing over to the waiter, never reaches Redis
    const unlocking = holder.unlock().catch(() => undefined);
    await until('the release was written', () => internals.context.redis.commandQueue.length > 0);
    proxy.silenced = false;
    proxy.closingNew = true; // no reconnect until both calls below wait for it
    proxy.cutAll(); // maxRetriesPerRequest 0: ioredis rejects the release, outcome unknown: the waiter gives back
    await unlocking;
    expect(await waiting).toBe(false);
    await until('the holder’s lease ran out', async () => (await redis.admin.exists(name)) === 0);
    const again = waiter.lock({ leaseTime: 30_000 });
    await until('the give-back and the new acquire both wait for the connection', () => internals.commands.waitingForReady.size >= 2);
    proxy.closingNew = false;
    await again;
    expect(await waiter.isHeldByCurrentOwner()).toBe(true);
    expect(await redis.client().getLock(name).tryLock({ leaseTime: 5_000 })).toBe(false);
    await waiter.unlock();
  } finally {
    await proxy.close();
  }
}, 20_000);

describe('a semaphore attempt whose outcome is unknown (ioredis gave up on it) is undone by its latch: its permits are not lost for good', () => {
  // Before, such an attempt was left alone: a plain semaphore's permits have no owner and no
  // lease, so what Redis took for a caller that was told nothing never came back.
  /** A semaphore of 1 permit on a client whose commands ioredis gives up on after 1.5 s, connected. */
  async function onePermit(name: string) {
    const client = redis.client({ redis: { host: '127.0.0.1', port: redis.server.port, commandTimeout: 1_500 } });
    const sem = client.getSemaphore(name);
    expect(await sem.trySetPermits(1)).toBe(true); // connected, scripts loaded
    return sem;
  }

  test('cut short by its waitTime, then given up on (commandTimeout): what Redis takes once it resumes is given back', async () => {
    const sem = await onePermit(`unknown-cut:${process.pid}`);
    await whilePaused(async () => {
      expect(await sem.tryAcquire({ waitTime: 300 })).toBe(false); // cut at its grace (1 s)
      await sleep(800); // past the commandTimeout: ioredis rejected it
    });
    // Redis runs the attempt it still had (the permit taken), then the undo sent after it.
    await until('the permit is back', async () => (await sem.availablePermits()) === 1, 3_000);
  }, 20_000);

  test('acquire() without a waitTime whose attempt ioredis gives up on rejects, and the permit Redis takes later is given back', async () => {
    const sem = await onePermit(`unknown-uncut:${process.pid}`);
    await whilePaused(async () => {
      await expect(sem.acquire()).rejects.toThrow(/timed out/i);
    });
    await until('the permit is back', async () => (await sem.availablePermits()) === 1, 3_000);
  }, 20_000);

  test('an attempt that never reached Redis gives back nothing (the undo only leaves its tombstone): the count stays right', async () => {
    const name = `unknown-never-ran:${process.pid}`;
    const proxy = await TcpProxy.start(redis.server.port);
    try {
      // No retries: a command in flight when the connection closes is rejected, never resent.
      const client = redis.client({ redis: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0 } });
      const sem = client.getSemaphore(name);
      expect(await sem.trySetPermits(1)).toBe(true);
      proxy.silenced = true; // the attempt goes nowhere: cut at its grace
      expect(await sem.tryAcquire({ waitTime: 100 })).toBe(false);
      proxy.silenced = false;
      proxy.cutAll(); // ioredis rejects it now: outcome unknown
      const tombstone = async () => {
        for (const key of await redis.admin.keys(`rlock__unlock_latch:{${name}}:*`)) if ((await redis.admin.get(key)) === 'undone') return true;
        return false;
      };
      await until('the undo ran', tombstone, 5_000);
      expect(await redis.admin.get(name)).toBe('1'); // not 2: nothing was taken, nothing given
    } finally {
      await proxy.close();
    }
  }, 20_000);
});

test('a semaphore acquire aborted with a RedisCommandError as its reason while Redis is paused gives its permit back once, not twice (a second reader’s repro: the cut’s late reply and the failure’s undo both gave it back)', async () => {
  const client = redis.client();
  const sem = client.getSemaphore(`abort-reason:${process.pid}`);
  expect(await sem.trySetPermits(1)).toBe(true);
  const controller = new AbortController();
  const outcome = await whilePaused(async () => {
    const sent = atNextScript(client, () => undefined);
    const waiting = sem.acquire({ signal: controller.signal }).then(
      () => 'held',
      (error: unknown) => error,
    );
    await sent; // the attempt is on its way to the frozen Redis
    // The error a sibling operation failed with, passed on to stop the rest.
    controller.abort(new RedisCommandError('lock', new Error('Command timed out')));
    return waiting; // cut at its grace (1 s)
  });
  expect(outcome).toBeInstanceOf(RedisCommandError);
  // Redis runs the attempt (the permit taken), whose late reply gives it back.
  expect(await settled('the permits settle', () => sem.availablePermits(), 500)).toBe(1);
}, 20_000);
