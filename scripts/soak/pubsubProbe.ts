// SOAK_DEBUG=1: every 100 ms, each worker compares the channels its client believes it is
// subscribed to (LockPubSub entries marked confirmed) with what ioredis tracks and what Redis
// has, and prints on stderr (the harness forwards it) when a confirmed channel is missing.
// It reads the client's private state, so it is a debugging aid only, not part of the checks.
import { Redis } from 'ioredis';
import type { LockClient } from '../../src';
import { now } from './clock';
import type { WorkerConfig } from './records';

interface PubSubInternals {
  entries?: Map<string, { refCount: number; confirmed: boolean }>;
  subscriber?: { status: string; condition?: { subscriber?: false | { channels(kind: string): string[] } }; options: { connectionName?: string } };
}

export function startPubSubProbe(client: LockClient, config: WorkerConfig): () => void {
  const probe = new Redis(config.url, { disconnectTimeout: 0 });
  probe.on('error', () => undefined);
  const timer = setInterval(() => {
    const pubsub = (client as unknown as { pubsub?: PubSubInternals }).pubsub;
    const sub = pubsub?.subscriber;
    if (!pubsub?.entries || !sub) return;
    const tracked = sub.condition?.subscriber ? sub.condition.subscriber.channels('subscribe') : [];
    const confirmed = [...pubsub.entries].filter(([, e]) => e.confirmed);
    if (confirmed.every(([channel]) => tracked.includes(channel))) return;
    void (probe.call('CLIENT', 'LIST', 'TYPE', 'pubsub') as Promise<string>).then((list) => {
      const mine = list.split('\n').find((line) => sub.options.connectionName && line.includes(`name=${sub.options.connectionName} `));
      const entries = confirmed.map(([channel, e]) => `${channel} waiters=${e.refCount}`).join(', ');
      process.stderr.write(
        `pubsub w${config.worker} t=${now().toFixed(0)} status=${sub.status} ioredis=${JSON.stringify(tracked)} redis=${/sub=\d+/.exec(mine ?? '')?.[0] ?? 'sub=0'} confirmed=[${entries}]\n`,
      );
    }, () => undefined);
  }, 100);
  timer.unref();
  return () => {
    clearInterval(timer);
    probe.disconnect();
  };
}
