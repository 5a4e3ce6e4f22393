// Fault 13: the lock's slot is not served for a while (CLUSTERDOWN), longer than ioredis's own
// retries. A waiter keeps trying within its waitTime instead of failing; a single attempt fails
// with a typed error that says the failure is transient.
import { type Cluster, Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { LockClient, RedisCommandError } from '../../src';
import { slotOwnerPort, useCluster } from '../helpers/handoff';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { orAfter, sleep, until } from '../helpers/time';

const clusterOf = useCluster({ masters: 3 });

/**
 * Sets every node's cluster-node-timeout: raised, the other masters keep serving through one
 * frozen master, not yet a failure to them (with the suite's 1 s the whole Cluster would go
 * down, as Redis decides).
 */
function setNodeTimeout(cluster: ReturnType<typeof clusterOf>, ms: number): Promise<unknown> {
  return Promise.all(
    cluster.servers.map(async (server) => {
      const node = server.connect();
      try {
        await node.config('SET', 'cluster-node-timeout', String(ms));
      } finally {
        node.disconnect();
      }
    }),
  );
}

test('a waiter rides out CLUSTERDOWN and takes the lock once the slot is served again', async () => {
  const redis = clusterOf().connect();
  const client = new LockClient({ redis });
  const name = 'cluster-down';
  const owner = new Redis((await slotOwnerPort(redis, name))!, '127.0.0.1', { disconnectTimeout: 0 });
  const slot = calculateSlot(name);
  try {
    await owner.cluster('DELSLOTS', slot); // the owner stops serving the slot: CLUSTERDOWN
    const single = await client
      .getLock(name)
      .tryLock()
      .catch((error: unknown) => error);
    // The owner answers CLUSTERDOWN, the other nodes MOVED to it: ioredis reports whichever came last.
    expect(single).toBeInstanceOf(RedisCommandError);
    expect(['CLUSTERDOWN', 'MOVED']).toContain((single as RedisCommandError).code);
    expect((single as RedisCommandError).transient).toBe(true);

    const taking = client
      .getLock(name)
      .tryLock({ waitTime: 20_000, leaseTime: 5000 })
      .catch((error: unknown) => error);
    await sleep(2500); // past ioredis's own CLUSTERDOWN retries (16 × 100 ms)
    await owner.cluster('ADDSLOTS', slot);
    expect(await taking).toBe(true);
  } finally {
    await client.close();
    redis.disconnect();
    owner.disconnect();
  }
}, 60_000);

test('every primitive: a wait rides out CLUSTERDOWN and takes it once its slot is served again', async () => {
  const redis = clusterOf().connect();
  const client = new LockClient({ redis });
  const owners: { node: Redis; slot: number }[] = [];
  try {
    const names = heldKindNames.map((kind) => `cluster-down-${kind}`);
    for (const [i, kind] of heldKindNames.entries()) await heldKinds[kind].prepare?.(client, names[i]!);
    for (const name of names) {
      const node = new Redis((await slotOwnerPort(redis, name))!, '127.0.0.1', { disconnectTimeout: 0 });
      owners.push({ node, slot: calculateSlot(name) });
      await node.cluster('DELSLOTS', calculateSlot(name));
    }
    const taking = heldKindNames.map((kind, i) => heldKinds[kind].tryTake(client, names[i]!, 20_000).catch((error: unknown) => error));
    await sleep(2500); // past ioredis's own CLUSTERDOWN retries (16 × 100 ms)
    for (const { node, slot } of owners) await node.cluster('ADDSLOTS', slot);
    expect(await Promise.all(taking)).toEqual(heldKindNames.map(() => true));
  } finally {
    await client.close();
    redis.disconnect();
    for (const { node } of owners) node.disconnect();
  }
}, 60_000);

test("a frozen master does not stop the watchdog on the others: their holds are renewed all along, only the frozen master's are reported lost", async () => {
  const cluster = clusterOf();
  const redis = cluster.connect();
  const client = new LockClient({ redis: { clusterNodes: cluster.startupNodes }, watchdogTimeout: 1500 });
  const lost: string[] = [];
  client.on('lockLost', (event) => lost.push(event.name));
  const nodeTimeout = (ms: number): Promise<unknown> => setNodeTimeout(cluster, ms);
  await nodeTimeout(20_000);
  try {
    const names = Array.from({ length: 12 }, (_, i) => `frozen-node:${i}`);
    const ports = await Promise.all(names.map((name) => slotOwnerPort(redis, name)));
    const frozenPort = ports[0]!;
    expect(new Set(ports).size).toBe(3); // spread over every master
    await Promise.all(names.map((name) => client.getLock(name).lock()));
    const frozen = cluster.servers.find((server) => server.port === frozenPort)!;
    frozen.pause();
    try {
      await sleep(3_000); // two leases: renewals on the other masters must go on meanwhile
    } finally {
      frozen.resume();
    }
    const elsewhere = names.filter((_, i) => ports[i] !== frozenPort);
    for (const name of elsewhere) expect(await redis.pttl(name)).toBeGreaterThan(0);
    expect(lost.filter((name) => elsewhere.includes(name))).toEqual([]);
    expect(lost.length).toBe(names.length - elsewhere.length);
  } finally {
    await client.close();
    redis.disconnect();
    await nodeTimeout(1_000);
  }
}, 30_000);

test("a fair-lock grant on a healthy master gets its early renewal while the watchdog's call to a frozen master is out: not lost after its short first lease", async () => {
  const cluster = clusterOf();
  const redis = cluster.connect();
  // A tick every 3 s; a grant's first lease is queueTimeout (1.5 s), renewed early, halfway there.
  const client = new LockClient({ redis: { clusterNodes: cluster.startupNodes }, watchdogTimeout: 9_000, queueTimeout: 1_500 });
  const other = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  const lost: string[] = [];
  client.on('lockLost', (event) => lost.push(event.name));
  const nodeTimeout = (ms: number): Promise<unknown> => setNodeTimeout(cluster, ms);
  await nodeTimeout(20_000);
  try {
    const frozenName = 'frozen-side';
    const frozenPort = await slotOwnerPort(redis, frozenName);
    let fairName = '';
    for (let i = 0; !fairName; i++) if ((await slotOwnerPort(redis, `healthy-side:${i}`)) !== frozenPort) fairName = `healthy-side:${i}`;
    await client.getLock(frozenName).lock(); // kept by the watchdog, on the master about to freeze
    const fair = other.getFairLock(fairName);
    await fair.lock();
    const waiter = client.getFairLock(fairName);
    const granted = waiter.lock();
    await until('the waiter is queued', async () => (await fair.inspect()).queue?.length === 1);
    const frozen = cluster.servers.find((server) => server.port === frozenPort)!;
    frozen.pause();
    try {
      const renewal = (client as unknown as { renewal: { inFlight: Map<string, number> } }).renewal;
      await until("a tick's call to the frozen master is out", () => renewal.inFlight.size > 0, 5_000);
      await fair.unlock(); // the grant, with its short first lease
      await granted;
      await sleep(2_500); // past the grant's first lease, before the next tick
      expect(lost).toEqual([]);
      expect(await redis.pttl(fairName)).toBeGreaterThan(0);
    } finally {
      frozen.resume();
    }
    await waiter.unlock();
  } finally {
    await client.close();
    await other.close();
    redis.disconnect();
    await nodeTimeout(1_000);
  }
}, 40_000);

test("a client whose first COMMAND INFO a frozen master left unanswered asks again: its waiters subscribe the way its releases publish, and a latch's awaiter is woken", async () => {
  const cluster = clusterOf();
  const admin = cluster.connect();
  const name = 'publish-mode-on-a-hiccup';
  const clients: LockClient[] = [];
  const connections: Cluster[] = [];
  await setNodeTimeout(cluster, 20_000); // the other masters frozen for a while are not a failure yet
  try {
    const keyOf = new LockClient({ redis: admin });
    clients.push(keyOf);
    const latchKey = keyOf.getCountDownLatch(name).key;
    const latchPort = (await slotOwnerPort(admin, latchKey))!;
    const latchNode = new Redis(latchPort, '127.0.0.1', { disconnectTimeout: 0 });
    const infoAnswered = async (): Promise<number> => Number(/^cmdstat_command\|info:calls=(\d+)/m.exec(await latchNode.info('commandstats'))?.[1] ?? 0);
    const others = cluster.servers.filter((server) => server.port !== latchPort);
    try {
      // The client's first COMMAND INFO (sent when its first waiter subscribes) goes to a master
      // ioredis picks at random: tried until it went to a frozen one and timed out.
      let awaiting: Promise<boolean> | undefined;
      let client: LockClient | undefined;
      for (let attempt = 0; attempt < 10 && !awaiting; attempt++) {
        const redis = cluster.connect({ redisOptions: { commandTimeout: 400 } });
        connections.push(redis);
        const candidate = new LockClient({ redis });
        clients.push(candidate);
        const latch = candidate.getCountDownLatch(name);
        await latch.trySetCount(1);
        const answeredBefore = await infoAnswered();
        for (const server of others) server.pause();
        let waiting: Promise<boolean | unknown> | undefined;
        try {
          waiting = latch.await({ waitTime: 30_000 }).catch((error: unknown) => error);
          let wentToLatchMaster = false;
          const sentBy = performance.now() + 300;
          while (!wentToLatchMaster && performance.now() < sentBy) wentToLatchMaster = (await infoAnswered()) > answeredBefore;
          if (!wentToLatchMaster) {
            await sleep(700); // past the call's commandTimeout: it failed
            awaiting = waiting as Promise<boolean>;
            client = candidate;
          }
        } finally {
          for (const server of others) server.resume();
        }
        if (!awaiting) {
          await candidate.close();
          await waiting;
        }
      }
      expect(client).toBeDefined();
      const latch = client!.getCountDownLatch(name);
      await until('the awaiter is subscribed', async () => (await latch.inspect()).waitingClients === 1, 10_000);
      await latch.countDown(); // published sharded: the client knows now that the servers can
      expect(await orAfter(awaiting!, 5_000, 'not woken')).toBe(true);
    } finally {
      latchNode.disconnect();
    }
  } finally {
    for (const client of clients) await client.close();
    for (const connection of connections) connection.disconnect();
    admin.disconnect();
    await setNodeTimeout(cluster, 1_000);
  }
}, 90_000);

test('a sharded subscriber connection dropped (CLIENT KILL TYPE pubsub): a latch opened before ioredis subscribed again still wakes its awaiter', async () => {
  // Before (a helper audit): ioredis subscribed the channel again by itself, and emitted
  // subscribersReady, but not the ready or slot change the client listened to: the countDown
  // published in the gap was lost, and an await() without waitTime never returned.
  const cluster = clusterOf();
  const waiterClient = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  const opener = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  const admins = cluster.servers.map((server) => server.connect());
  try {
    const name = 'sharded-subscriber-killed';
    await opener.getCountDownLatch(name).trySetCount(1);
    const waiting = waiterClient
      .getCountDownLatch(name)
      .await()
      .then(() => 'woken');
    await until('the awaiter is subscribed', async () => (await opener.getCountDownLatch(name).inspect()).waitingClients === 1, 10_000);
    await Promise.all(admins.map((admin) => admin.client('KILL', 'TYPE', 'pubsub')));
    await opener.getCountDownLatch(name).countDown(); // published while nobody listens
    expect(await orAfter(waiting, 10_000, 'still waiting')).toBe('woken');
  } finally {
    await waiterClient.close();
    await opener.close();
    for (const admin of admins) admin.disconnect();
  }
}, 60_000);

test("a frozen master does not slow the queue heartbeat on the others: a fair-lock waiter there keeps its entry refreshed every third of the queue timeout", async () => {
  // Before (a helper audit): one beat waited for every slot's call, and a beat still out held back
  // the next ones for a whole queue timeout, the entries' lifetime: the healthy master's entries
  // were refreshed at their deadline at best, and a release then passed the live waiter over.
  const cluster = clusterOf();
  const redis = cluster.connect();
  const queueTimeout = 1_500;
  const client = new LockClient({ redis: { clusterNodes: cluster.startupNodes }, queueTimeout });
  const other = new LockClient({ redis: { clusterNodes: cluster.startupNodes } });
  await setNodeTimeout(cluster, 20_000);
  try {
    const frozenName = 'frozen-queue';
    const frozenPort = await slotOwnerPort(redis, frozenName);
    let healthyName = '';
    for (let i = 0; !healthyName; i++) if ((await slotOwnerPort(redis, `healthy-queue:${i}`)) !== frozenPort) healthyName = `healthy-queue:${i}`;
    const waits: Promise<unknown>[] = [];
    const holders = [frozenName, healthyName].map((name) => other.getFairLock(name));
    for (const [i, name] of [frozenName, healthyName].entries()) {
      await holders[i]!.lock();
      waits.push(client.getFairLock(name).lock().catch((error: unknown) => error));
      await until(`a waiter of ${name} is queued`, async () => (await other.getFairLock(name).inspect()).queue?.length === 1);
    }
    const expiryKey = `rlock__queue_expiry:{${healthyName}}`;
    const deadline = async (): Promise<number> => Number((await redis.zrange(expiryKey, 0, 0, 'WITHSCORES'))[1]);
    const frozen = cluster.servers.find((server) => server.port === frozenPort)!;
    frozen.pause();
    let longestGap = 0;
    try {
      let last = await deadline();
      let lastAt = performance.now();
      const until3 = performance.now() + 3 * queueTimeout;
      while (performance.now() < until3) {
        await sleep(20);
        const now = await deadline();
        if (now !== last) {
          longestGap = Math.max(longestGap, performance.now() - lastAt);
          [last, lastAt] = [now, performance.now()];
        }
      }
      longestGap = Math.max(longestGap, performance.now() - lastAt);
    } finally {
      frozen.resume();
    }
    // Every queueTimeout / 3 (500 ms), give or take the timer; a whole queue timeout before.
    expect(longestGap).toBeLessThan(queueTimeout * 0.7);
    for (const holder of holders) await holder.unlock();
    await Promise.all(waits);
    for (const name of [frozenName, healthyName]) await client.getFairLock(name).forceUnlock();
  } finally {
    await client.close();
    await other.close();
    redis.disconnect();
    await setNodeTimeout(cluster, 1_000);
  }
}, 60_000);

test('close() while the subscriber’s slot refresh is under way (every master frozen) leaves no refresh behind: nothing keeps the process up (ioredis’s slotsRefreshInterval re-armed itself for good)', async () => {
  const cluster = clusterOf();
  const redis = cluster.connect();
  const client = new LockClient({ redis });
  const opener = new LockClient({ redis });
  const name = 'refresh-at-close';
  try {
    await opener.getCountDownLatch(name).trySetCount(1);
    const waiting = client.getCountDownLatch(name).await().catch(() => undefined); // the subscriber is made
    await until('subscribed', async () => (await opener.getCountDownLatch(name).inspect()).waitingClients === 1);
    /** The subscriber connection's slot refresh (ioredis internals). */
    type Refreshing = { isRefreshing: boolean; refreshSlotsCache(callback?: (error?: Error | null) => void): void };
    const subscriber = (client as unknown as { pubsub: { subscriber: Refreshing } }).pubsub.subscriber;
    for (const server of cluster.servers) server.pause(); // the next refresh stays under way
    try {
      await until('a slot refresh is under way', () => subscriber.isRefreshing, 5000);
      await client.close();
    } finally {
      for (const server of cluster.servers) server.resume();
    }
    let refreshes = 0;
    const refresh = subscriber.refreshSlotsCache.bind(subscriber);
    subscriber.refreshSlotsCache = (callback?: (error?: Error | null) => void) => {
      refreshes++;
      refresh(callback);
    };
    await waiting;
    // Two refresh periods (2 s) and the refresh cut short by close() answering: a negative, no event marks it.
    await sleep(4_500);
    expect(refreshes).toBe(0);
  } finally {
    await client.close();
    await opener.close();
    redis.disconnect();
  }
}, 60_000);
