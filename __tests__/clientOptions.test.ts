// README's client options that no other test exercised: plain ioredis options for `redis`, and
// the default client name `<hostname>:<pid>` that inspect() shows beside a holder.
import { hostname } from 'node:os';
import { LockClient } from '../src';
import { usePrivateRedis } from './helpers/privateRedis';

const redis = usePrivateRedis();

test('redis given as plain ioredis options: the client connects, locks and unlocks', async () => {
  const client = new LockClient({ redis: { host: '127.0.0.1', port: redis.server.port } });
  try {
    const lock = client.getLock('options:plain');
    await lock.lock();
    expect(await redis.admin.hlen('options:plain')).toBe(1);
    await lock.unlock();
    expect(await redis.admin.exists('options:plain')).toBe(0);
  } finally {
    await client.close();
  }
});

test('a client without a name is shown as <hostname>:<pid>', async () => {
  const holder = redis.client();
  const expected = `${hostname()}:${process.pid}`.replace(/\s/g, '_');
  expect(holder.name).toBe(expected);
  const lock = holder.getLock('options:default-name');
  await lock.lock();
  const info = await redis.client().getLock('options:default-name').inspect();
  expect(info.holders).toEqual([expect.objectContaining({ clientId: holder.id, clientName: expected })]);
  await lock.unlock();
});
