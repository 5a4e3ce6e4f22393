import type { Redis } from 'ioredis';

/** The first and the longest pause before an ended connection is asked to connect again, in ms. */
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 2000;

/**
 * Makes a connection this library created connect again when ioredis ends it while it is still
 * wanted. ioredis ends a connection for good when its connector fails while remaking it: a
 * Sentinel failover noticed (`failoverDetector`) during a reconnect rejects it with "Connection
 * is closed", and the connection then stays in status `end`, every later command failing (fault
 * 10 caught a client that never worked again; ioredis#1683 reports the same in production). A
 * connection whose own `retryStrategy` says not to reconnect is left ended. Returns the undo,
 * for `close()` to call before it ends the connection itself.
 */
export function reviveWhenEnded(connection: Redis, wanted: () => boolean): () => void {
  if (typeof connection.options.retryStrategy?.(1) !== 'number') return () => undefined;
  let pause = FIRST_PAUSE_MS;
  let timer: NodeJS.Timeout | undefined;
  const onEnd = (): void => {
    if (!wanted() || timer !== undefined) return;
    // Ref'ed, as ioredis's own reconnect timer is: a process waiting for a lock stays up for it.
    timer = setTimeout(() => {
      timer = undefined;
      if (!wanted() || connection.status !== 'end') return;
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
      connection.connect().catch(() => undefined); // a failure ends it again, and brings us back
    }, pause);
  };
  const onReady = (): void => {
    pause = FIRST_PAUSE_MS;
  };
  connection.on('end', onEnd);
  connection.on('ready', onReady);
  return () => {
    connection.off('end', onEnd);
    connection.off('ready', onReady);
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
}
