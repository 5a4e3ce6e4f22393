// The faults the harness injects into a run, against the private redis-server it started: a
// force-unlocking "operator" on the chaos lock, and in turn, one every `everyMs`: command
// connections killed, the subscribers killed, Redis killed -9 and restarted empty, Redis shut
// down saving and restarted with its data, Redis frozen past the lease, a worker killed -9.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { LockClient } from '../../src';
import type { RedisServer } from '../redisServer';
import { now } from './clock';
import type { Primitive } from './primitives';
import type { Fault, FaultKind, Force } from './records';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const randomInt = (min: number, max: number): number => min + Math.floor(Math.random() * (max - min + 1));

/** The connection name of the force-unlocking operator: spared by conn-kill (see below). */
const FORCER_NAME = 'soak-forcer';

export interface FaultPlan {
  kinds: FaultKind[];
  /** Monotonic ms: no fault starts before `from` or after `until`. */
  from: number;
  until: number;
  /** Pause between two faults other than force-unlocks. */
  everyMs: number;
  /** How long Redis stays frozen: past the watchdog lease. */
  pauseMs: number;
  /** How long Redis stays down in a restart. */
  downMs: number;
  chaosLock: string;
  keyPrefix: string;
  /** The primitive's handle for the force-unlocking operator (when `kinds` has `force`). */
  getLock?: Primitive['getLock'];
  /** Kills a worker -9 (and starts a replacement); resolves with its number once it is replaced. */
  killWorker: () => Promise<number | undefined>;
}

export interface FaultRecords {
  forces: Force[];
  faults: Fault[];
  /** Injections that failed (a fault that could not be made is reported, not hidden). */
  failures: string[];
}

/** Runs the plan until `until`; resolves with what was injected and when. */
export async function injectFaults(server: RedisServer, plan: FaultPlan): Promise<FaultRecords> {
  const records: FaultRecords = { forces: [], faults: [], failures: [] };
  const admin = new Redis(server.url, { disconnectTimeout: 0, connectionName: 'soak-admin' });
  admin.on('error', () => undefined);
  try {
    const others = plan.kinds.filter((kind): kind is Exclude<FaultKind, 'force'> => kind !== 'force');
    await Promise.all([
      plan.kinds.includes('force') ? forceLoop(server, plan, records) : undefined,
      others.length ? rotate(server, admin, plan, others, records) : undefined,
    ]);
  } finally {
    admin.disconnect();
  }
  return records;
}

/** An operator gone wild: force-unlocks the chaos lock every 20–80 ms. */
async function forceLoop(server: RedisServer, plan: FaultPlan, records: FaultRecords): Promise<void> {
  // A force whose reply is lost to a killed connection would be resent by ioredis and could
  // remove (and name) a later holder instead: conn-kill spares this connection.
  const connection = new Redis(server.url, { disconnectTimeout: 0, connectionName: FORCER_NAME });
  connection.on('error', () => undefined);
  const client = new LockClient({ redis: connection, keyPrefix: plan.keyPrefix, name: FORCER_NAME });
  const lock = plan.getLock!(client, plan.chaosLock);
  let holders: string[] = [];
  const onForce = (message: unknown): void => {
    holders = (message as { holders: string[] }).holders;
  };
  subscribe('rlock:force-unlocked', onForce);
  try {
    while (now() < plan.until) {
      await sleep(randomInt(20, 80));
      if (now() < plan.from) continue;
      holders = [];
      const sent = now();
      try {
        await lock.forceUnlock();
        records.forces.push({ lock: plan.chaosLock, sent, done: now(), holders });
      } catch (error) {
        // Redis down (restart): the force may or may not have run; a restart removes everything anyway.
        records.failures.push(`force at ${sent.toFixed(3)}: ${(error as Error).message}`);
      }
    }
  } finally {
    unsubscribe('rlock:force-unlocked', onForce);
    await client.close();
    connection.disconnect();
  }
}

async function rotate(server: RedisServer, admin: Redis, plan: FaultPlan, kinds: Exclude<FaultKind, 'force'>[], records: FaultRecords): Promise<void> {
  await sleep(Math.max(0, plan.from - now()));
  for (let i = 0; now() < plan.until; i++) {
    const kind = kinds[i % kinds.length]!;
    const at = now();
    try {
      const fault = await inject(kind, server, admin, plan);
      records.faults.push({ kind, at, end: now(), ...fault });
    } catch (error) {
      records.failures.push(`${kind} at ${at.toFixed(3)}: ${(error as Error).message}`);
    }
    await sleep(Math.min(plan.everyMs, Math.max(0, plan.until - now())));
  }
}

async function inject(kind: Exclude<FaultKind, 'force'>, server: RedisServer, admin: Redis, plan: FaultPlan): Promise<Partial<Fault>> {
  switch (kind) {
    case 'conn-kill': {
      // CLIENT KILL TYPE normal, but by id, sparing the operator and this admin connection.
      const list = (await admin.call('CLIENT', 'LIST', 'TYPE', 'normal')) as string;
      const ids = list
        .split('\n')
        .filter((line) => line && !line.includes(`name=${FORCER_NAME} `) && !line.includes('name=soak-admin '))
        .map((line) => /(?:^| )id=(\d+)/.exec(line)?.[1])
        .filter((id): id is string => id !== undefined);
      await Promise.all(ids.map((id) => admin.client('KILL', 'ID', id).catch(() => undefined)));
      return {};
    }
    case 'sub-kill':
      await admin.client('KILL', 'TYPE', 'pubsub');
      return {};
    case 'restart': {
      await server.kill();
      const killed = now();
      await sleep(plan.downMs);
      await server.restart();
      return { lostData: true, killed };
    }
    case 'restart-persist':
      await server.shutdownSaving();
      await sleep(plan.downMs);
      await server.restart();
      server.forgetSavedData(); // loaded; a later kill -9 restart must come back empty
      return { lostData: false };
    case 'pause':
      server.pause();
      await sleep(plan.pauseMs);
      server.resume();
      return {};
    case 'worker-kill':
      return { worker: await plan.killWorker() };
  }
}
