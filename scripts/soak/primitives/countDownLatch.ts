// The count-down latch in the soak. Time is cut into generations of GENERATION_MS, one latch
// name per hot name and generation (`<name>.<g>`): in its first SET_MS every task sets the
// count (trySetCount: one wins), then tasks count down or await it with a random waitTime. The
// invariant: an await opens only once COUNT countDowns may have run (invariants.ts, checkLatch).
import { latchChannelOf } from '../../../src/names';
import type { Invariant } from '../checker';
import { oneChannel } from './channels';
import { now } from '../clock';
import type { ErrorReading } from '../recorder';
import { lockErrors, pick, randomInt, type PrimitiveAdapter } from './rlock';

export const COUNT = 4;
const GENERATION_MS = 800;
const SET_MS = 150;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const errors: ErrorReading = { holdGone: () => undefined, miss: lockErrors.miss };

const adapter: PrimitiveAdapter = {
  errors,
  setup: () => () => undefined,
  async round(client, recorder, config) {
    const since = now() - config.start;
    const generation = Math.floor(since / GENERATION_MS);
    const inGeneration = since - generation * GENERATION_MS;
    const name = `${pick(config.locks)}.${generation}`;
    const latch = client.getCountDownLatch(name);
    if (inGeneration < SET_MS) {
      await recorder.op(name, 'set', () => latch.trySetCount(COUNT), (set) => set);
      await sleep(SET_MS - inGeneration);
    } else if (Math.random() < 0.1) {
      await recorder.op(name, 'countDown', () => latch.countDown());
      await sleep(randomInt(20, 80));
    } else {
      const waitTime = randomInt(0, 300);
      await recorder.track(name, 'await', waitTime, async (rec) => {
        if (!(await latch.await({ waitTime }))) return false;
        // An await has no owner and no acquired event: its "grant" is the instant it saw the latch open.
        recorder.granted(`${client.id}:await.${rec.id}`, name);
        rec.releasing();
        return true;
      });
    }
  },
};

export const countDownLatch = {
  adapter,
  invariant: { conflicts: () => false, fifo: false, latchCount: COUNT, counters: false } satisfies Invariant,
  faults: ['conn-kill', 'sub-kill', 'restart', 'restart-persist', 'pause', 'worker-kill'] as const,
  channels: oneChannel(latchChannelOf),
  // The last generations' latches may be left unopened.
  keysGone: false,
};
