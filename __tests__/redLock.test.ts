// RedLock over five private redis-servers (independent masters, one LockClient each) and a sixth
// for the shared counter: quorum with servers killed, a paused server bounded by the per-lock
// timeout, mutual exclusion across processes, validity.
import { runFixture } from './helpers/child';
import { type PrivateRedis, usePrivateRedis } from './helpers/privateRedis';
import { scriptCallCount } from './helpers/testRedis';
import { aborted, orAfter, sleep, until } from './helpers/time';
import { TcpProxy } from './helpers/tcpProxy';
import { outerEndsFirst } from './helpers/scopes';
import { ClientClosedError, CompositeUnlockError, type LockClient, LockLostError, LockTimeoutError, LockUsageError, QuorumUnavailableError, RedisCommandError, RedLock } from '../src';

const servers: PrivateRedis[] = Array.from({ length: 5 }, () => usePrivateRedis());
const counterServer = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `red:${process.pid}:${++counter}`;

/** How many of the five servers have the lock key `name` (a killed one counts as not). */
async function serversHolding(name: string, among = servers): Promise<number> {
  const found = await Promise.all(among.map((s) => s.admin.exists(name)));
  return found.reduce((sum, n) => sum + n, 0);
}

/** A client per server, the first one's through `proxy` with `offlineTimeout`; all connected, scripts loaded. */
async function throughProxyToFirst(proxy: TcpProxy, offlineTimeout: number): Promise<LockClient[]> {
  const clients = [servers[0]!.client({ redis: proxy.url, offlineTimeout }), ...servers.slice(1).map((s) => s.client())];
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  return clients;
}

function redLock(name: string, clients: LockClient[], attemptTimeout = 300): RedLock {
  return new RedLock(
    clients.map((client) => client.getLock(name)),
    { attemptTimeout, retryDelay: 20 },
  );
}

afterEach(async () => {
  // Tests kill and pause servers: every one is back, empty, for the next.
  for (const s of servers) {
    s.server.resume();
    if (s.server.pid === undefined) await s.server.restart();
  }
});

test('holds with 2 of 5 servers killed; refuses with 3 killed and leaves nothing on the 2 left', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked())); // connected
  await servers[0]!.server.kill();
  await servers[1]!.server.kill();
  const red = redLock(name, clients);
  expect(red.quorum).toBe(3);
  expect(await red.tryLock({ leaseTime: 10_000 })).toBe(true);
  expect(await serversHolding(name, servers.slice(2))).toBe(3);
  expect(await red.isLocked()).toBe(true);
  await red.unlock();
  expect(await serversHolding(name, servers.slice(2))).toBe(0);

  // Down is not busy (node-redlock #168, #288): an outage is an error naming the lock and how
  // many servers answered, not `false` as if someone held it.
  await servers[2]!.server.kill();
  const refused = red.tryLock({ leaseTime: 10_000 });
  await expect(refused).rejects.toBeInstanceOf(QuorumUnavailableError);
  await expect(refused).rejects.toMatchObject({ lockName: name, answered: 2, servers: 5, quorum: 3 });
  expect(await serversHolding(name, servers.slice(3))).toBe(0);
  const timedOut = red.withLock(() => 1, { waitTime: 200 });
  await expect(timedOut).rejects.toThrow(/not acquired within 200 ms: only 2 of 5 servers answered, 3 needed/);
  await expect(timedOut).rejects.toBeInstanceOf(LockTimeoutError);
}, 20_000);

test('read-write write locks as members: held on every server, exclusive, all released', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const red = new RedLock(clients.map((client) => client.getReadWriteLock(name).writeLock()), { attemptTimeout: 300, retryDelay: 20 });
  await red.withLock(async () => {
    expect(await serversHolding(name)).toBe(5);
    expect(await servers[0]!.client().getReadWriteLock(name).readLock().tryLock()).toBe(false);
  }, { waitTime: 2_000 });
  expect(await serversHolding(name)).toBe(0);
});

test('busy is not down: a RedLock held by another owner answers false / LockTimeoutError, not QuorumUnavailableError', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const holder = redLock(name, clients);
  expect(await holder.tryLock({ leaseTime: 10_000 })).toBe(true);
  const other = redLock(name, servers.map((s) => s.client()));
  expect(await other.tryLock({ waitTime: 100 })).toBe(false);
  const timedOut = other.withLock(() => 1, { waitTime: 200 });
  await expect(timedOut).rejects.toBeInstanceOf(LockTimeoutError);
  await expect(timedOut).rejects.not.toBeInstanceOf(QuorumUnavailableError);
  await expect(timedOut).rejects.toMatchObject({ lockName: name, message: `lock "${name}" was not acquired within 200 ms` });
  await holder.unlock();
  expect(await other.tryLock()).toBe(true);
  await other.unlock();
}, 20_000);

test('a paused (SIGSTOP) server does not stall acquire past the per-lock timeout; its late grant is given back', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  servers[4]!.server.pause();
  const red = redLock(name, clients, 300);
  const start = performance.now();
  expect(await red.tryLock({ leaseTime: 10_000 })).toBe(true);
  // Without the per-lock timeout this call would wait for the paused server forever.
  expect(performance.now() - start).toBeLessThan(300 + 2_000);
  expect(await serversHolding(name, servers.slice(0, 4))).toBe(4);
  servers[4]!.server.resume();
  // The paused server runs the acquire it had queued; the answer comes too late and is given back.
  await until('the late member is given back (long before its 10 s lease)', async () => (await servers[4]!.admin.exists(name)) === 0, 3_000);
  await red.unlock();
  expect(await serversHolding(name)).toBe(0);
}, 20_000);

test('a failed round is given back on every server, also on those that answered too late (Redisson #1606)', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  // 3 of 5 paused: the round cannot reach a majority; the paused ones grant when they resume.
  for (const s of servers.slice(2)) s.server.pause();
  const red = redLock(name, clients, 200);
  try {
    await expect(red.tryLock({ leaseTime: 30_000 })).rejects.toBeInstanceOf(QuorumUnavailableError);
    expect(await serversHolding(name, servers.slice(0, 2))).toBe(0);
  } finally {
    for (const s of servers.slice(2)) s.server.resume();
  }
  // Their late grants run the 30 s lease unless given back: they are, at once.
  await until('no server holds the lock', async () => (await serversHolding(name)) === 0, 3_000);
}, 20_000);

test.each(['watchdog', 'leaseTime'] as const)('an event loop blocked past the lease (%s): withLock\'s signal aborts and it rejects LockLostError soon after, nothing unhandled, nothing left (node-redlock #283)', async (kind) => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client({ watchdogTimeout: 300 }));
  const red = redLock(name, clients);
  let unblockedAt = 0;
  const rejected = red.withLock(async (signal) => {
    const busyUntil = performance.now() + 700; // no renewal or timer can run: the members' 300 ms leases end
    while (performance.now() < busyUntil) {
      /* busy: a long synchronous step, a GC pause */
    }
    unblockedAt = performance.now();
    await aborted(signal);
  }, kind === 'leaseTime' ? { leaseTime: 300 } : {});
  await expect(rejected).rejects.toBeInstanceOf(LockLostError);
  expect(performance.now() - unblockedAt).toBeLessThan(500);
  expect(await serversHolding(name)).toBe(0);
}, 20_000);

test.each(['watchdog', 'leaseTime'] as const)('a callback that blocks the event loop past the lease and returns without awaiting (%s): withLock rejects LockLostError, not resolves (a helper audit: another process held the lock meanwhile)', async (kind) => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client({ watchdogTimeout: 300 }));
  const red = redLock(name, clients);
  const lost = jest.fn();
  red.on('lost', lost);
  const outcome = red.withLock(() => {
    const busyUntil = performance.now() + 700; // the members' 300 ms leases end in Redis; no timer runs
    while (performance.now() < busyUntil) {
      /* busy: a long synchronous step, a GC pause */
    }
    return 'done';
  }, kind === 'leaseTime' ? { leaseTime: 300 } : {});
  await expect(outcome).rejects.toBeInstanceOf(LockLostError);
  expect(lost).toHaveBeenCalledTimes(1);
  expect(await serversHolding(name)).toBe(0);
}, 20_000);

test('a member whose acquire’s reply is lost (the connection down) when the caller aborts is given back, also once ioredis resent it (a helper audit: left held for its lease)', async () => {
  const name = uniqueName();
  const proxy = await TcpProxy.start(servers[0]!.server.port);
  try {
    const clients = await throughProxyToFirst(proxy, 1_000);
    const controller = new AbortController();
    // Server 0 runs the acquire, its reply is cut and its connection stays down: that member's
    // acquire fails 1 s (offlineTimeout) after its send; the other four make the quorum.
    proxy.stopAccepting();
    proxy.cutOnNextReply();
    await redLock(name, clients).withLock(async () => {
      await until('server 0 ran the acquire whose reply was cut', async () => (await servers[0]!.admin.exists(name)) === 1);
      controller.abort(new Error('the request timed out')); // before that acquire fails
      // Past the failure (1 s after the send); its give-back then waits up to 1 s for the connection.
      await sleep(1_300);
    }, { leaseTime: 20_000, signal: controller.signal }).catch(() => undefined);
    expect(await servers[0]!.admin.exists(name)).toBe(1);
    // ioredis resends the acquire once connected again: it runs a second time (a second hold of
    // the same field), and its reply, come after the caller left, gives both back.
    await proxy.resumeAccepting();
    await until('server 0’s member is given back', async () => (await servers[0]!.admin.exists(name)) === 0, 3_000);
  } finally {
    await proxy.close();
  }
}, 30_000);

test('unlock() while its own lock() is still acquiring: LockUsageError, as a lone handle answers (it said NotLockOwnerError, and the acquire then held)', async () => {
  const name = uniqueName();
  const clients = servers.slice(0, 3).map((s) => s.client());
  const red = redLock(name, clients);
  const taking = red.tryLock({ waitTime: 10_000 });
  await expect(red.unlock()).rejects.toBeInstanceOf(LockUsageError); // asked before the acquire answered
  expect(await taking).toBe(true);
  await red.unlock();
});

test('a member of a closed client: lock, tryLock, withLock and isLocked throw ClientClosedError before any member is taken', async () => {
  const name = uniqueName();
  const clients = servers.slice(0, 3).map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  const red = redLock(name, clients);
  await clients[2]!.close();
  const calls = await Promise.all(servers.slice(0, 2).map((s) => scriptCallCount(s.admin)));
  await expect(red.tryLock()).rejects.toBeInstanceOf(ClientClosedError);
  await expect(red.lock()).rejects.toBeInstanceOf(ClientClosedError);
  await expect(red.withLock(() => 1)).rejects.toBeInstanceOf(ClientClosedError);
  await expect(red.isLocked()).rejects.toBeInstanceOf(ClientClosedError); // before: false
  expect(await Promise.all(servers.slice(0, 2).map((s) => scriptCallCount(s.admin)))).toEqual(calls);
});

test('an acquire that took longer than the lease minus drift fails and gives back what it took', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  servers[4]!.server.pause();
  // The round waits 600 ms for the paused member: past the 300 ms lease, so the 4 taken are worthless.
  const red = redLock(name, clients, 600);
  expect(await red.tryLock({ leaseTime: 300 })).toBe(false);
  expect(await serversHolding(name, servers.slice(0, 4))).toBe(0);
}, 20_000);

test('validity: what remains of the lease, in whole ms, never more than any member\'s PTTL; withLock\'s signal aborts when it ends', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const red = redLock(name, clients);
  expect(await red.tryLock({ leaseTime: 2_000 })).toBe(true);
  const validity = red.remainingValidity()!;
  const ttls = await Promise.all(servers.map((s) => s.admin.pttl(name)));
  expect(validity).toBeGreaterThan(0);
  expect(Number.isInteger(validity)).toBe(true); // whole ms, rounded down, as every time of the API (it was 1994.6...)
  expect(validity).toBeLessThanOrEqual(Math.min(...ttls));
  await red.unlock();
  expect(red.remainingValidity()).toBeUndefined();

  const events: LockLostError[] = [];
  red.on('lost', (error) => events.push(error));
  let reason: unknown;
  await expect(
    red.withLock(
      async (signal) => {
        reason = await aborted(signal);
      },
      { leaseTime: 300 },
    ),
  ).rejects.toThrow(/validity ran out/);
  expect(reason).toBeInstanceOf(LockLostError);
  expect(events).toHaveLength(1);
});

test('with the watchdog: members lost on 2 of 5 servers are not a loss; on 3 they are', async () => {
  const name = uniqueName();
  // 1 s leases: with 300 ms ones a stall of a loaded machine lost a third member for real.
  const clients = servers.map((s) => s.client({ watchdogTimeout: 1_000 }));
  const memberLosses: string[] = [];
  clients.forEach((client, i) => client.on('lockLost', () => memberLosses.push(`s${i}`)));
  const red = redLock(name, clients);
  let stillHeldAfterTwo = false;
  await expect(
    red.withLock(async (signal) => {
      await Promise.all([servers[0]!.admin.del(name), servers[1]!.admin.del(name)]);
      await until('the watchdogs of 2 servers found their member gone', () => memberLosses.length === 2);
      stillHeldAfterTwo = !signal.aborted;
      await servers[2]!.admin.del(name);
      await aborted(signal);
    }),
  ).rejects.toThrow(/2 of 5 held, 3 needed/);
  expect(stillHeldAfterTwo).toBe(true);
  expect(await serversHolding(name)).toBe(0);
});

describe('maxHoldTime: the watchdogs’ extensions are capped (the Redlock algorithm’s liveness rule; family.md "capped extension")', () => {
  /** A RedLock over the five with 1 s watchdog leases, its extensions capped at `maxHoldTime`. */
  const capped = (name: string, maxHoldTime: number): RedLock =>
    new RedLock(
      servers.map((s) => s.client({ watchdogTimeout: 1_000 }).getLock(name)),
      { attemptTimeout: 300, retryDelay: 20, maxHoldTime },
    );

  /** When `other` first took the lock, trying every 20 ms (Infinity if not within `ms`). */
  const firstTakenAt = (other: RedLock, ms: number): Promise<number> =>
    orAfter(
      (async () => {
        while (!(await other.tryLock({ leaseTime: 5_000 }))) await sleep(20);
        return performance.now();
      })(),
      ms,
      Infinity,
    );

  test('the hold is extended past its lease, then lost within maxHoldTime of its acquisition; another owner gets the lock only after that loss was told', async () => {
    const name = uniqueName();
    const red = capped(name, 2_500);
    const other = redLock(name, servers.map((s) => s.client()));
    const events: LockLostError[] = [];
    red.on('lost', (error) => events.push(error));
    const before = performance.now();
    let heldFor = 0;
    let toldAt = 0;
    let competing: Promise<number> | undefined;
    await expect(
      red.withLock(async (signal) => {
        // Another owner tries every 20 ms from now on.
        competing = (async () => {
          while (!(await other.tryLock({ leaseTime: 5_000 }))) await sleep(20);
          return performance.now();
        })();
        // Bug mode (no cap): the watchdogs renew for good, and this resolves 'not lost'.
        const reason = await orAfter(aborted(signal), 6_000, 'not lost');
        toldAt = performance.now();
        heldFor = toldAt - before;
        expect(reason).toBeInstanceOf(LockLostError);
      }),
    ).rejects.toThrow(/maxHoldTime \(2500 ms\)/);
    expect(heldFor).toBeGreaterThan(1_300); // extended: longer than one lease
    expect(heldFor).toBeLessThan(2_500 + 500); // its timer, late at most by a loaded machine's stall
    expect(events).toHaveLength(1);
    const otherGotAt = await competing!;
    expect(otherGotAt).toBeGreaterThanOrEqual(toldAt);
    await other.unlock();
  }, 20_000);

  test('once the extensions stop, remainingValidity() says how long the hold has left, never more than the quorum’s leases in Redis', async () => {
    const name = uniqueName();
    const red = capped(name, 1_500);
    await red.lock();
    expect(red.remainingValidity()).toBeUndefined(); // extended by the watchdogs for now
    await until('the extensions stopped', () => red.remainingValidity() !== undefined, 3_000);
    const readFrom = performance.now();
    const validity = red.remainingValidity()!;
    const ttls = (await Promise.all(servers.map((s) => s.admin.pttl(name)))).sort((a, b) => b - a);
    expect(validity).toBeGreaterThan(0);
    expect(validity - (performance.now() - readFrom)).toBeLessThanOrEqual(ttls[red.quorum - 1]!);
    await red.unlock().catch(() => undefined); // may have run out by now
  }, 20_000);

  test('a holder that never unlocks (stuck, alive) loses the lock by maxHoldTime: another owner gets it then, only after the loss was told (before the cap, never)', async () => {
    const name = uniqueName();
    const red = capped(name, 2_000);
    const other = redLock(name, servers.map((s) => s.client()));
    const started = performance.now();
    let toldAt = 0;
    red.on('lost', () => (toldAt = performance.now()));
    await red.lock();
    const gotAt = await firstTakenAt(other, 8_000);
    expect(toldAt).toBeGreaterThan(0);
    expect(gotAt).toBeGreaterThanOrEqual(toldAt);
    expect(gotAt - started).toBeLessThan(2_000 + 1_000); // the keys end by maxHoldTime; a round or two after
    await other.unlock();
    await red.unlock(); // its members ran out: nothing to give back, no error
  }, 20_000);

  test('members with different watchdog leases each stop in time to end by maxHoldTime (a second reader’s repro: 8 s leases outlived a 1.5 s cap by 5.7 s)', async () => {
    const name = uniqueName();
    const red = new RedLock(
      servers.map((s, i) => s.client({ watchdogTimeout: i < 2 ? 1_000 : 3_000 }).getLock(name)),
      { attemptTimeout: 300, retryDelay: 20, maxHoldTime: 3_500 },
    );
    const started = performance.now();
    let toldAt = 0;
    red.on('lost', () => (toldAt = performance.now()));
    await red.lock();
    await until('the hold is lost', () => toldAt > 0, 8_000);
    expect(toldAt - started).toBeLessThan(3_500 + 500);
    // Every key is gone by maxHoldTime (with the margin a loaded machine's timers need).
    await until('every member ended', async () => (await serversHolding(name)) === 0, Math.max(0, started + 3_500 + 500 - performance.now()));
    await red.unlock();
  }, 20_000);

  test('a capped RedLock inside a withLock of one of its own members leaves that scope’s hold renewed (a second reader’s repro: the cap stopped the enclosing lock’s watchdog, and another owner took it under the scope)', async () => {
    const name = uniqueName();
    const clients = servers.map((s) => s.client({ watchdogTimeout: 1_000 }));
    const intruder = servers[0]!.client().getLock(name);
    await clients[0]!.getLock(name).withLock(async (outer) => {
      const red = new RedLock(
        clients.map((client) => client.getLock(name)),
        { attemptTimeout: 300, retryDelay: 20, maxHoldTime: 1_200 },
      );
      await red.withLock(() => sleep(400)); // its extensions stop at 200 ms
      await sleep(2_500); // 2.5 leases: renewed, or gone
      expect(outer.aborted).toBe(false);
      expect(await servers[0]!.admin.exists(name)).toBe(1);
      expect(await intruder.tryLock({ leaseTime: 5_000 })).toBe(false);
    });
  }, 20_000);

  test('close() of the members’ clients after the extensions stopped tells the scope at once with ClientClosedError, no lost event (as without the cap)', async () => {
    const name = uniqueName();
    const clients = servers.map((s) => s.client({ watchdogTimeout: 1_000 }));
    const red = new RedLock(
      clients.map((client) => client.getLock(name)),
      { attemptTimeout: 300, retryDelay: 20, maxHoldTime: 1_000 },
    );
    const events: LockLostError[] = [];
    red.on('lost', (error) => events.push(error));
    let reason: unknown;
    await expect(
      red.withLock(async (signal) => {
        await sleep(50); // past the stop (due at once: maxHoldTime is the lease)
        await Promise.all(clients.map((client) => client.close()));
        // Bug mode: told only when the last leases end, as a loss.
        reason = await orAfter(aborted(signal), 300, 'not told');
      }),
    ).rejects.toBeInstanceOf(ClientClosedError);
    expect(reason).toBeInstanceOf(ClientClosedError);
    expect(events).toHaveLength(0);
  }, 20_000);

  test('a member still renewed that is lost after others’ extensions stopped tells the loss when the stopped ones’ leases end, before another owner can take a quorum (before: told only at the next member’s stop, after another owner took it)', async () => {
    const name = uniqueName();
    // Members 3 and 4 (6 s leases) stop at once (7.7 s − 6 s is before their first renewal) and last
    // until about 5.4 s; members 0-2 (1 s leases) are renewed until 6.7 s.
    const red = new RedLock(
      servers.map((s, i) => s.client({ watchdogTimeout: i < 3 ? 1_000 : 6_000 }).getLock(name)),
      { attemptTimeout: 300, retryDelay: 20, maxHoldTime: 7_700 },
    );
    const other = redLock(name, servers.map((s) => s.client()));
    let toldAt = 0;
    red.on('lost', () => (toldAt = performance.now()));
    const t0 = performance.now();
    await red.lock();
    // Once 3 and 4 stopped, member 0 is lost (its key gone): two renewed members and two stopped
    // ones are left, and the whole lasts as long as the stopped ones do.
    await until('members 3 and 4 stopped', () => performance.now() - t0 > 1_800, 3_000);
    expect(await servers[0]!.admin.del(name)).toBe(1);
    const gotAt = await firstTakenAt(other, 10_000);
    expect(toldAt).toBeGreaterThan(0);
    expect(gotAt).toBeGreaterThanOrEqual(toldAt);
    await other.unlock();
    await red.unlock().catch(() => undefined); // lost: what is left may have run out
  }, 20_000);

  test('a callback that blocks the event loop past the capped validity (its keys not yet gone) and returns without awaiting: withLock rejects LockLostError, not resolves', async () => {
    const name = uniqueName();
    const red = capped(name, 1_000); // nothing extended: valid until the quorum’s leases end, less margins
    const outcome = red.withLock(() => {
      // Past the validity the holder was told (the leases' 1 s from their send, less 100 ms of margin and
      // 12 ms of drift), short of when Redis expires the keys (1 s from when it ran them).
      const busyUntil = performance.now() + 900;
      while (performance.now() < busyUntil) {
        /* busy: no timer can tell the end */
      }
      return 'done';
    });
    await expect(outcome).rejects.toThrow(/maxHoldTime \(1000 ms\)/);
  }, 20_000);

  test('with maxHoldTime equal to the lease nothing is extended: remainingValidity() answers right after lock()', async () => {
    const name = uniqueName();
    const red = capped(name, 1_000);
    await red.lock();
    const validity = red.remainingValidity();
    expect(validity).toBeGreaterThan(0);
    expect(validity).toBeLessThanOrEqual(1_000);
    await red.unlock();
  }, 20_000);

  test('bad input is refused before anything is sent: not a whole number of ms, shorter than the watchdog lease, a leaseTime above it', async () => {
    const name = uniqueName();
    const clients = servers.map((s) => s.client({ watchdogTimeout: 1_000 }));
    const locks = clients.map((client) => client.getLock(name));
    expect(() => new RedLock(locks, { maxHoldTime: 1_500.5 })).toThrow(/options\.maxHoldTime/);
    expect(() => new RedLock(locks, { maxHoldTime: 0 })).toThrow(/options\.maxHoldTime/);
    expect(() => new RedLock(locks, { maxHoldTime: 999 })).toThrow(/watchdog lease/);
    const mixed = [...locks.slice(0, 4), servers[4]!.client({ watchdogTimeout: 2_000 }).getLock(name)];
    expect(() => new RedLock(mixed, { maxHoldTime: 1_500 })).toThrow(/longest watchdogTimeout, 2000 ms/);
    const red = new RedLock(locks, { maxHoldTime: 2_000 });
    await expect(red.tryLock({ leaseTime: 2_001 })).rejects.toThrow(/must not exceed the RedLock's maxHoldTime/);
    expect(await serversHolding(name)).toBe(0);
    expect(await red.tryLock({ leaseTime: 2_000 })).toBe(true); // a leaseTime within the cap: not extended, nothing to cap
    await red.unlock();
  });
});

/** A RedLock over the five that holds `name` on servers 0, 1 and 2 only (3 and 4 were down then, and are back, empty). */
async function heldOnThreeOfFive(name: string, leaseTime: number): Promise<{ clients: LockClient[]; a: RedLock }> {
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  await servers[3]!.server.kill();
  await servers[4]!.server.kill();
  const a = redLock(name, clients);
  expect(await a.tryLock({ leaseTime })).toBe(true);
  await servers[3]!.server.restart();
  await servers[4]!.server.restart();
  return { clients, a };
}

test('the documented caveat: a server of the majority restarting empty within the lease lets a second holder in', async () => {
  const name = uniqueName();
  const { clients, a } = await heldOnThreeOfFive(name, 30_000);
  // Server 2 crashes and comes back without its data (no AOF, or AOF without fsync=always).
  await servers[2]!.server.kill();
  await servers[2]!.server.restart();
  const b = redLock(name, clients);
  // Servers 2, 3 and 4 are a majority too: both now "hold" the lock. Persistence with
  // appendfsync always, or restarts delayed past the longest lease, is what prevents this.
  expect(await b.tryLock({ waitTime: 5_000, leaseTime: 30_000 })).toBe(true);
  expect(a.remainingValidity()).toBeGreaterThan(0);
  await Promise.all([a.unlock(), b.unlock()]);
}, 30_000);

test('the documented remedy: a crashed server kept down past the longest lease lets no second holder in while the first is valid', async () => {
  const name = uniqueName();
  // Not shorter: A's lease must outlast the kill and B's round on a loaded machine.
  const lease = 6_000;
  const { clients, a } = await heldOnThreeOfFive(name, lease);
  // Server 2 crashes as in the caveat above, but its restart waits out the longest lease.
  await servers[2]!.server.kill();
  const b = redLock(name, clients);
  // Servers 3 and 4 are no majority while 0 and 1 still have A's lock.
  expect(await b.tryLock({ leaseTime: 30_000 })).toBe(false);
  expect(await serversHolding(name, servers.slice(3))).toBe(0); // given back
  await until("A's validity is over", () => (a.remainingValidity() ?? 0) <= 0, lease + 2_000);
  await servers[2]!.server.restart();
  // Only now can B hold, A's lease having ended on every server.
  expect(await b.tryLock({ waitTime: 5_000, leaseTime: 30_000 })).toBe(true);
  await b.unlock();
}, 30_000);

test('a member whose client was closed: lock() rejects with ClientClosedError, nothing left on the others', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const red = redLock(name, clients);
  await clients[1]!.close();
  await expect(red.lock()).rejects.toThrow(ClientClosedError);
  expect(await serversHolding(name)).toBe(0);
});

test('a member failing with anything but a Redis fault (a bug, a usage error): rejects with it at once, no quorum of the others taken, nothing left', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const members = clients.map((client) => client.getLock(name));
  // Stands for a defect in a member (as a read-write member's fork once was): not a server's fault.
  const broken = members[4]!;
  const fork = broken.fork.bind(broken);
  broken.fork = () => {
    const forked = fork();
    Object.assign(forked.asMember, { acquireHold: () => Promise.reject(new TypeError('a defect in a member')) });
    return forked;
  };
  const red = new RedLock(members, { attemptTimeout: 300, retryDelay: 20 });
  await expect(red.tryLock({ waitTime: 20_000 })).rejects.toThrow('a defect in a member');
  await expect(red.lock()).rejects.toBeInstanceOf(TypeError);
  expect(await serversHolding(name)).toBe(0);
});

test('close() of a member\'s client during the pause between rounds settles lock() at once (a long retryDelay does not keep the process alive)', async () => {
  const name = uniqueName();
  const holders = servers.slice(0, 3).map((s) => s.client());
  await Promise.all(holders.map((client) => client.getLock(name).lock())); // a majority taken elsewhere
  const clients = servers.map((s) => s.client());
  const red = new RedLock(clients.map((client) => client.getLock(name)), { attemptTimeout: 300, retryDelay: 60_000 });
  const before = await scriptCallCount(servers[4]!.admin);
  const locking = red.lock();
  locking.catch(() => undefined);
  // The first round took the two free members and gave them back: it pauses now (30 to 90 s).
  await until('the round gave back what it took', async () => (await scriptCallCount(servers[4]!.admin)) >= before + 2);
  const closedAt = Date.now();
  await clients[2]!.close();
  await expect(locking).rejects.toThrow(ClientClosedError);
  expect(Date.now() - closedAt).toBeLessThan(2_000);
  expect(await serversHolding(name, servers.slice(3))).toBe(0);
});

test('mutual exclusion: 3 processes × 2 tasks, GET + SET counter on a sixth server, no lost update', async () => {
  const name = uniqueName();
  const urls = servers.map((s) => s.server.url).join(',');
  const rounds = 15;
  const results = await Promise.all([0, 1, 2].map(() => runFixture('compositeWorker.ts', ['red', urls, counterServer.server.url, name, String(rounds)], 60_000)));
  for (const result of results) expect(result).toMatchObject({ code: 0 });
  expect(await counterServer.admin.get(`${name}:counter`)).toBe(String(3 * 2 * rounds));
  expect(await serversHolding(name)).toBe(0);
}, 90_000);

test('a RedLock inside a withLock of one of its own members, whose acquire of that member fails (its connection down): the enclosing scope keeps its hold (the failure\'s unlock gave it back)', async () => {
  const name = uniqueName();
  const proxy = await TcpProxy.start(servers[0]!.server.port);
  try {
    const clients = await throughProxyToFirst(proxy, 2_000);
    const first = clients[0]!;
    await first.getLock(name).withLock(async (outerSignal) => {
      // The connection to server 0 drops and stays down: the inner round's acquire there waits
      // offlineTimeout (2 s) and fails; the others make the quorum.
      proxy.stopAccepting();
      proxy.cutOnNextReply();
      await first.getLock('probe').isLocked().catch(() => undefined);
      await redLock(name, clients).withLock(async () => {
        await sleep(2_500); // past the failed acquire: an unlock it sent now waits for the connection
        await proxy.resumeAccepting();
        // Sent after any such unlock, on the same connection, once it is back.
        await first.getLock('probe').isLocked();
        expect(await servers[0]!.admin.exists(name)).toBe(1); // the outer scope still holds it
        expect(outerSignal.aborted).toBe(false);
      });
      expect(await servers[0]!.admin.exists(name)).toBe(1);
    });
    expect(await servers[0]!.admin.exists(name)).toBe(0);
  } finally {
    await proxy.close();
  }
}, 30_000);

test('a RedLock withLock not awaited inside a withLock of one of its own members keeps that member after the plain scope ended; another owner is refused; then nothing is left (before: the plain end gave the member back under it)', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const { open, innerEnded } = await outerEndsFirst(clients[0]!.getLock(name), redLock(name, clients));
  // The plain scope has ended; the RedLock's callback still runs and holds server 0's member.
  expect(await servers[0]!.client().getLock(name).tryLock()).toBe(false);
  expect(await serversHolding(name)).toBe(servers.length);
  open();
  await innerEnded; // its members were all still held: no LockLostError
  expect(await serversHolding(name)).toBe(0);
  expect(clients[0]!.stats.renewals).toBe(0);
});

test('a member kept by its watchdog and lost while a slower member answers does not count toward the quorum: not returned as held (before: held with 2 of the 3 needed)', async () => {
  const name = uniqueName();
  // Watchdog 600 ms: a renewal every 200 ms finds server 0's key gone well before the paused server answers (450 ms).
  const clients = servers.map((s) => s.client({ watchdogTimeout: 600 }));
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked())); // connected
  const others = [servers[3]!.client().getLock(name), servers[4]!.client().getLock(name)];
  for (const other of others) await other.lock(); // refused there: the quorum (3) needs servers 0, 1 and 2
  const lost = jest.fn();
  clients[0]!.on('lockLost', lost);
  await servers[2]!.admin.call('CLIENT', 'PAUSE', '450', 'ALL');
  const trying = redLock(name, clients, 550).tryLock();
  await until('server 0 is held', async () => (await servers[0]!.admin.exists(name)) === 1);
  await servers[0]!.admin.del(name); // a force-unlock by hand
  await until("server 0's watchdog found it gone", () => lost.mock.calls.length === 1);
  expect(await trying).toBe(false);
  expect(await serversHolding(name, servers.slice(0, 3))).toBe(0);
  for (const other of others) await other.unlock();
});

test('unlock() with a majority of the servers not answering rejects naming each (the holds expire with their lease); with a minority it resolves', async () => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await Promise.all(clients.map((client) => client.getLock('warm').isLocked()));
  const red = redLock(name, clients, 200);
  expect(await red.tryLock({ leaseTime: 10_000 })).toBe(true);
  for (const s of servers.slice(2)) s.server.pause(); // 3 of 5
  try {
    const error = await red.unlock().catch((failure: unknown) => failure);
    // Each member that did not answer is named, with its own error (family.md, MultiLock "unlock after partial").
    expect(error).toBeInstanceOf(CompositeUnlockError);
    const { failures, members } = error as CompositeUnlockError;
    expect(members).toBe(5);
    expect(failures.map(({ member }) => member).sort()).toEqual([2, 3, 4]);
    for (const { lockName, error: cause } of failures) {
      expect(lockName).toBe(name);
      expect(cause).toBeInstanceOf(RedisCommandError);
      expect((cause as RedisCommandError).code).toBe('ETIMEDOUT');
    }
    expect((error as CompositeUnlockError).cause).toBe(failures[0]!.error);
  } finally {
    for (const s of servers.slice(2)) s.server.resume();
  }
  await until('the late releases ran once the servers answer again', async () => (await serversHolding(name)) === 0, 3_000);
  expect(await red.tryLock({ leaseTime: 10_000 })).toBe(true);
  servers[4]!.server.pause(); // 1 of 5
  try {
    await red.unlock();
  } finally {
    servers[4]!.server.resume();
  }
  await until('the late release ran', async () => (await serversHolding(name)) === 0, 3_000);
});

test('members that reach one Redis through several clients: LockUsageError, not a lock that can never be taken (lock() spun for good)', async () => {
  // A helper audit's find (every URL defaulting to one host): each round took one member and was
  // refused by itself on the others; a MultiLock said so, a RedLock did not.
  const name = uniqueName();
  const red = redLock(name, [servers[0]!.client(), servers[0]!.client(), servers[0]!.client()]);
  await expect(red.tryLock({ waitTime: 10_000 })).rejects.toThrow(LockUsageError);
  await expect(red.lock()).rejects.toThrow(/RedLock ".*": members \d and \d are the same lock/);
  expect(await servers[0]!.admin.exists(name)).toBe(0); // nothing left
  // Three servers, three locks: taken.
  const apart = redLock(name, servers.slice(0, 3).map((s) => s.client()));
  expect(await apart.tryLock({ waitTime: 1_000 })).toBe(true);
  await apart.unlock();
});
