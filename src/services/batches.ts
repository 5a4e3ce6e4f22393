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
