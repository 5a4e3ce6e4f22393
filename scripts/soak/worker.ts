// One OS process of the soak (see harness.ts): `tasks` concurrent tasks run rounds of the
// primitive's adapter until the deadline and print what they did as JSON lines; the checker,
// not this file, decides whether the primitive kept its promise.
import { setMaxListeners } from 'node:events';
import { Redis } from 'ioredis';
import { LockClient } from '../../src';
import { now } from './clock';
import { PRIMITIVES } from './primitives';
import { startPubSubProbe } from './pubsubProbe';
import { Recorder } from './recorder';
import type { WorkerConfig } from './records';

const config = JSON.parse(process.argv[2]!) as WorkerConfig;
const primitive = PRIMITIVES[config.primitive];
if (!primitive) throw new Error(`unknown primitive ${config.primitive}`);

// The command connection is ours (passed in), so that the recorder can see each attempt sent.
const commands = new Redis(config.url, { disconnectTimeout: 0 });
const data = new Redis(config.dataUrl, { disconnectTimeout: 0 });
// Faults restart Redis under them; ioredis reconnects, and the calls tell their own story.
commands.on('error', () => undefined);
data.on('error', () => undefined);
const recorder = new Recorder(config.worker, config.keyPrefix, data, primitive.adapter.errors);
recorder.hookCommands(commands);
const client = new LockClient({ redis: commands, keyPrefix: config.keyPrefix, watchdogTimeout: config.watchdogTimeout, name: `soak-${config.worker}` });
const undo = primitive.adapter.setup(client, recorder);

// Waits without a bound give up once the run is over; read as an aborted wait.
const over = new AbortController();
setMaxListeners(0, over.signal);
const overTimer = setTimeout(() => over.abort(new DOMException('the soak is over', 'TimeoutError')), Math.max(0, config.giveUpAt - now()));

async function task(): Promise<void> {
  while (now() < config.deadline) {
    try {
      await primitive!.adapter.round(client, recorder, config, over.signal);
    } catch (error) {
      recorder.emit({ k: 'err', w: config.worker, lock: '-', at: now(), message: `round failed: ${(error as Error).stack}` });
    }
  }
}

const stopProbe = process.env.SOAK_DEBUG ? startPubSubProbe(client, config) : () => undefined;

async function main(): Promise<void> {
  await primitive!.adapter.prepare?.(client, config);
  await Promise.all(Array.from({ length: config.tasks }, () => task()));
  recorder.emit({ k: 'done', w: config.worker, stats: client.stats });
  clearTimeout(overTimer);
  undo();
  stopProbe();
  await client.close();
  await Promise.all([commands.quit(), data.quit()]);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
