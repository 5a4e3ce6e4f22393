import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { RedisClock, type RedisClocks } from './RedisClock';

/**
 * A Cluster: one clock per master, measured on that master's own connection. A `TIME` sent
 * through the Cluster object goes to any node (it names no key), and the nodes' clocks need not
 * agree: a deadline computed on a node 20 s ahead of the key's master let a resend count twice
 * there, and one computed on a node 55 s behind it refused calls sent once (`STALE`). A master seen
 * for the first time (a failover, a new node) gives deadlines once its first measure answers;
 * until then its calls carry none, as on a connection just made.
 */
export class ClusterClocks implements RedisClocks {
  /** By node key (`host:port`, as in `cluster.slots`), with the connection it measures. */
  private readonly clocks = new Map<string, { node: Redis; clock: RedisClock; onReady: () => void }>();

  private closed = false;

  constructor(private readonly cluster: Cluster) {
    this.watchMasters();
  }

  after(ms: number, key: string): number {
    return this.clockFor(key)?.after(ms) ?? 0;
  }

  ready(key?: string): Promise<void> {
    if (key !== undefined) return this.clockFor(key)?.ready() ?? Promise.resolve();
    // The Cluster is ready again: every clock known measures afresh; a master new to the slot map
    // gets its clock now (it measures as it is made).
    const known = [...this.clocks.values()];
    this.watchMasters();
    return Promise.all(known.map(({ clock }) => clock.ready())).then(() => undefined);
  }

  /** A clock for every master of the slot map (none before the Cluster connected). */
  private watchMasters(): void {
    for (const node of this.cluster.nodes('master')) this.clockOf(keyOfNode(node), node);
  }

  close(): void {
    this.closed = true;
    for (const { node, onReady } of this.clocks.values()) node.off('ready', onReady);
    this.clocks.clear();
  }

  /** The clock of the master that serves `key`'s slot now, as ioredis routes it. */
  private clockFor(key: string): RedisClock | undefined {
    if (this.closed) return undefined;
    const nodeKey = this.cluster.slots[calculateSlot(key)]?.[0];
    if (nodeKey === undefined) return undefined;
    const node = this.cluster.nodes('all').find((candidate) => keyOfNode(candidate) === nodeKey);
    return node && this.clockOf(nodeKey, node);
  }

  private clockOf(nodeKey: string, node: Redis): RedisClock {
    const known = this.clocks.get(nodeKey);
    if (known?.node === node) return known.clock;
    // A connection ioredis made anew for this address: the old one is gone, and so is its server, maybe.
    if (known) known.node.off('ready', known.onReady);
    const clock = new RedisClock(node, true);
    // The node's own reconnects (a restart, a failover behind one address) do not make the Cluster `ready`.
    const onReady = (): void => void clock.ready();
    node.on('ready', onReady);
    this.clocks.set(nodeKey, { node, clock, onReady });
    return clock;
  }
}

/** ioredis's node key (`getNodeKey`): the address in `cluster.slots`. */
function keyOfNode(node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}
