// The list behind the long-lived registries (calls in flight, parked waiters, abort listeners,
// queue entries): order, O(1) removal, and a removed link that points at nothing any more,
// which is what keeps V8's young-generation collector from promoting dead waiters (LinkedList).
import { getEventListeners } from 'node:events';
import { keepListening, onAbort } from '../src/services/abortListeners';
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
  const linkedElsewhere = list.push('f');
  expect(new LinkedList<string>().remove(linkedElsewhere)).toBe(false);
  expect([linkedElsewhere.linked, list.size]).toEqual([true, 1]);
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

test('onAbort: a listener undone by an earlier one while the abort is told is not told', () => {
  const controller = new AbortController();
  const told: string[] = [];
  let undoSecond = (): void => undefined;
  onAbort(controller.signal, () => {
    told.push('first');
    undoSecond();
  });
  undoSecond = onAbort(controller.signal, () => told.push('second'));
  onAbort(controller.signal, () => told.push('third'));
  controller.abort();
  expect(told).toEqual(['first', 'third']);
});

test('onAbort: a listener that throws does not keep the others from being told; its error is thrown again on the next tick', () => {
  const controller = new AbortController();
  const told: string[] = [];
  const failure = new Error('listener failed');
  onAbort(controller.signal, () => {
    throw failure;
  });
  onAbort(controller.signal, () => told.push('second'));
  const scheduled: (() => void)[] = [];
  const nextTick = jest.spyOn(process, 'nextTick').mockImplementation(((fn: () => void) => void scheduled.push(fn)) as never);
  try {
    controller.abort();
  } finally {
    nextTick.mockRestore();
  }
  expect(told).toEqual(['second']);
  expect(scheduled).toHaveLength(1);
  expect(scheduled[0]).toThrow(failure);
});

test('onAbort: the shared listener goes when the last wait on a signal ends (so the signal can be collected), but not on a kept signal', () => {
  const passing = new AbortController();
  const undos = [onAbort(passing.signal, () => undefined), onAbort(passing.signal, () => undefined)];
  undos[0]!();
  expect(getEventListeners(passing.signal, 'abort')).toHaveLength(1);
  undos[1]!();
  expect(getEventListeners(passing.signal, 'abort')).toHaveLength(0);
  // A new wait afterwards listens again.
  const told: number[] = [];
  onAbort(passing.signal, () => told.push(1));
  passing.abort();
  expect(told).toEqual([1]);

  const clientLife = new AbortController();
  keepListening(clientLife.signal);
  onAbort(clientLife.signal, () => undefined)();
  expect(getEventListeners(clientLife.signal, 'abort')).toHaveLength(1);
});
