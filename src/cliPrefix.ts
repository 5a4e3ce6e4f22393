// A name given to the `rlock` CLI without --prefix that belongs to a client with a keyPrefix.
import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';
import { derivedName } from './names';

/**
 * Helper keys of which a name in use has at least one beside its main key, as long as it is more
 * than a bare hold: a kind marker (semaphores, latch), a queue of waiting clients (plain lock), a
 * fair lock's queue, a read-write lock's leases, a fenced lock's counter.
 */
const TELLING_KINDS = ['kind', 'clients', 'queue', 'rw_leases', 'rw_writers', 'fence', 'permits', 'semaphore_reservation'];

/** Longer key prefixes than this are not looked for. */
const LONGEST_PREFIX = 64;

/**
 * The key prefix a name given without one belongs to: `rlock list` without --prefix shows a
 * prefixed client's names whole (`app:X`), and `inspect`/`force-unlock` of such a name found its
 * key but not its helper keys (`<prefix>rlock__…:{app:X}`). A forced lock's waiters were then not
 * woken (they took it only by their own bound, seconds later), a read-write lock showed as free,
 * and the queue was not shown. Told by the helper keys: none without a prefix, some under a
 * prefix the key starts with (the longest such). Undefined when there is no sign of one; a
 * prefix whose keys the user may not read (an ACL) is passed over.
 */
export async function prefixOfName(redis: Redis, key: string): Promise<string | undefined> {
  const slot = calculateSlot(key);
  const candidates = [''];
  for (let length = Math.min(key.length - 1, LONGEST_PREFIX); length > 0; length--) {
    const prefix = key.slice(0, length);
    // A prefix cut inside a hash tag would name keys of another slot: not one a client can have.
    if (calculateSlot(derivedName(prefix, 'kind', key)) === slot) candidates.push(prefix);
  }
  const pipeline = redis.pipeline();
  for (const prefix of candidates) pipeline.exists(...TELLING_KINDS.map((kind) => derivedName(prefix, kind, key)));
  const replies = (await pipeline.exec()) ?? [];
  const found = (i: number): boolean => !replies[i]?.[0] && Number(replies[i]?.[1]) > 0;
  if (found(0)) return undefined;
  for (let i = 1; i < candidates.length; i++) if (found(i)) return candidates[i];
  return undefined;
}
