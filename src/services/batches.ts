/**
 * Splits `items` into batches of at most `size` that never mix groups: on a Cluster one script
 * call may only name keys of one hash slot, so the group is the slot.
 */
export function batchesOf<T>(items: Iterable<T>, groupOf: (item: T) => string | number, size: number): T[][] {
  const open = new Map<string | number, T[]>();
  const batches: T[][] = [];
  for (const item of items) {
    const group = groupOf(item);
    let batch = open.get(group);
    if (!batch || batch.length >= size) {
      batch = [];
      open.set(group, batch);
      batches.push(batch);
    }
    batch.push(item);
  }
  return batches;
}

/**
 * A Cluster's refusal of a multi-key call while the keys' slot migrates: TRYAGAIN, or ioredis's
 * "Too many Cluster redirections. Last error: ReplyError: ..." once its retries ran out (16, 100
 * ms apart), the last one a TRYAGAIN, or a MOVED or an ASK met on the way (a retry goes to a
 * random node). Not CLUSTERDOWN or a closed connection: a node down, which splitting the call
 * would only hit once per hold.
 */
function slotMigrating(error: unknown): boolean {
  return error instanceof Error && /^TRYAGAIN |^Too many Cluster redirections\. Last error: \w*Error: (?:TRYAGAIN|MOVED|ASK) /.test(error.message);
}

/**
 * For a batch call that failed with `error`: when a migrating slot refused it (slotMigrating),
 * `items` split into one group per set of keys, to be sent as calls of their own, if that makes
 * more than one (items naming the same keys would fail alike); otherwise undefined.
 */
export function splitOnMigration<T>(error: unknown, items: T[], keysOf: (item: T) => string): T[][] | undefined {
  if (!slotMigrating(error)) return undefined;
  const groups = batchesOf(items, keysOf, Infinity);
  return groups.length > 1 ? groups : undefined;
}
