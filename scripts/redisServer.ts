import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * A free loopback port below the kernel's ephemeral range, and with port + 10 000 (Cluster's bus
 * port) free as well. Why not the kernel's own choice (port 0): that comes from the ephemeral
 * range, where any outgoing connection of a parallel suite can take the port between our probe
 * and redis-server's bind, or take it while a test has killed its server before a restart on the
 * same port. Below the range only a listener can take it, and start() retries that rare case.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralRangeStart();
  const top = low - 10_000;
  for (let attempt = 0; top > 10_000 && attempt < 200; attempt++) {
    const port = 10_000 + Math.floor(Math.random() * (top - 10_000));
    if ((await canListen(port)) && (await canListen(port + 10_000))) return port;
  }
  return kernelPort();
}

function ephemeralRangeStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    return Number(low) || 32_768;
  } catch {
    return 32_768;
  }
}

async function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function kernelPort(): Promise<number> {
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

class PortTaken extends Error {}

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

  /** On a port another process took after freePort() looked, it tries again on another. */
  static async start(extraArgs: string[] = []): Promise<RedisServer> {
    for (let attempt = 1; ; attempt++) {
      const server = new RedisServer(await freePort(), extraArgs);
      try {
        await server.restart();
        return server;
      } catch (error) {
        await server.stop();
        if (!(error instanceof PortTaken) || attempt === 5) throw error;
      }
    }
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
      let answeredBy: number | undefined;
      try {
        await probe.connect();
        answeredBy = Number(/process_id:(\d+)/.exec(await probe.info('server'))?.[1]);
      } catch {
        // not listening yet
      } finally {
        probe.disconnect();
      }
      // Another process's server on our port must not pass for ours.
      if (answeredBy === child.pid) return;
      if (child.exitCode !== null) throw new PortTaken(`redis-server on port ${this.port} exited at start (exit code ${child.exitCode}): the port was taken, or its arguments are wrong`);
      if (Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not start`);
      await new Promise((resolve) => setTimeout(resolve, 20));
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
