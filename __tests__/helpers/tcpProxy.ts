import { createServer, type Server, type Socket, connect } from 'node:net';
import type { Redis } from 'ioredis';
import { commandCounts } from './testRedis';

/**
 * A loopback TCP proxy in front of a Redis server, so that a test can cut a connection at an
 * exact point of the conversation: after Redis ran a command, before its reply reaches the client.
 */
export class TcpProxy {
  private readonly pairs = new Set<[Socket, Socket]>();
  private cutArmed = false;
  /** What connections accepted from now on write to Redis arrives this many ms late (a slow link). */
  newConnectionDelayMs = 0;
  /** Replies swallowed by cuts so far. */
  cuts = 0;
  /** Nothing passes either way while set (a link gone silent, connections left open). */
  silenced = false;
  /** While set, a new connection is accepted and closed at once (a Redis at maxclients, a proxy whose Redis is down). */
  closingNew = false;
  /** Connections accepted so far. */
  accepted = 0;

  private listenPort = 0;

  private constructor(private readonly server: Server) {}

  static async start(targetPort: number): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (downstream) => proxy.pipe(downstream, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy.listenPort = (server.address() as { port: number }).port;
    return proxy;
  }

  get port(): number {
    return this.listenPort;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The next bytes Redis sends on any connection are dropped, and every connection is cut. */
  cutOnNextReply(): void {
    this.cutArmed = true;
  }

  /** Refuses new connections from now on; the open ones carry on (and a cut stays cut). */
  stopAccepting(): void {
    this.server.close();
  }

  /** Accepts connections again, on the same port. */
  async resumeAccepting(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.listenPort, '127.0.0.1', resolve));
  }

  async close(): Promise<void> {
    this.cutAll();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(downstream: Socket, targetPort: number): void {
    this.accepted++;
    if (this.closingNew) {
      downstream.on('error', () => undefined);
      downstream.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [downstream, upstream];
    this.pairs.add(pair);
    const delay = this.newConnectionDelayMs;
    downstream.on('data', (chunk) => {
      if (this.silenced) return;
      if (delay > 0) setTimeout(() => upstream.write(chunk), delay);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (this.silenced) return;
      if (this.cutArmed) {
        this.cutArmed = false;
        this.cuts++;
        this.cutAll();
        return;
      }
      downstream.write(chunk);
    });
    const end = (): void => {
      this.pairs.delete(pair);
      downstream.destroy();
      upstream.destroy();
    };
    for (const socket of pair) {
      socket.on('error', end);
      socket.on('close', end);
    }
  }

  /** Cuts every open connection (the proxy keeps accepting). */
  cutAll(): void {
    for (const [downstream, upstream] of this.pairs) {
      downstream.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }
}

/**
 * Runs `call` with the reply of its next command cut by `proxy`, so that ioredis resends it on a
 * new connection; checks there was one cut and that Redis ran two script calls (the first run and
 * the resend). Settles as `call` did.
 */
export async function withReplyCut<T>(proxy: TcpProxy, admin: Redis, call: () => Promise<T>): Promise<T> {
  const scriptCalls = async (): Promise<number> => {
    const counts = await commandCounts(admin);
    return (counts.evalsha ?? 0) + (counts.eval ?? 0);
  };
  const [calls, cuts] = [await scriptCalls(), proxy.cuts];
  proxy.cutOnNextReply();
  const [settled] = await Promise.allSettled([call()]);
  expect(proxy.cuts - cuts).toBe(1);
  expect((await scriptCalls()) - calls).toBe(2);
  if (settled!.status === 'rejected') throw settled!.reason;
  return settled!.value;
}

/**
 * A proxy in front of `redis`'s server for the tests of the enclosing describe (started before
 * them, closed after), and `resent(call)`: `withReplyCut` on it.
 */
export function useReplyCuts(redis: { server: { port: number }; admin: Redis }): { readonly url: string; resent<T>(call: () => Promise<T>): Promise<T> } {
  let proxy: TcpProxy;
  beforeAll(async () => {
    proxy = await TcpProxy.start(redis.server.port);
  });
  afterAll(async () => {
    await proxy.close();
  });
  return {
    get url() {
      return proxy.url;
    },
    resent: (call) => withReplyCut(proxy, redis.admin, call),
  };
}
