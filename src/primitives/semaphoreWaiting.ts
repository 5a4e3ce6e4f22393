import type { ChannelEntry } from '../services/ChannelEntry';

/**
 * How long a caller that may wait sleeps without asking Redis, or undefined when it must ask.
 * It stands back while its client yields its turn (the other clients' waiters get the permits
 * it passed on), and a new caller (`first`) for one permit parks behind its client's waiters
 * already parked: they wait because no permits were free, so its attempt would nearly always be
 * refused (one script call per acquisition under contention, measured in the bench); parked, it
 * is served in order by this client's releases handing over or by a release message. A
 * multi-permit caller must try, to claim the reservation that keeps smaller requests from
 * starving it. Either sleeps no longer than the bound this client's latest refused attempt was
 * given (a lease's or a reservation's end, which publishes nothing), and asks once that ran out.
 */
export function standBackBound(entry: ChannelEntry, permits: number, first: boolean): number | undefined {
  const local = entry.local;
  // Behind waiters for 1 permit only: one for more may wait while a permit is free (it waited
  // 0.5-4.7 s behind a parked request for more permits than the semaphore has, a permit free).
  if (local?.yielding === true) return entry.joinBound(); // its turn given away: it stands back whatever it asks for
  const standsBack = first && permits === 1 && local?.hasCandidateFor(1) === true;
  return standsBack ? entry.joinBound(permits) : undefined;
}

/**
 * How long a waiter for a single permit stays parked before its next attempt may reserve permits
 * (as a multi-permit request always may): then the permits freed next are its, whoever is
 * quicker. Long enough that the common wait never reserves (a reservation costs its holder a
 * grant message and an attempt), short enough to bound a starving wait to a few of them. Counted
 * from the waiter's first sleep, not from its call: getting subscribed (slow on a loaded
 * machine) is not being passed over, and a reservation taken then changed how every waiter of
 * a test parked.
 */
export const STARVING_MS = 100;

/** A waiter's STARVING_MS clock: `parked()` at each sleep (the first one starts it), `starving()` once it ran out. */
export function starvingClock(): { parked(): void; starving(): boolean } {
  let parkedAt: number | undefined;
  return {
    parked: () => {
      parkedAt ??= performance.now();
    },
    starving: () => parkedAt !== undefined && performance.now() - parkedAt >= STARVING_MS,
  };
}
