import { LockClient } from '../src';
import { Redis } from 'ioredis';
(async () => {
  const url = 'redis://127.0.0.1:7302';
  const commands = new Redis(url, { disconnectTimeout: 0 });
  const dup = commands.duplicate.bind(commands);
  const t0 = performance.now();
  commands.duplicate = ((...a: Parameters<Redis['duplicate']>) => { const s = dup(...a); for (const ev of ['connect','ready','close','end','reconnecting','error']) s.on(ev, (e?: unknown) => console.log((performance.now()-t0).toFixed(1), 'sub', ev, e instanceof Error ? e.message : '')); return s; }) as Redis['duplicate'];
  const client = new LockClient({ redis: commands, watchdogTimeout: 3000 });
  const locks = ['h0','h1','h2','h3'].map((n) => client.getFairLock(n));
  await Promise.all(Array.from({ length: 16 }, async (_, i) => { for (let k = 0; k < 20; k++) { const l = client.getFairLock(`h${(i + k) % 4}`); await l.withLock(async () => { await new Promise((r) => setTimeout(r, 1)); }); } }));
  void locks;
  await client.close(); commands.disconnect();
})();
