import { LockClient } from './src';
import { RedisSentinelGroup } from './scripts/redisTopologies';
const LIST = '+evalsha +eval +exists +hexists +hget +hgetall +hkeys +hincrby +pexpire +pttl +del +get +set +publish +subscribe +unsubscribe +pubsub|numsub +scan +client|setname';
(async () => {
  const group = await RedisSentinelGroup.start();
  const extra = process.argv[2] ?? '';
  for (const s of [group.master, group.replica]) {
    const a = s.connect();
    await a.call('ACL', 'SETUSER', 'app', 'on', '>pw', 'resetkeys', 'resetchannels', '~app:*', '&app:*', '-@all', ...LIST.split(' '), ...extra.split(' ').filter(Boolean));
    await a.call('ACL', 'LOG', 'RESET');
    a.disconnect();
  }
  const warns: unknown[] = [];
  const orig = console.warn; console.warn = (...a: unknown[]) => { warns.push(a); };
  try {
    const c = new LockClient({ redis: { sentinels: group.sentinels, name: group.masterName, username: 'app', password: 'pw' }, keyPrefix: 'app:' });
    const l = c.getLock('x');
    await l.lock(); 
    const w = c.getLock('x'); const p = w.tryLock({ waitTime: 5000, leaseTime: 1000 });
    await new Promise((r) => setTimeout(r, 200));
    console.log('inspect', JSON.stringify(await c.inspect('x')));
    await l.unlock(); console.log('waiter', await p); await w.unlock();
    await c.close();
  } catch (e) { console.log('ERR', e); }
  console.warn = orig;
  console.log('warnings', JSON.stringify(warns).slice(0, 300));
  for (const s of [group.master, group.replica]) {
    const a = s.connect();
    const log = (await a.call('ACL', 'LOG')) as unknown[][];
    console.log(s.port, log.map((e) => `${e[e.indexOf('reason') + 1]}:${e[e.indexOf('object') + 1]}`));
    a.disconnect();
  }
  await group.stop();
})();
