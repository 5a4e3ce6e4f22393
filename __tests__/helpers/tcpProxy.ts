import { createServer, type Server, type Socket, connect } from 'node:net';

/**
 * A loopback TCP proxy in front of a Redis server, so that a test can cut a connection at an
 * exact point of the conversation: after Redis ran a command, before its reply reaches the client.
 */
export class TcpProxy {
  private readonly pairs = new Set<[Socket, Socket]>();
  private cutArmed = false;
  /** Replies swallowed by cuts so far. */
  cuts = 0;

  private constructor(private readonly server: Server) {}

  static async start(targetPort: number): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (downstream) => proxy.pipe(downstream, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    if (typeof address !== 'object' || !address) throw new Error('proxy not listening');
    return address.port;
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

  async close(): Promise<void> {
    this.cutAll();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(downstream: Socket, targetPort: number): void {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [downstream, upstream];
    this.pairs.add(pair);
    downstream.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
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

  private cutAll(): void {
    for (const [downstream, upstream] of this.pairs) {
      downstream.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }
}
