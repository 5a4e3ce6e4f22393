// MultiLock over three private redis-servers (independent masters, one LockClient each): the
// shared suite (helpers/multiLockSuite.ts) with one lock name on every server
// (multiLockKeyOrder.test.ts runs it with a name per server); then what does not depend on the
// names: read-write members, one lock listed twice, nesting.
import { multiLockSuite } from './helpers/multiLockSuite';
import { type PrivateRedis, usePrivateRedis } from './helpers/privateRedis';
import { ClientClosedError, diagnostics, type LockClient, type LockHandle, LockUsageError, MultiLock } from '../src';
import { TcpProxy } from './helpers/tcpProxy';
import { outerEndsFirst } from './helpers/scopes';
import { commandCounts, withReplica } from './helpers/testRedis';
import { sleep, until } from './helpers/time';

const servers: PrivateRedis[] = [usePrivateRedis(), usePrivateRedis(), usePrivateRedis()];
let counter = 0;
const uniqueName = (): string => `multi:${process.pid}:${++counter}`;

/** How many servers have the lock key `name`. */
async function serversHolding(name: string): Promise<number> {
  const found = await Promise.all(servers.map((s) => s.admin.exists(name)));
  return found.reduce((sum, n) => sum + n, 0);
}

describe('one lock name on every server (one key)', () => {
  multiLockSuite(servers, 'same');
});

test('read-write lock members: a MultiLock holds write and read members together; other readers share the read member, nobody else writes (Redisson #467)', async () => {
  const name = uniqueName();
  const client = servers[0]!.client();
  const other = servers[0]!.client();
  const multi = new MultiLock([client.getReadWriteLock(`${name}:a`).writeLock(), client.getReadWriteLock(`${name}:b`).readLock(), servers[1]!.client().getReadWriteLock(name).writeLock()]);
  await multi.withLock(async () => {
    expect(await other.getReadWriteLock(`${name}:a`).readLock().tryLock()).toBe(false);
    expect(await other.getReadWriteLock(`${name}:b`).writeLock().tryLock()).toBe(false);
    const reader = other.getReadWriteLock(`${name}:b`).readLock();
    expect(await reader.tryLock()).toBe(true);
    await reader.unlock();
    expect(await servers[1]!.client().getReadWriteLock(name).readLock().tryLock()).toBe(false);
  });
  expect(await servers[0]!.admin.exists(`${name}:a`, `${name}:b`)).toBe(0);
  expect(await serversHolding(name)).toBe(0);
});

test('one lock listed twice through two clients of one Redis: LockUsageError at once, nothing left (it would wait for itself for good)', async () => {
  const name = uniqueName();
  const [first, second] = [servers[0]!.client(), servers[0]!.client()];
  const multi = new MultiLock([first.getLock(name), servers[1]!.client().getLock(name), second.getLock(name)]);
  await expect(multi.tryLock({ waitTime: 10_000 })).rejects.toThrow(LockUsageError);
  await expect(multi.lock()).rejects.toThrow(new RegExp(`members 0 and 2 are the same lock "${name}" on one Redis through two clients`));
  expect(await serversHolding(name)).toBe(0);
  // The same name on different servers is different locks, as everywhere else in this suite.
  const apart = new MultiLock(servers.map((s) => s.client().getLock(name)));
  expect(await apart.tryLock({ waitTime: 1_000 })).toBe(true);
  await apart.unlock();
});

test('a composite inside a withLock of one of its members (same client) enters that member again: its hold count is 2 inside and 1 after, the outer scope keeps its lock', async () => {
  expect.assertions(5);
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const member = clients[0]!.getLock(name);
  await member.withLock(async () => {
    const multi = new MultiLock(clients.map((client) => client.getLock(name)));
    await multi.withLock(async () => {
      expect(await member.getHoldCount()).toBe(2);
      expect(await serversHolding(name)).toBe(servers.length);
    });
    expect(await member.getHoldCount()).toBe(1);
    expect(await serversHolding(name)).toBe(1);
  });
  expect(await serversHolding(name)).toBe(0);
});

// A MultiLock's withLock started and not awaited inside a withLock of one of its members: the
// member's re-entry is inside that scope until the MultiLock gives it back. Before, the plain
// scope's end gave back every hold of its owner, the member's re-entry too: another owner took the
// member while the MultiLock's callback ran (which then rejected with LockLostError).
const memberKinds: [string, (client: LockClient, name: string) => LockHandle][] = [
  ['lock', (client, name) => client.getLock(name)],
  ['fair', (client, name) => client.getFairLock(name)],
  ['write', (client, name) => client.getReadWriteLock(name).writeLock()],
];

test.each(memberKinds)('%s: a MultiLock withLock not awaited inside a withLock of one of its members keeps that member after the plain scope ended; another owner is refused; then nothing is left', async (_kind, member) => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const { open, innerEnded } = await outerEndsFirst(member(clients[0]!, name), new MultiLock(clients.map((client) => member(client, name))));
  // The plain scope has ended; the MultiLock's callback still runs and holds every member.
  expect(await member(servers[0]!.client(), name).tryLock()).toBe(false);
  expect(await serversHolding(name)).toBe(servers.length);
  open();
  await innerEnded; // its members were all still held: no LockLostError
  expect(await serversHolding(name)).toBe(0);
  expect(clients[0]!.stats.renewals).toBe(0);
});

test.each(memberKinds)("%s: a MultiLock withLock awaited inside a withLock of one of its members leaves that scope when it gives the member back: the scope's end still gives back a lock() left behind", async (_kind, member) => {
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  await member(clients[0]!, name).withLock(async () => {
    await new MultiLock(clients.map((client) => member(client, name))).withLock(async () => {
      expect(await serversHolding(name)).toBe(servers.length);
    });
    await member(clients[0]!, name).lock(); // left behind: the scope's end gives it back
  });
  // Before (the fork's unlock() giving its hold back without leaving the scope), the scope still
  // counted the member inside at its end and gave back only its own hold: the lock() left behind
  // was kept by the watchdog for good.
  expect(await serversHolding(name)).toBe(0);
  expect(clients[0]!.stats.renewals).toBe(0);
});

test.each(memberKinds)('%s: a MultiLock inside a withLock of one of its members whose re-entry of it times out (held elsewhere) leaves that scope: its end gives back the lock() calls left behind', async (_kind, member) => {
  const name = uniqueName();
  const client = servers[0]!.client();
  const other = servers[0]!.client();
  await member(client, name).withLock(async () => {
    // The scope gives its own hold back and another owner takes the lock.
    await member(client, name).unlock();
    const elsewhere = member(other, name);
    await elsewhere.lock();
    expect(await new MultiLock([member(client, name)]).tryLock({ waitTime: 300 })).toBe(false);
    await elsewhere.unlock();
    // Left behind: the scope's end gives them back.
    await member(client, name).lock();
    await member(client, name).lock();
    expect(await member(client, name).getHoldCount()).toBe(2);
  });
  // Had the timed-out re-entry counted inside the scope (as if it had entered), the scope's end
  // would give back only one hold: the other kept by the watchdog for good.
  expect(await servers[0]!.admin.exists(name)).toBe(0);
  expect(client.stats.renewals).toBe(0);
});

test('a member lock taken by itself (withLock, lock, tryLock) inside the withLock of a composite that holds it: LockUsageError at once (it waited for itself, for good without a waitTime); another lock is fine', async () => {
  expect.assertions(6);
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const multi = new MultiLock(clients.map((client) => client.getLock(name)));
  await multi.withLock(async () => {
    const member = clients[0]!.getLock(name);
    await expect(member.withLock(() => undefined, { waitTime: 10_000 })).rejects.toThrow(/not reentrant, it would wait for itself/);
    await expect(member.tryLock({ waitTime: 10_000 })).rejects.toThrow(LockUsageError);
    await expect(member.lock()).rejects.toThrow(LockUsageError);
    expect(await clients[0]!.getLock(uniqueName()).withLock(() => 'another lock: fine')).toBe('another lock: fine');
    expect(await serversHolding(name)).toBe(servers.length);
  });
  expect(await serversHolding(name)).toBe(0);
});

test('a withLock, lock() or tryLock() inside a withLock of a composite sharing a member: LockUsageError at once (it would wait for itself), the outer scope unharmed', async () => {
  expect.assertions(5);
  const name = uniqueName();
  const clients = servers.map((s) => s.client());
  const multi = new MultiLock(clients.map((client) => client.getLock(name)));
  const overlapping = new MultiLock([clients[1]!.getLock(name), clients[2]!.getLock(uniqueName())]);
  const apart = new MultiLock([clients[0]!.getLock(uniqueName())]);
  await multi.withLock(async () => {
    await expect(multi.withLock(() => undefined, { waitTime: 10_000 })).rejects.toThrow(/not reentrant, it would wait for itself/);
    await expect(overlapping.tryLock({ waitTime: 10_000 })).rejects.toThrow(LockUsageError);
    await expect(overlapping.lock()).rejects.toThrow(LockUsageError);
    expect(await apart.withLock(() => 'nested, disjoint members: fine')).toBe('nested, disjoint members: fine');
  });
  expect(await serversHolding(name)).toBe(0);
});

describe('members of one client on one server, taken in one call (acquireAll.lua) beside members taken alone', () => {
  test('plain locks of one client with a fair lock and another client’s lock: held together, exclusive, renewed by the watchdog, all released', async () => {
    const name = uniqueName();
    const client = servers[0]!.client({ watchdogTimeout: 1_000 });
    const other = servers[0]!.client();
    const keys = [`${name}:a`, `${name}:b`, `${name}:fair`];
    const multi = new MultiLock([client.getLock(keys[0]!), client.getLock(keys[1]!), client.getFairLock(keys[2]!), servers[1]!.client().getLock(name)]);
    const lost: unknown[] = [];
    multi.on('lost', (error) => lost.push(error));
    await multi.withLock(async (signal) => {
      for (const key of keys) expect(await servers[0]!.admin.exists(key)).toBe(1);
      expect(await other.getLock(keys[1]!).tryLock()).toBe(false);
      await sleep(2_500); // 2.5 leases: kept only by the watchdog's renewals
      for (const key of keys) expect(await servers[0]!.admin.exists(key)).toBe(1);
      expect(signal.aborted).toBe(false);
    });
    expect(lost).toHaveLength(0);
    expect(await servers[0]!.admin.exists(...keys)).toBe(0);
    expect(await serversHolding(name)).toBe(0);
    expect(client.stats.renewals).toBe(0);
  }, 20_000);

  test('a leaseTime is each grouped member’s TTL; without one the watchdog’s lease is', async () => {
    const name = uniqueName();
    const client = servers[0]!.client({ watchdogTimeout: 5_000 });
    const multi = new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`)]);
    const ttls = async (): Promise<number[]> => Promise.all([`${name}:a`, `${name}:b`].map((key) => servers[0]!.admin.pttl(key)));
    expect(await multi.tryLock({ leaseTime: 2_000 })).toBe(true);
    for (const ttl of await ttls()) expect(ttl > 1_000 && ttl <= 2_000).toBe(true);
    await multi.unlock();
    await multi.lock();
    for (const ttl of await ttls()) expect(ttl > 4_000 && ttl <= 5_000).toBe(true);
    await multi.unlock();
  });

  test('both members held elsewhere, listed [c, a]: the round waits for a, the lowest key, as every process in its place does', async () => {
    const name = uniqueName();
    const holders = [`${name}:c`, `${name}:a`].map((key) => servers[0]!.client().getLock(key));
    for (const holder of holders) await holder.lock();
    const client = servers[0]!.client();
    const multi = new MultiLock([client.getLock(`${name}:c`), client.getLock(`${name}:a`)]);
    const waiting = multi.tryLock({ waitTime: 10_000 });
    await until('the MultiLock waits on a member', async () => (await holders[0]!.inspect()).waitingClients + (await holders[1]!.inspect()).waitingClients === 1);
    expect((await holders[1]!.inspect()).waitingClients).toBe(1); // a (before: c, the first listed)
    for (const holder of holders) await holder.unlock();
    expect(await waiting).toBe(true);
    await multi.unlock();
  });

  /**
   * A MultiLock over `<name>:a` and `<name>:b` of one client through `proxy`, whose one-call round
   * ran (both taken) and lost its reply: ioredis resends it once the proxy accepts again.
   */
  async function roundResentLater(proxy: TcpProxy, name: string): Promise<{ multi: MultiLock; trying: Promise<boolean> }> {
    const client = servers[0]!.client({ redis: proxy.url });
    const multi = new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`)]);
    expect(await multi.isLocked()).toBe(false); // connected
    proxy.stopAccepting();
    proxy.cutOnNextReply(); // the first run's reply is lost: ioredis resends it once reconnected
    const trying = multi.tryLock();
    await until('the first run took both', async () => (await servers[0]!.admin.exists(`${name}:a`, `${name}:b`)) === 2);
    return { multi, trying };
  }

  test('a grouped round resent after its first run took both, one freed and taken by another in between: the refusal gives back what the first run took (a second reader’s repro: b held for nobody for its lease)', async () => {
    const proxy = await TcpProxy.start(servers[0]!.server.port);
    try {
      const name = uniqueName();
      const { trying } = await roundResentLater(proxy, name);
      const other = servers[0]!.client().getLock(`${name}:a`);
      expect(await other.forceUnlock()).toBe(true);
      expect(await other.tryLock()).toBe(true);
      await proxy.resumeAccepting();
      expect(await trying).toBe(false);
      await until('b is given back', async () => (await servers[0]!.admin.exists(`${name}:b`)) === 0, 3_000);
      await other.unlock();
    } finally {
      await proxy.close();
    }
  }, 20_000);

  test('a grouped round resent after its first run took both, nothing in between: the resend finds its own fields and holds (tryLock() true in one round), and unlock() frees both', async () => {
    const proxy = await TcpProxy.start(servers[0]!.server.port);
    try {
      const name = uniqueName();
      const { multi, trying } = await roundResentLater(proxy, name);
      await proxy.resumeAccepting();
      // A resend refused by its own first run's fields: given back, and tryLock() false.
      expect(await trying).toBe(true);
      await multi.unlock();
      expect(await servers[0]!.admin.exists(`${name}:a`, `${name}:b`)).toBe(0);
    } finally {
      await proxy.close();
    }
  }, 20_000);

  test('members of a client with syncReplicas are taken alone, each through its WAIT: with the replica paused the round is refused and nothing is left (one call for both would skip the WAIT)', async () => {
    const primary = servers[0]!;
    await withReplica(primary, async (replica) => {
      const client = primary.client({ syncReplicas: { replicas: 1, timeout: 300 } });
      const name = uniqueName();
      const multi = new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`)]);
      expect(await multi.tryLock()).toBe(true); // acknowledged
      await multi.unlock();
      replica.pause();
      expect(await multi.tryLock()).toBe(false); // not acknowledged: given back
      expect(await primary.admin.exists(`${name}:a`, `${name}:b`)).toBe(0);
    });
  }, 20_000);

  test('a refusal in the group waits for the member that refused (not one left untried), then takes all', async () => {
    const name = uniqueName();
    const client = servers[0]!.client();
    const holder = servers[0]!.client().getLock(`${name}:b`);
    await holder.lock();
    const multi = new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`), client.getLock(`${name}:c`)]);
    expect(await multi.isLocked()).toBe(false); // connected
    const writes = async (): Promise<number> => (await commandCounts(servers[0]!.admin)).hincrby ?? 0;
    const writesBefore = await writes();
    const waiting = multi.tryLock({ waitTime: 10_000 });
    await until('the MultiLock waits on the member that refused', async () => (await holder.inspect()).waitingClients === 1);
    // Straight to b: not a round that takes a (free, but left untried by the group's refusal) first.
    expect((await writes()) - writesBefore).toBe(0);
    await holder.unlock();
    expect(await waiting).toBe(true);
    expect(await servers[0]!.admin.exists(`${name}:a`, `${name}:b`, `${name}:c`)).toBe(3);
    await multi.unlock();
    expect(await servers[0]!.admin.exists(`${name}:a`, `${name}:b`, `${name}:c`)).toBe(0);
  }, 20_000);
});

test('close() of a member’s client while the MultiLock waits for another member (held elsewhere) settles lock() at once, as between rounds; the waited member’s client keeps no waiter', async () => {
  const name = uniqueName();
  const holder = servers[1]!.client();
  await holder.getLock(name).lock(); // held elsewhere, for as long as the test runs
  const clients = [servers[0]!.client(), servers[1]!.client()];
  const multi = new MultiLock(clients.map((client) => client.getLock(name)));
  const locking = multi.lock();
  locking.catch(() => undefined);
  // The first round took member 0, gave it back, and now waits for member 1 on its client.
  await until('the MultiLock waits for member 1', () => clients[1]!.stats.waiters === 1);
  const closedAt = performance.now();
  await clients[0]!.close();
  // Before, it waited on until member 1 was freed (for good with lock()), then rejected.
  await expect(locking).rejects.toThrow(ClientClosedError);
  expect(performance.now() - closedAt).toBeLessThan(1_000);
  expect(clients[1]!.stats).toEqual({ renewals: 0, waitingChannels: 0, waiters: 0 });
  expect(await servers[0]!.admin.exists(name)).toBe(0);
});

test('close() while a round has taken one member and another’s acquire is still out: the member taken is given back at once, not held for its lease', async () => {
  const name = uniqueName();
  const client = servers[0]!.client();
  // A plain and a fair member of one client: tried side by side, each a call of its own.
  const multi = new MultiLock([client.getLock(`${name}:a`), client.getFairLock(`${name}:b`)]);
  const acquired = new Set<string>();
  const onAcquired = (message: unknown): void => void acquired.add((message as { name: string }).name);
  diagnostics.acquired.subscribe(onAcquired);
  // The second script call (the fair member's acquire) is held back until the plain member's
  // hold is booked; close() comes then, with that acquire still out.
  type Send = (command: { name: string; promise?: unknown }, ...rest: unknown[]) => unknown;
  const connection = (client as unknown as { context: { redis: { sendCommand: Send } } }).context.redis;
  const send = connection.sendCommand;
  let scripts = 0;
  let closing: Promise<void> | undefined;
  connection.sendCommand = function (this: unknown, command, ...rest) {
    if ((command.name === 'evalsha' || command.name === 'eval') && ++scripts === 2) {
      connection.sendCommand = send;
      void until('the plain member booked', () => acquired.has(`${name}:a`)).then(() => {
        closing = client.close();
        send.call(this, command, ...rest);
      });
      // What ioredis's sendCommand answers: the command's own promise, settled by its reply.
      return command.promise;
    }
    return send.call(this, command, ...rest);
  };
  try {
    await expect(multi.tryLock({ waitTime: 5_000 })).rejects.toThrow(ClientClosedError);
    await closing;
  } finally {
    diagnostics.acquired.unsubscribe(onAcquired);
  }
  // Before, the round's give-back went through the member's unlock(), which the closing client
  // refused: the plain member stayed taken by nobody for its lease (30 s).
  expect(await servers[0]!.admin.exists(`${name}:a`)).toBe(0);
  await until('the fair member given back', async () => (await servers[0]!.admin.exists(`${name}:b`)) === 0);
});

test('a task a MultiLock’s withLock started that runs on after it ended may take a member (before: refused with LockUsageError, as if still inside)', async () => {
  const name = uniqueName();
  const client = servers[0]!.client();
  const multi = new MultiLock([client.getLock(`${name}:a`), client.getLock(`${name}:b`)]);
  let scopeEnded!: () => void;
  const ended = new Promise<void>((resolve) => (scopeEnded = resolve));
  let later: Promise<boolean> | undefined;
  await multi.withLock(async () => {
    later = ended.then(async () => {
      const member = client.getLock(`${name}:a`);
      const took = await member.tryLock();
      if (took) await member.unlock();
      return took;
    });
  });
  scopeEnded();
  expect(await later).toBe(true);
});
