// A counting call (a semaphore's release, addPermits or drainPermits, a latch's countDown or
// delete) that ioredis resends after an outage longer than its latch lasts must not count a
// second time: it carries a deadline in Redis's clock, and a script refuses it past that
// (src/services/RedisClock.ts, src/lua/includes/fresh.lua). Against a private redis-server.
import calculateSlot from 'cluster-key-slot';
import { type Cluster, Redis } from 'ioredis';
import { RedisCluster } from '../scripts/redisTopologies';
import { LockClient, RedisCommandError } from '../src';
import { STALE_MARGIN_MS } from '../src/services/RedisClock';
import { usePrivateRedis } from './helpers/privateRedis';
import { TcpProxy } from './helpers/tcpProxy';
import { commandCounts } from './helpers/testRedis';
import { until } from './helpers/time';

const redis = usePrivateRedis();
let counter = 0;
const uniqueName = (): string => `stale:${process.pid}:${++counter}`;
const RELEASE_LATCH_TTL_MS = 60_000;
const OPERATION_ID_TTL_MS = 600_000;

/** The client's estimate of Redis's clock (client internals), once measured. */
async function clockOf(client: LockClient): Promise<{ offset: number }> {
  const clock = (client as unknown as { clock: { offset: number | undefined } }).clock;
  await until('the client measured Redis’s clock', () => clock.offset !== undefined);
  return clock as { offset: number };
}

/** What `call` rejected with (undefined: it resolved). */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (error: unknown) => error,
  );
}

function expectStale(error: unknown): void {
  expect(error).toBeInstanceOf(RedisCommandError);
  expect((error as RedisCommandError).code).toBe('STALE');
}

/**
 * Runs `fn` with a client whose connection goes through a TcpProxy and has `maxRetriesPerRequest:
 * null` (BullMQ's setting: ioredis keeps a call for the whole outage); closes both after.
 */
async function throughProxy(fn: (link: { proxy: TcpProxy; own: Redis; client: LockClient }) => Promise<void>): Promise<void> {
  const proxy = await TcpProxy.start(redis.server.port);
  const own = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null });
  own.on('error', () => undefined);
  try {
    await fn({ proxy, own, client: redis.client({ redis: own }) });
  } finally {
    await proxy.close();
    own.disconnect();
  }
}

test('the deadline a call carries is Redis’s clock plus its latch’s time less the margin, whatever the client’s own clock says', async () => {
  const client = redis.client();
  await clockOf(client);
  const [seconds, micros] = await redis.admin.time();
  const redisNow = Number(seconds) * 1000 + Number(micros) / 1000;
  const context = (client as unknown as { context: { redisTimeAfter(ms: number): number } }).context;
  expect(Math.abs(context.redisTimeAfter(RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS) - (redisNow + RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS))).toBeLessThan(500);
});

test('a call sent once that reaches Redis past its deadline (Redis stalled, or the clock estimate wrong) goes again once the clock is measured anew, and counts once', async () => {
  const client = redis.client();
  const clock = await clockOf(client);
  const sem = client.getSemaphore(uniqueName());
  const latch = client.getCountDownLatch(uniqueName());
  await sem.trySetPermits(2);
  await latch.trySetCount(3);
  const right = clock.offset;
  // Every deadline now falls in Redis's past, as if each call had waited in a stalled Redis.
  clock.offset -= 2 * OPERATION_ID_TTL_MS;
  await sem.release();
  await until('the clock is measured again', () => clock.offset !== undefined && Math.abs(clock.offset - right) < 1_000);
  clock.offset = right - 2 * OPERATION_ID_TTL_MS;
  await sem.addPermits(1, { operationId: 'grow-1' });
  clock.offset = right - 2 * OPERATION_ID_TTL_MS;
  await latch.countDown();
  expect(await sem.availablePermits()).toBe(4);
  expect(await latch.getCount()).toBe(2);
  await until('the clock is measured again', () => clock.offset !== undefined && Math.abs(clock.offset - right) < 1_000);
});

test('the call sent again after a refusal carries a fresh deadline, measured anew (before: none, so its own late resend could count twice)', async () => {
  const connection = new Redis(redis.server.port);
  try {
    const client = redis.client({ redis: connection });
    const clock = await clockOf(client);
    const sem = client.getSemaphore(uniqueName());
    await sem.trySetPermits(1);
    const deadlines: number[] = [];
    type Send = (command: { name: string; args: unknown[] }, ...rest: unknown[]) => unknown;
    const hooked = connection as unknown as { sendCommand: Send };
    const send = hooked.sendCommand;
    hooked.sendCommand = function (this: unknown, command, ...rest) {
      if (command.name === 'evalsha' || command.name === 'eval') deadlines.push(Number(command.args[command.args.length - 1]));
      return send.call(this, command, ...rest);
    };
    clock.offset -= 2 * OPERATION_ID_TTL_MS;
    await sem.release();
    const [seconds] = await redis.admin.time();
    expect(deadlines).toHaveLength(2);
    expect(deadlines[0]).toBeLessThan(Number(seconds) * 1000); // refused: in the past
    expect(deadlines[1]).toBeGreaterThan(Number(seconds) * 1000 + RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS - 5_000);
    expect(await sem.availablePermits()).toBe(2);
  } finally {
    connection.disconnect();
  }
});

test('after a reconnect the clock is measured afresh (another server may answer now), and a measure sent before the drop counts for nothing', async () => {
  await throughProxy(async ({ proxy, own, client }) => {
    const clock = await clockOf(client);
    const right = clock.offset;
    clock.offset = right - 55_000; // another server's clock, standing in
    // A measure held in flight by a silent link, then the drop and the reconnect.
    const internals = clock as unknown as { nextMeasureAt: number };
    internals.nextMeasureAt = 0;
    proxy.silenced = true;
    (client as unknown as { context: { redisTimeAfter(ms: number): number } }).context.redisTimeAfter(0); // sends the measure
    const heldFrom = performance.now();
    await until('the measure has been held longer than a measure may take', () => performance.now() - heldFrom > 1_200, 3_000);
    proxy.cutAll();
    proxy.silenced = false;
    await until('the connection is back', () => own.status === 'ready');
    await until('the clock is measured afresh', () => clock.offset !== undefined && Math.abs(clock.offset - right) < 1_000);
  });
});

test('a host suspended (its monotonic clock stood still while the wall clock and Redis’s ran on): the offset is dropped, calls carry no deadline until measured again', async () => {
  const client = redis.client();
  const clock = await clockOf(client);
  const context = (client as unknown as { context: { redisTimeAfter(ms: number): number } }).context;
  const wall = Date.now;
  const suspended = 120_000;
  Date.now = () => wall() + suspended;
  try {
    expect(context.redisTimeAfter(0)).toBe(0);
    await until('the clock is measured again', () => clock.offset !== undefined);
    expect(context.redisTimeAfter(0)).toBeGreaterThan(0);
  } finally {
    Date.now = wall;
  }
});

describe('resent by ioredis after its latch expired and its deadline passed (reply cut, outage, latch gone): refused with STALE (a waiting acquire then tries again), nothing counted twice', () => {
  // `ran`: by default, the proxy cut a reply (Redis ran the call); `windowMs`: the deadline's window (a request latch's by default).
  // `outcome`: what the call ends with; by default it rejects with STALE.
  type Case = [
    string,
    (client: LockClient, name: string) => Promise<{ call: () => Promise<unknown>; ran?: () => Promise<boolean>; meanwhile?: () => Promise<unknown>; check: () => Promise<void>; windowMs?: number; outcome?: (error: unknown) => void }>,
  ];
  const count = async (name: string): Promise<string | null> => redis.admin.get(name);
  const cases: Case[] = [
    ['a semaphore’s release (before: its permit came back twice, more holders than permits)', async (client, name) => {
      const sem = client.getSemaphore(name);
      await sem.trySetPermits(1);
      await sem.acquire();
      return { call: () => sem.release(), ran: async () => (await count(name)) === '1', check: async () => expect(await sem.availablePermits()).toBe(1) };
    }],
    // The resend is refused and the wait goes on with a new attempt, which takes one permit. The
    // permit the first run took stays lost (nobody can know it ran): 0 free of 2, and 1 once the
    // caller releases.
    ['a semaphore’s acquire attempt: the wait takes a permit with a new attempt (before: the resend took a second permit for one caller; then acquire() rejected with STALE)', async (client, name) => {
      const sem = client.getSemaphore(name);
      await sem.trySetPermits(2);
      return {
        call: () => sem.acquire(),
        ran: async () => (await count(name)) === '1',
        outcome: (error) => expect(error).toBeUndefined(),
        check: async () => {
          expect(await sem.availablePermits()).toBe(0);
          await sem.release();
          expect(await sem.availablePermits()).toBe(1);
        },
      };
    }],
    ...([['a semaphore', 'getSemaphore'], ['a permit-expirable semaphore', 'getPermitExpirableSemaphore']] as const).map(([what, kind]): Case => [`${what}’s addPermits`, async (client, name) => {
      const sem = client[kind](name);
      await sem.trySetPermits(1);
      return { call: () => sem.addPermits(1), ran: async () => (await count(name)) === '2', check: async () => expect(await sem.availablePermits()).toBe(2) };
    }]),
    ['a semaphore’s drainPermits (before: it drained a permit released since)', async (client, name) => {
      const sem = client.getSemaphore(name);
      await sem.trySetPermits(2);
      return { call: () => sem.drainPermits(), ran: async () => (await count(name)) === '0', meanwhile: () => redis.client().getSemaphore(name).release(), check: async () => expect(await sem.availablePermits()).toBe(1) };
    }],
    ['a latch’s countDown', async (client, name) => {
      const latch = client.getCountDownLatch(name);
      await latch.trySetCount(3);
      return { call: () => latch.countDown(), ran: async () => (await count(name)) === '2', check: async () => expect(await latch.getCount()).toBe(2), windowMs: OPERATION_ID_TTL_MS };
    }],
    // A retry with the caller's id made as the id's record runs out (10 min after its first
    // run; deleted here), its reply cut: the record dates from the first call, so the retry's
    // deadline counts a request latch's window, not the record's 10 min from its own send.
    ['a semaphore’s release with an operationId, retried as the id’s record runs out (before: the retry, resent, gave the permit back again)', async (client, name) => {
      const sem = client.getSemaphore(name);
      await sem.trySetPermits(1);
      await sem.acquire();
      await sem.release({ operationId: 'job-1' });
      return { call: () => sem.release({ operationId: 'job-1' }), check: async () => expect(await sem.availablePermits()).toBe(1) };
    }],
    ['a latch’s countDown with an operationId, retried as the id’s record runs out (before: the retry, resent, counted again)', async (client, name) => {
      const latch = client.getCountDownLatch(name);
      await latch.trySetCount(3);
      await latch.countDown({ operationId: 'job-1' });
      return { call: () => latch.countDown({ operationId: 'job-1' }), check: async () => expect(await latch.getCount()).toBe(2) };
    }],
    ['a latch’s delete (before: it deleted the latch set again since)', async (client, name) => {
      const latch = client.getCountDownLatch(name);
      await latch.trySetCount(2);
      return {
        call: () => latch.delete(),
        ran: async () => (await redis.admin.exists(name)) === 0,
        // Set again by another client once the "deleted" marker is gone (60 s in life).
        meanwhile: async () => {
          await redis.admin.del(`rlock__kind:{${name}}`);
          expect(await redis.client().getCountDownLatch(name).trySetCount(5)).toBe(true);
        },
        check: async () => expect(await latch.getCount()).toBe(5),
      };
    }],
  ];

  test.each(cases)('%s', async (_name, setUp) => {
    await throughProxy(async ({ proxy, client }) => {
      const name = uniqueName();
      const { call, ran = async () => proxy.cuts > 0, meanwhile, check, windowMs = RELEASE_LATCH_TTL_MS, outcome: expectOutcome = expectStale } = await setUp(client, name);
      // The call's deadline falls 1.5 s after its send instead of 50 s (a countDown's: 9 min 50 s): the outage below outlasts it.
      const clock = await clockOf(client);
      clock.offset -= windowMs - STALE_MARGIN_MS - 1_500;
      proxy.cutOnNextReply();
      proxy.stopAccepting();
      const sentAt = performance.now();
      const outcome = rejection(call());
      await until('Redis ran the call', ran);
      await meanwhile?.();
      // Its latch (or the latch's record of its id) runs out: 60 s or 10 min in life, deleted here.
      const latches = [...(await redis.admin.keys(`rlock__unlock_latch:{${name}}:*`)), ...(await redis.admin.keys(`rlock__latch_ops:{${name}}`))];
      expect(latches.length).toBeGreaterThan(0);
      await redis.admin.del(...latches);
      await until('the deadline has passed', () => performance.now() - sentAt > 2_000, 5_000);
      await proxy.resumeAccepting();
      expectOutcome(await outcome);
      await check();
    });
  }, 20_000);
});

test('a semaphore acquire attempt resent past its deadline while its latch still lives (it ran) answers “taken” from the latch: the caller holds that permit, no second one is taken', async () => {
  await throughProxy(async ({ proxy, client }) => {
    const name = uniqueName();
    const sem = client.getSemaphore(name);
    await sem.trySetPermits(2);
    // The deadline falls 1.5 s after the send; the latch (60 s) outlives the outage.
    const clock = await clockOf(client);
    clock.offset -= RELEASE_LATCH_TTL_MS - STALE_MARGIN_MS - 1_500;
    proxy.cutOnNextReply();
    proxy.stopAccepting();
    const sentAt = performance.now();
    const outcome = rejection(sem.acquire());
    await until('Redis ran the attempt', async () => (await redis.admin.get(name)) === '1');
    await until('the deadline has passed', () => performance.now() - sentAt > 2_000, 5_000);
    await proxy.resumeAccepting();
    expect(await outcome).toBeUndefined();
    // The latch is read before the deadline: refused with STALE instead, the wait took a second permit.
    expect(await sem.availablePermits()).toBe(1);
    await sem.release();
    expect(await sem.availablePermits()).toBe(2);
  });
}, 20_000);

test('a client whose Redis refuses TIME (an ACL without +time) sends no deadline, and its calls run as before', async () => {
  await redis.admin.call('ACL', 'SETUSER', 'notime', 'on', '>pw', '~*', '&*', '+@all', '-time');
  try {
    const client = redis.client({ redis: `redis://notime:pw@127.0.0.1:${redis.server.port}` });
    const sem = client.getSemaphore(uniqueName());
    expect(await sem.trySetPermits(1)).toBe(true);
    await sem.acquire();
    await sem.release();
    expect(await sem.availablePermits()).toBe(1);
    const clock = (client as unknown as { clock: { offset: number | undefined; nextMeasureAt: number } }).clock;
    await until('the refused measure was answered', () => clock.nextMeasureAt > performance.now() + 30_000);
    expect(clock.offset).toBeUndefined();
  } finally {
    await redis.admin.call('ACL', 'DELUSER', 'notime');
  }
});

describe('on a Cluster', () => {
  let cluster: RedisCluster;
  let admin: Cluster;
  beforeAll(async () => {
    cluster = await RedisCluster.start({ masters: 3 });
    admin = cluster.connect();
  }, 60_000);
  afterAll(async () => {
    admin.disconnect();
    await cluster.stop();
  });

  const timeCalls = async (node: Redis): Promise<number> => (await commandCounts(node)).time ?? 0;

  test('a key’s deadline comes from the clock of the master that holds it, measured on that master (a TIME through the Cluster went to any node, whose clock may differ)', async () => {
    const client = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
    try {
      await client.getSemaphore('warm-up').trySetPermits(1);
      await admin.refreshSlotsCache?.();
      const masters = admin.nodes('master');
      expect(masters).toHaveLength(3);
      // A semaphore name on each master.
      const names = masters.map((master) => {
        const address = `${master.options.host}:${master.options.port}`;
        for (let i = 0; ; i++) {
          const name = `clock:${i}`;
          if (admin.slots[calculateSlot(name)]?.[0] === address) return name;
        }
      });
      await until('every master’s clock is measured', async () => (await Promise.all(masters.map(timeCalls))).every((calls) => calls > 0));
      const context = (client as unknown as { context: { remeasureRedisClock(key: string): Promise<void> } }).context;
      for (let round = 0; round < 2; round++) {
        for (const [i, name] of names.entries()) {
          const before = await Promise.all(masters.map(timeCalls));
          await context.remeasureRedisClock(name); // what a call refused as late does
          const after = await Promise.all(masters.map(timeCalls));
          expect(after.map((calls, j) => calls - before[j]!)).toEqual(masters.map((_, j) => (j === i ? 1 : 0)));
        }
      }
      // The deadline of a key comes from its own master's clock: with each master's measured
      // offset moved by its own amount (client internals: no test can skew a node's real clock
      // here), each key's deadline moves by its master's amount. (Every clock of this Cluster
      // reads one host's time, so only this shows a deadline dated by another master's clock.)
      type Clock = { offset: number; nextMeasureAt: number };
      const byNode = (client as unknown as { clock: { clocks: Map<string, { clock: Clock }> } }).clock.clocks;
      const redisTimeAfter = (client as unknown as { context: { redisTimeAfter(ms: number, key: string): number } }).context.redisTimeAfter;
      const shift = 1_000_000_000;
      masters.forEach((master, j) => {
        const { clock } = byNode.get(`${master.options.host}:${master.options.port}`)!;
        clock.offset += j * shift;
        clock.nextMeasureAt = Infinity; // no measure undoes it meanwhile
      });
      // Two reads of the clock apart, the first name's own difference may be a hair below 0, which
      // Math.round makes -0 (toEqual tells -0 from 0: a clean-clone CI run failed so); + 0 makes it 0.
      expect(names.map((name) => Math.round((redisTimeAfter(0, name) - redisTimeAfter(0, names[0]!)) / shift) + 0)).toEqual([0, 1, 2]);
      for (const name of names) await context.remeasureRedisClock(name);
      // And a counting call on each master carries a deadline its master accepts.
      for (const name of names) {
        const sem = client.getSemaphore(name);
        await sem.trySetPermits(1);
        await sem.acquire();
        await sem.release();
        await sem.addPermits(1, { operationId: `grow-${name}` });
        expect(await sem.availablePermits()).toBe(2);
      }
    } finally {
      await client.close();
    }
  }, 30_000);
});
