// The CLI's force-unlock of each kind of lock, run in process (helpers/cliInProcess) so that a
// test can stand in for the operator at the confirmation prompt.
import { runCli } from './helpers/cliInProcess';
import { usePrivateRedis } from './helpers/privateRedis';
import { until } from './helpers/time';

const answers: (() => Promise<string>)[] = [];
jest.mock('node:readline/promises', () => ({
  // The operator at a terminal: each question is answered by the next function a test queued.
  createInterface: () => ({ question: () => answers.shift()!(), close: () => undefined }),
}));

const redis = usePrivateRedis();

/** Runs with stdin taken for a terminal, so that force-unlock asks. */
async function atTerminal<T>(run: () => Promise<T>): Promise<T> {
  const had = Object.getOwnPropertyDescriptor(process.stdin, 'isTTY');
  Object.defineProperty(process.stdin, 'isTTY', { value: true, configurable: true });
  try {
    return await run();
  } finally {
    if (had) Object.defineProperty(process.stdin, 'isTTY', had);
    else delete (process.stdin as { isTTY?: boolean }).isTTY;
  }
}

test('an interactive force-unlock removes only the holder it showed: one that took the lock while the operator answered keeps it', async () => {
  const stuck = redis.client({ name: 'stuck' });
  const healthy = redis.client({ name: 'healthy' });
  const url = ['--url', redis.server.url];
  const first = stuck.getLock('swap');
  await first.lock();
  const second = healthy.getLock('swap');
  answers.push(async () => {
    // While the prompt is open, the stuck holder lets go and another takes the lock.
    await first.unlock();
    await second.lock();
    return 'y';
  });
  const result = await atTerminal(() => runCli([...url, 'force-unlock', 'swap']));
  expect(result).toMatchObject({ code: 1, stdout: '' });
  expect(result.stderr).toMatch(new RegExp(`^rlock: swap changed hands meanwhile \\(now held by ${healthy.id}:\\S+\\): nothing removed\\n$`));
  expect(await second.isHeldByCurrentOwner()).toBe(true);

  answers.push(async () => 'y');
  const removed = await atTerminal(() => runCli([...url, 'force-unlock', 'swap']));
  expect(removed.code).toBe(0);
  expect(removed.stdout).toMatch(new RegExp(`^removed swap \\(key swap\\): locked.*\\n {2}held by ${healthy.id}:\\S+ × 1, client "healthy"\\n$`));
  expect(await redis.admin.exists('swap')).toBe(0);
  answers.push(async () => 'n');
  const third = healthy.getLock('swap');
  await third.lock();
  expect(await atTerminal(() => runCli([...url, 'force-unlock', 'swap']))).toMatchObject({ code: 1, stderr: 'rlock: not confirmed: nothing removed\n' });
  expect(await third.isHeldByCurrentOwner()).toBe(true);
});

test('a fair lock with waiters: inspect shows its queue in order; force-unlock hands it to the head at once, --if-holder too', async () => {
  const url = ['--url', redis.server.url];
  // Long queue entries: without the grant, the waiter would learn of the free lock only at its
  // heartbeat, every queueTimeout / 3 = 10 s.
  const holder = redis.client({ name: 'holder', queueTimeout: 30_000 });
  const first = redis.client({ name: 'first', queueTimeout: 30_000 });
  const second = redis.client({ name: 'second', queueTimeout: 30_000 });
  const held = holder.getFairLock('fq');
  await held.lock();
  const firstWaits = first.getFairLock('fq').tryLock({ waitTime: 25_000 });
  await until('the first is queued', async () => (await redis.admin.zcard('rlock__queue:{fq}')) === 1);
  const secondLock = second.getFairLock('fq');
  const secondWaits = secondLock.tryLock({ waitTime: 25_000 });
  await until('the second is queued', async () => (await redis.admin.zcard('rlock__queue:{fq}')) === 2);

  const shown = await runCli([...url, 'inspect', 'fq']);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toMatch(
    new RegExp(`^fq \\(key fq\\): locked, ttl \\d+\\.\\d s, 2 client\\(s\\) waiting\\n {2}held by ${holder.id}:\\S+ × 1, client "holder"\\n {2}1\\. ${first.id}:\\S+ waits \\(lease 30000 ms, entry ttl \\d+\\.\\d s\\), client "first"\\n {2}2\\. ${second.id}:\\S+ waits .*client "second"\\n$`),
  );
  expect(JSON.parse((await runCli([...url, '--json', 'inspect', 'fq'])).stdout)).toMatchObject({ queue: [{ clientId: first.id }, { clientId: second.id }] });

  expect(await runCli([...url, 'force-unlock', 'fq', '--yes', '--if-holder', second.id])).toMatchObject({ code: 1, stdout: '' });
  let forcedAt = Date.now();
  expect(await runCli([...url, 'force-unlock', 'fq', '--yes'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^removed fq \(key fq\): locked/) });
  await expect(firstWaits).resolves.toBe(true); // granted by the force
  expect(Date.now() - forcedAt).toBeLessThan(3_000);

  forcedAt = Date.now();
  expect(await runCli([...url, 'force-unlock', 'fq', '--yes', '--if-holder', first.id])).toMatchObject({ code: 0 });
  await expect(secondWaits).resolves.toBe(true);
  expect(Date.now() - forcedAt).toBeLessThan(3_000);
  await secondLock.unlock();
  expect(await redis.admin.exists('fq', 'rlock__queue:{fq}')).toBe(0);
});

test('Ctrl-C or Ctrl-D at the prompt: not confirmed (exit 1), nothing removed; it read as Redis unreachable (exit 3)', async () => {
  const holder = redis.client().getLock('interrupted');
  await holder.lock();
  answers.push(async () => {
    throw Object.assign(new Error('Aborted with Ctrl+C'), { name: 'AbortError', code: 'ABORT_ERR' });
  });
  expect(await atTerminal(() => runCli(['--url', redis.server.url, 'force-unlock', 'interrupted']))).toMatchObject({ code: 1, stderr: 'rlock: not confirmed: nothing removed\n' });
  expect(await holder.isHeldByCurrentOwner()).toBe(true);
});

test('an interactive force-unlock of a read-write lock whose holders changed while the operator answered removes nothing', async () => {
  const reader = redis.client({ name: 'reader' }).getReadWriteLock('rwswap').readLock();
  const writer = redis.client({ name: 'writer' }).getReadWriteLock('rwswap').writeLock();
  await reader.lock();
  answers.push(async () => {
    // While the prompt is open, the reader lets go and a writer takes the lock.
    await reader.unlock();
    await writer.lock();
    return 'y';
  });
  const result = await atTerminal(() => runCli(['--url', redis.server.url, 'force-unlock', 'rwswap']));
  expect(result).toMatchObject({ code: 1, stdout: '' });
  expect(result.stderr).toMatch(/^rlock: rwswap changed hands meanwhile \(now held by \S+\): nothing removed\n$/);
  expect(await writer.isHeldByCurrentOwner()).toBe(true);
});
