/**
 * A list with O(1) removal of any link, for the long-lived registries that every acquisition
 * adds to and removes from (calls in flight, parked waiters, abort listeners, queue entries).
 *
 * Why not a Set: a Set or Map that lives long (so sits in V8's old generation) and churns makes
 * a new hash table every few additions, and the table it replaces keeps a pointer to the new one
 * and to the values it held. V8's young-generation collector cannot tell that the old table is
 * dead, so every table made since the last full GC, and every waiter, closure and promise they
 * held, survived every scavenge and was promoted: about 6 KiB per contended fair-lock
 * acquisition, a full GC every few seconds (docs/benchmarks.md, "The garbage collector and the
 * warm-up"). A removed link here is cleared (value and neighbours), so nothing dead points at
 * anything young.
 */
export class Link<T> {
  /** @internal */
  prev: Link<T> | undefined = undefined;
  /** @internal */
  next: Link<T> | undefined = undefined;
  /** @internal The list this link is in; undefined once removed. */
  list: LinkedList<T> | undefined;

  /** @internal Use `list.push(value)`. */
  constructor(
    list: LinkedList<T>,
    /** The value; undefined once removed. */
    public value: T | undefined,
  ) {
    this.list = list;
  }

  /** Whether the link is still in its list. */
  get linked(): boolean {
    return this.list !== undefined;
  }
}

export class LinkedList<T> {
  private head: Link<T> | undefined = undefined;
  private tail: Link<T> | undefined = undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Appends `value`; the link removes it again. */
  push(value: T): Link<T> {
    const link = new Link(this, value);
    link.prev = this.tail;
    if (this.tail) this.tail.next = link;
    else this.head = link;
    this.tail = link;
    this.count++;
    return link;
  }

  /** Takes `link` out (and clears it); false when it was not in this list (removed already). */
  remove(link: Link<T>): boolean {
    if (link.list !== this) return false;
    if (link.prev) link.prev.next = link.next;
    else this.head = link.next;
    if (link.next) link.next.prev = link.prev;
    else this.tail = link.prev;
    link.prev = link.next = link.list = link.value = undefined;
    this.count--;
    return true;
  }

  /** Removes and returns the first value (undefined when empty). */
  shift(): T | undefined {
    const first = this.head;
    if (!first) return undefined;
    const value = first.value;
    this.remove(first);
    return value;
  }

  /** The links in order, as of now: removing any of them while going through the array is safe. */
  links(): Link<T>[] {
    const links: Link<T>[] = [];
    for (let link = this.head; link; link = link.next) links.push(link);
    return links;
  }

  /** Removes every link; returns their values in order. */
  drain(): T[] {
    const values: T[] = [];
    for (const link of this.links()) {
      values.push(link.value as T);
      this.remove(link);
    }
    return values;
  }
}
