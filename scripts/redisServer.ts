import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** A free loopback port, as the kernel hands one out. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A private `redis-server` on a free loopback port, no persistence. Tests may kill it, pause it
 * (SIGSTOP) and start it again on the same port, empty.
 *
 * Why ours and not redis-memory-server: the fault tests need the child process itself (kill -9
 * and wait for its exit, SIGSTOP/SIGCONT) and a restart on the same port after a crash, which
 * that package's start/stop API is not built around; it also downloads and compiles a Redis on
 * first use unless pointed at a system binary, which we need anyway. This file is that much.
 */
export class RedisServer {
  private process: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'rlock-redis-'));

  private constructor(
    readonly port: number,
    private readonly extraArgs: string[],
  ) {}

  static async start(extraArgs: string[] = []): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), extraArgs);
    await server.restart();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  /** Starts (again) on the same port and waits until it answers PING. */
  async restart(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.extraArgs];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    this.process = child;
    child.unref();
    const deadline = Date.now() + 10_000;
    for (;;) {
      const probe = new Redis(this.port, '127.0.0.1', {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        disconnectTimeout: 0, // else a refused probe leaves a 2 s timer behind
      });
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        await probe.ping();
        probe.disconnect();
        return;
      } catch {
        probe.disconnect();
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`redis-server on port ${this.port} did not start`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  /** kill -9: the data is gone, connections drop. */
  async kill(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.ref(); // an unref'ed child's exit would not keep us waiting for it
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * SHUTDOWN SAVE: Redis writes its data to dump.rdb and exits; the next restart() loads it
   * (keys whose TTL ran out meanwhile are dropped). forgetSavedData() deletes the file again.
   */
  async shutdownSaving(): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.ref();
    const connection = new Redis(this.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null, disconnectTimeout: 0 });
    connection.on('error', () => undefined);
    await connection.call('SHUTDOWN', 'SAVE').catch(() => undefined); // the connection closes instead of a reply
    connection.disconnect();
    await exited;
    this.process = undefined;
  }

  forgetSavedData(): void {
    rmSync(join(this.dir, 'dump.rdb'), { force: true });
  }

  pause(): void {
    this.process?.kill('SIGSTOP');
  }

  resume(): void {
    this.process?.kill('SIGCONT');
  }

  /**
   * A plain connection for the test to inspect the server with. disconnectTimeout 0: else its
   * disconnect() arms a ref'ed 2 s timer whenever the socket is already gone (a restarted
   * server), which outlives the suite and keeps jest's worker from exiting.
   */
  connect(): Redis {
    return new Redis(this.port, '127.0.0.1', { disconnectTimeout: 0 });
  }

  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}


/** `REDIS_URL` when set, else a private server that `stop()` removes again. */
export async function redisFromEnv(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: async () => undefined };
  const server = await RedisServer.start();
  return { url: server.url, stop: () => server.stop() };
}
