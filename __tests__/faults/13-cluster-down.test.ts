// Fault 13: the lock's slot is not served for a while (CLUSTERDOWN), longer than ioredis's own
// retries. A waiter keeps trying within its waitTime instead of failing; a single attempt fails
// with a typed error that says the failure is transient.
import { Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { LockClient, RedisCommandError } from '../../src';
import { slotOwnerPort, useCluster } from '../helpers/handoff';
import { heldKindNames, heldKinds } from '../helpers/heldKinds';
import { sleep, until } from '../helpers/time';

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
