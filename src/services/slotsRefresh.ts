import type { Cluster } from 'ioredis';

/** How often a Cluster subscriber refreshes its slot map (CLUSTER SLOTS) to follow moved slots. */
export const SUBSCRIBER_SLOTS_REFRESH_MS = 2000;

/**
 * Refreshes `cluster`'s slot map every `ms` while `wanted()`: how the subscriber notices a slot
 * that moved, its sharded subscriptions with it. Not ioredis's `slotsRefreshInterval`: a refresh
 * still running when `disconnect()` comes fails ("Cluster is disconnecting.") and its callback
 * arms the next round all the same, and every later round fails at once and arms another, a 2 s
 * timer for good that kept the process from exiting after `close()` (a helper's flake hunt; 3 in
 * 3 in a repro). Ref'ed, as ioredis's own timer is. Returns the stop, for `close()` to call
 * before it ends the connection, once `wanted()` says no: a refresh then still running arms
 * nothing.
 */
export function refreshSlotsEvery(cluster: Cluster, ms: number, wanted: () => boolean): () => void {
  let timer: NodeJS.Timeout | undefined;
  const next = (): void => {
    timer = setTimeout(() => {
      timer = undefined;
      if (!wanted()) return;
      // Not wanted any more once close() came (or the subscriber was replaced): a refresh
      // answered after that arms nothing.
      cluster.refreshSlotsCache(() => {
        if (wanted()) next();
      });
    }, ms);
  };
  next();
  return () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
}
