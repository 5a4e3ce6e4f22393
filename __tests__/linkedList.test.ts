// The list behind the long-lived registries (calls in flight, parked waiters, abort listeners,
// queue entries): order, O(1) removal, and a removed link that points at nothing any more,
// which is what keeps V8's young-generation collector from promoting dead waiters (LinkedList).
import { getEventListeners } from 'node:events';
import { onAbort } from '../src/services/abortListeners';
import { LinkedList } from '../src/services/LinkedList';

test('keeps insertion order; removes any link once; shift and drain take from the front', () => {
  const list = new LinkedList<string>();
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((value) => list.push(value));
  expect(list.remove(b!)).toBe(true);
  expect(list.remove(b!)).toBe(false);
  expect(list.size).toBe(3);
  expect(list.links().map((link) => link.value)).toEqual(['a', 'c', 'd']);
  expect(list.remove(d!)).toBe(true);
  expect(list.shift()).toBe('a');
  expect(a!.linked).toBe(false);
  list.push('e');
  expect(list.drain()).toEqual(['c', 'e']);
  expect([list.size, list.shift(), c!.linked]).toEqual([0, undefined, false]);
  expect(new LinkedList<number>().remove(c as never)).toBe(false);
});

test('a removed link keeps no reference to its value or its neighbours', () => {
  const list = new LinkedList<object>();
  list.push({});
  const middle = list.push({});
  list.push({});
  list.remove(middle);
  expect([middle.value, middle.prev, middle.next, middle.list]).toEqual([undefined, undefined, undefined, undefined]);
});

test('links() is a snapshot: removing links while going through it visits each once', () => {
  const list = new LinkedList<number>();
  const links = [1, 2, 3, 4].map((value) => list.push(value));
  const seen: number[] = [];
  for (const link of list.links()) {
    seen.push(link.value!);
    list.remove(links[3]!); // removes a later one: it is still visited, cleared
  }
  expect(seen).toEqual([1, 2, 3, undefined]);
  expect(list.size).toBe(3);
});

test('onAbort: one EventTarget listener per signal however many wait on it; each told once, in order; undo works', () => {
  const controller = new AbortController();
  const told: number[] = [];
  const undos = Array.from({ length: 100 }, (_, i) => onAbort(controller.signal, () => told.push(i)));
  expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
  undos[5]!();
  controller.abort();
  expect(told).toEqual(Array.from({ length: 100 }, (_, i) => i).filter((i) => i !== 5));
  controller.abort();
  expect(told).toHaveLength(99);
});
