// One OS process of the soak (see harness.ts): `tasks` concurrent tasks run rounds of the
// primitive's adapter until the deadline and print what they did as JSON lines; the checker,
// not this file, decides whether the primitive kept its promise.
import { setMaxListeners } from 'node:events';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { LockClient } from '../../src';
import { now } from './clock';
import { PRIMITIVES } from './primitives';
import { startPubSubProbe } from './pubsubProbe';
import { Recorder } from './recorder';
import type { RunClock, WorkerArgs, WorkerConfig } from './records';

const args = JSON.parse(process.argv[2]!) as WorkerArgs;
const primitive = PRIMITIVES[args.primitive];
if (!primitive) throw new Error(`unknown primitive ${args.primitive}`);

// The command connection is ours (passed in), so that the recorder can see each attempt sent.
const commands = new Redis(args.url, { disconnectTimeout: 0 });
const data = new Redis(args.dataUrl, { disconnectTimeout: 0 });
// Faults restart Redis under them; ioredis reconnects, and the calls tell their own story.
commands.on('error', () => undefined);
data.on('error', () => undefined);
const recorder = new Recorder(args.worker, args.keyPrefix, data, primitive.adapter.errors, args.longHoldEveryMs);
recorder.hookCommands(commands);
const finishDeafness = recorder.hookSubscriber(commands);
const client = new LockClient({ redis: commands, keyPrefix: args.keyPrefix, watchdogTimeout: args.watchdogTimeout, name: `soak-${args.worker}` });
const undo = primitive.adapter.setup(client, recorder);

// Waits without a bound give up once the run is over; read as an aborted wait.
const over = new AbortController();
setMaxListeners(0, over.signal);

/**
 * The run's clock. A worker spawned in place of a killed one is told it up front; the first ones
 * are told once all of them are ready, so that a slow start (tsx compiling on a busy machine)
 * does not eat the run.
 */
async function runClock(): Promise<RunClock> {
  if (args.start !== undefined && args.deadline !== undefined && args.giveUpAt !== undefined) return args as RunClock;
  recorder.emit({ k: 'ready', w: args.worker });
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return JSON.parse(line) as RunClock;
  }
  throw new Error('stdin closed before the run clock came');
}

async function task(config: WorkerConfig): Promise<void> {
  while (now() < config.deadline) {
    try {
      await primitive!.adapter.round(client, recorder, config, over.signal);
    } catch (error) {
      recorder.emit({ k: 'err', w: config.worker, lock: '-', at: now(), message: `round failed: ${(error as Error).stack}` });
    }
  }
}

async function main(): Promise<void> {
  await primitive!.adapter.prepare?.(client, args);
  const config: WorkerConfig = { ...args, ...(await runClock()) };
  const overTimer = setTimeout(() => over.abort(new DOMException('the soak is over', 'TimeoutError')), Math.max(0, config.giveUpAt - now()));
  const stopProbe = process.env.SOAK_DEBUG ? startPubSubProbe(client, config) : () => undefined;
  await Promise.all(Array.from({ length: config.tasks }, () => task(config)));
  // A fair lock's grant channel stays subscribed until the event loop's next turn after its last
  // waiter left (FairLock's LINGER_ONE_TURN): a task whose last wait the run's end aborted left
  // it in the same turn as this line, and the stats below counted it as left behind (a CI run's
  // "waitingChannels: 1"). A channel really left behind is still there a turn later.
  await new Promise((resolve) => setImmediate(resolve));
  finishDeafness();
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
