import type { Redis, Cluster } from 'ioredis';
import { clientNames, type LockHolder, type LockInfo } from '../../introspection';
import { rwLeasesKeyOf, rwReadChannelOf, rwWriteChannelOf, rwWritersKeyOf } from '../../names';
import { readValues } from '../../services/database';

const HOLDER_FIELD = /^([\w-]{21}):([\w-]{21})(:write)?$/;

/**
 * One round trip (HGETALL, PTTL, both zsets, TIME, NUMSUB of both channels), then CLIENT LIST for
 * names if anyone holds it. Holders whose lease ended are left out, as every script drops them.
 * `waitingClients` counts subscriptions: a client with readers and writers waiting counts twice.
 */
export async function inspectReadWriteLock(redis: Redis | Cluster, name: string, keyPrefix: string, key: string, sharded: boolean): Promise<LockInfo> {
  const [hash, ttl, leases, writers, time, readSubs, writeSubs] = (await readValues(redis, (reads) => {
    reads.hgetall(key).pttl(key).zrange(rwLeasesKeyOf(keyPrefix, key), 0, -1, 'WITHSCORES').zrange(rwWritersKeyOf(keyPrefix, key), 0, -1, 'WITHSCORES').time();
    for (const channel of [rwReadChannelOf(keyPrefix, key), rwWriteChannelOf(keyPrefix, key)]) {
      if (sharded) reads.pubsub('SHARDNUMSUB', channel);
      else reads.pubsub('NUMSUB', channel);
    }
  })) as [
    Record<string, string>,
    number,
    string[],
    string[],
    [string, string],
    [string, number | string],
    [string, number | string],
  ];
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const holders: LockHolder[] = [];
  for (let i = 0; i < leases.length; i += 2) {
    const match = HOLDER_FIELD.exec(leases[i]!);
    const expiresInMs = Number(leases[i + 1]) - now;
    if (!match || expiresInMs <= 0) continue;
    const mode = match[3] ? 'write' : 'read';
    holders.push({ clientId: match[1]!, ownerId: match[2]!, holdCount: Number(hash[leases[i]!] ?? 0), clientName: undefined, mode, expiresInMs });
  }
  if (holders.length > 0) {
    const names = await clientNames(redis);
    for (const holder of holders) holder.clientName = names.get(holder.clientId);
  }
  let waitingWriters = 0;
  for (let i = 1; i < writers.length; i += 2) if (Number(writers[i]) > now) waitingWriters++;
  const mode = holders.length === 0 ? undefined : holders.some((holder) => holder.mode === 'write') ? 'write' : 'read';
  return {
    name,
    key,
    locked: holders.length > 0,
    holders,
    ttl,
    waitingClients: Number(readSubs[1] ?? 0) + Number(writeSubs[1] ?? 0),
    mode,
    waitingWriters,
  };
}
