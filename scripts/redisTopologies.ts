// Private Redis Cluster and Sentinel groups on loopback ports, for tests (and anyone who wants to
// try rlock on them): built from the same private `redis-server` processes as RedisServer.
import { execFile, type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { freePort, RedisServer } from './redisServer';

const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

async function ask<T>(port: number, call: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, disconnectTimeout: 0 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await call(redis);
  } finally {
    redis.disconnect();
  }
}

/** A Redis Cluster of `masters` masters (and `replicas` replicas each), joined by `redis-cli --cluster create`. */
export class RedisCluster {
  private constructor(readonly servers: RedisServer[]) {}

  /** `serverArgs`: more redis-server arguments for every node. */
  static async start({ masters = 3, replicas = 0, serverArgs = [] as string[] } = {}): Promise<RedisCluster> {
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000', ...serverArgs];
    const servers = await Promise.all(Array.from({ length: masters * (1 + replicas) }, () => RedisServer.start(args)));
    const cluster = new RedisCluster(servers);
    try {
      await run('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', String(replicas), '--cluster-yes']);
      await waitFor('the cluster is ok on every node', async () => {
        const states = await Promise.all(servers.map((s) => ask(s.port, (r) => r.cluster('INFO'))));
        return states.every((info) => /cluster_state:ok/.test(String(info)) && /cluster_slots_ok:16384/.test(String(info)));
      });
      if (replicas > 0) {
        await waitFor('every slot range has its replicas', async () => {
          const ranges = (await ask(servers[0]!.port, (r) => r.cluster('SLOTS'))) as unknown[][];
          return ranges.length > 0 && ranges.every((range) => range.length >= 3 + replicas);
        });
      }
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.servers.map((s) => ({ host: '127.0.0.1', port: s.port }));
  }

  /** An ioredis Cluster on it (disconnectTimeout 0 on its node connections: see RedisServer.connect). */
  connect(options: ConstructorParameters<typeof Cluster>[1] = {}): Cluster {
    return new Cluster(this.startupNodes, { ...options, redisOptions: { disconnectTimeout: 0, ...options.redisOptions } });
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}

/** A master, a replica and one Sentinel (quorum 1) watching them as `mymaster`. */
export class RedisSentinelGroup {
  readonly masterName = 'mymaster';
  private sentinel: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'rlock-sentinel-'));

  private constructor(
    readonly master: RedisServer,
    readonly replica: RedisServer,
    readonly sentinelPort: number,
  ) {}

  static async start(): Promise<RedisSentinelGroup> {
    const master = await RedisServer.start();
    const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(master.port)]);
    const group = new RedisSentinelGroup(master, replica, await freePort());
    try {
      await waitFor('the replica is in sync', async () => /master_link_status:up/.test(await ask(replica.port, (r) => r.info('replication'))));
      const config = join(group.dir, 'sentinel.conf');
      writeFileSync(
        config,
        [
          `port ${group.sentinelPort}`,
          'bind 127.0.0.1',
          `dir ${group.dir}`,
          `sentinel monitor ${group.masterName} 127.0.0.1 ${master.port} 1`,
          `sentinel down-after-milliseconds ${group.masterName} 1000`,
          `sentinel failover-timeout ${group.masterName} 5000`,
          '',
        ].join('\n'),
      );
      group.sentinel = spawn('redis-sentinel', [config], { stdio: 'ignore' });
      group.sentinel.unref();
      // Known is not enough: SENTINEL FAILOVER answers NOGOODSLAVE until the Sentinel has a
      // live link to the replica and has read from it that its replication link is up.
      await waitFor('the sentinel could promote the replica', async () => {
        const replicas = (await ask(group.sentinelPort, (r) => r.call('SENTINEL', 'REPLICAS', group.masterName))) as string[][];
        return replicas.some((fields) => {
          const info = new Map(fields.flatMap((value, i) => (i % 2 === 0 ? [[value, fields[i + 1]] as const] : [])));
          return info.get('flags') === 'slave' && info.get('master-link-status') === 'ok';
        });
      });
    } catch (error) {
      await group.stop();
      throw error;
    }
    return group;
  }

  get sentinels(): { host: string; port: number }[] {
    return [{ host: '127.0.0.1', port: this.sentinelPort }];
  }

  /** The port of the server the Sentinel currently names as master. */
  async masterPort(): Promise<number> {
    const [, port] = (await ask(this.sentinelPort, (r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName))) as [string, string];
    return Number(port);
  }

  /** The server listening on `port`: master and replica swap roles with each failover. */
  serverOn(port: number): RedisServer {
    const server = [this.master, this.replica].find((candidate) => candidate.port === port);
    if (!server) throw new Error(`no server of the group on port ${port}`);
    return server;
  }

  /** `SENTINEL FAILOVER`: the replica is promoted and the old master, alive, made its replica. */
  async failover(): Promise<void> {
    await ask(this.sentinelPort, (r) => r.call('SENTINEL', 'FAILOVER', this.masterName));
  }

  /** Waits until the Sentinel names a master other than `oldPort`. */
  async waitForNewMaster(oldPort: number, timeoutMs = 20_000): Promise<number> {
    await waitFor('the Sentinel promoted a new master', async () => (await this.masterPort()) !== oldPort, timeoutMs);
    return this.masterPort();
  }

  async stop(): Promise<void> {
    const sentinel = this.sentinel;
    if (sentinel && sentinel.exitCode === null) {
      const exited = new Promise((resolve) => sentinel.once('exit', resolve));
      sentinel.ref();
      sentinel.kill('SIGKILL');
      await exited;
    }
    await Promise.all([this.master.stop(), this.replica.stop()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
