import type { Hold } from './Hold';
import { CallCutShort, IN_FLIGHT_GRACE_MS, OUTCOME_UNKNOWN, settledWithin } from './bounds';
import type { ChannelEntry, WakeDebt } from './ChannelEntry';
import { type Candidate, type Handover, type LocalHandoff, PARK_AGAIN, type ParkedCandidate } from './LocalHandoff';

/**
 * A waiter as it parks, sleep after sleep of one wait: `arrival` is set at its first park and
 * kept, so that a sleep whose bound ran out (and the attempt that followed) does not cost it
 * its place in the line.
 */
export interface Parking extends Pick<Candidate, 'field' | 'lease' | 'permits' | 'giveBack' | 'giveBackIfUnknown'> {
  arrival?: number;
  /**
   * A sleep whose bound ran out (no message, no handover) sleeps on while a sibling's attempt
   * since covers it (`ChannelEntry.joinBound`): the semaphores, whose parked waiters of one
   * client share one bound, so that they do not all ask at the same instant.
   */
  coveredBySiblings?: boolean;
}

/**
 * Sleeps on `entry` as a handoff candidate until a release message, a local handoff (resolves
 * with the hold handed over), or `ms`; the entry's LocalHandoff is made on first need. A release
 * that claimed the waiter but then sent the lock to another client (PARK_AGAIN) puts it back to
 * sleep at its place in the line (see `LocalHandoff.park`), for what is left of `ms`. The same
 * `waiter` passed for every sleep of one wait keeps its place across them.
 */
export async function sleepAsCandidate(
  entry: ChannelEntry,
  clientId: string,
  waiter: Parking,
  ms: number,
  stops: AbortSignal[],
  deadline = Infinity,
  debt?: WakeDebt,
): Promise<Hold | undefined> {
  const local = entry.localHandoff(clientId);
  let until = performance.now() + ms;
  // Sleeping on under a sibling's ask (below): then, and only then, a shorter answer re-arms it.
  let covered = false;
  for (;;) {
    const outcome = await parkOnce(entry, local, waiter, until - performance.now(), stops, deadline, debt, covered);
    if (outcome === OUTCOME_UNKNOWN) {
      // Handed over or not, Redis will say when it runs the release: a give-back sent now runs
      // after it (one connection), and takes the handover away if there was one; then ask,
      // unless the caller stopped or the wait's time ran out meanwhile (an attempt sent then
      // would take the lock for nobody). The give-back goes on regardless.
      const giving = waiter.giveBackIfUnknown?.(true) ?? Promise.resolve();
      const given = await settledWithin(giving, Math.max(deadline - performance.now(), 0), stops);
      if (!given || performance.now() >= deadline) throw new CallCutShort('give-back of a handover whose outcome was unknown');
      return undefined;
    }
    const now = performance.now();
    if (outcome === RAN_OUT) {
      // The bound ran out (or a fresher answer shortened it) with no wake-up: asked since by a
      // sibling, whose answer covers this waiter too (a refusal's bound, or its success waking
      // the waiters the leftover serves).
      const cover = waiter.coveredBySiblings ? Math.min(entry.joinBound(waiter.permits) ?? 0, deadline - now) : 0;
      if (cover <= 0) return undefined;
      until = now + cover;
      covered = true;
      continue;
    }
    if (outcome !== PARK_AGAIN) return outcome;
    if (until - now <= 0) return undefined;
  }
}

/** parkOnce's answer when its sleep ended by its bound, not claimed by a release nor woken by a message. */
const RAN_OUT = Symbol('ran out');

async function parkOnce(
  entry: ChannelEntry,
  local: LocalHandoff,
  waiter: Parking,
  ms: number,
  stops: AbortSignal[],
  deadline: number,
  debt: WakeDebt | undefined,
  covered: boolean,
): Promise<Handover | typeof RAN_OUT> {
  let outcome: Promise<Handover> | undefined;
  let interrupt: (() => void) | undefined;
  const candidate: ParkedCandidate = {
    ...waiter,
    parked: false,
    arrival: (waiter.arrival ??= local.nextArrival()),
    claim: () => {
      if (!interrupt) return undefined; // not parked (any more)
      let deliver!: (outcome: Handover) => void;
      outcome = new Promise((resolve) => (deliver = resolve));
      interrupt();
      return deliver;
    },
  };
  local.park(candidate);
  try {
    await entry.untilReleased(ms, stops, (stop) => {
      interrupt = stop;
      // Under a sibling's ask, a fresher, shorter answer ends this sleep as if it had run out:
      // sleepAsCandidate looks again. (A sleep on the waiter's own bound needs no such news, and
      // a release's every refusal would wake every parked waiter for nothing.)
      const unlisten = covered ? entry.onBoundShortened(stop) : undefined;
      return () => {
        interrupt = undefined;
        unlisten?.();
        local.unpark(candidate);
      };
    }, debt);
  } finally {
    local.unpark(candidate);
  }
  // Not claimed: woken by a message (it owes the wake-up), else its time ran out. (A caller that
  // keeps no debt cannot tell: it asks either way.)
  if (!outcome) return debt && !debt.owed ? RAN_OUT : undefined;
  return waiter.giveBack ? untilHandedOver(outcome, stops, waiter, deadline) : outcome;
}

/**
 * The outcome of the release that claimed a waiter, unless one of `stops` comes first or the
 * wait's `deadline` passes: that release's command may wait long (Redis paused, a connection the
 * user owns), and an aborted caller, close() or a waitTime must not. A stop's reason is thrown;
 * at the deadline, but no sooner than IN_FLIGHT_GRACE_MS after the claim (as for the waiter's own
 * attempts: a reply within it is taken), CallCutShort, which ends the wait as timed out. Either
 * way a hold the release handed over after all is given back.
 */
async function untilHandedOver(outcome: Promise<Handover>, stops: AbortSignal[], giveBack: Pick<Candidate, 'giveBack' | 'giveBackIfUnknown'>, deadline: number): Promise<Handover> {
  let answered: boolean;
  try {
    answered = await settledWithin(outcome, Math.max(deadline - performance.now(), IN_FLIGHT_GRACE_MS), stops);
  } catch (reason) {
    giveBackWhenHandedOver(outcome, giveBack);
    throw reason;
  }
  if (!answered) {
    giveBackWhenHandedOver(outcome, giveBack);
    throw new CallCutShort('release (a handover to this waiter)');
  }
  return outcome;
}

function giveBackWhenHandedOver(outcome: Promise<Handover>, { giveBack, giveBackIfUnknown }: Pick<Candidate, 'giveBack' | 'giveBackIfUnknown'>): void {
  void outcome.then((late) => {
    // Nobody waits for it: a failure leaves the hold to its lease.
    if (late === OUTCOME_UNKNOWN) giveBackIfUnknown?.(false).catch(() => undefined);
    else if (late !== undefined && late !== PARK_AGAIN) giveBack?.().catch(() => undefined);
  });
}
