import { boundedWait } from './bounds';

/**
 * A grant a message (or a release's reply) brought: `redisMicros`, when given, is Redis's time of
 * the grant, and `ttl` the lease (ms) Redis gave it then (a fair lock's).
 */
export interface Grant {
  readonly redisMicros: number | undefined;
  readonly ttl?: number;
}

/**
 * The owner field a grant names, its Redis time and lease: `message` is the field, or (a fair
 * lock's) "<field>@<µs>:<ttl ms>" ("<field>@<µs>" from a version before the lease came along).
 * A stamp that is not a whole number of µs (forged, garbled) counts as none.
 */
function parseGrant(message: string): { field: string; grant: Grant } {
  const at = message.lastIndexOf('@');
  if (at < 0) return { field: message, grant: { redisMicros: undefined, ttl: undefined } };
  // The stamp's first two ':'-separated parts, as `split(':').map(Number)` read them, without the arrays.
  const colon = message.indexOf(':', at + 1);
  const micros = Number(colon < 0 ? message.slice(at + 1) : message.slice(at + 1, colon));
  let ttl: number | undefined;
  if (colon >= 0) {
    const end = message.indexOf(':', colon + 1);
    ttl = Number(end < 0 ? message.slice(colon + 1) : message.slice(colon + 1, end));
  }
  const lease = ttl !== undefined && Number.isSafeInteger(ttl) && ttl > 0 ? ttl : undefined;
  return { field: message.slice(0, at), grant: { redisMicros: Number.isSafeInteger(micros) ? micros : undefined, ttl: lease } };
}

/** A waiter of this client that expects a grant: its wake-up while parked, a grant that came before it parked, when it first asked to be queued. */
interface Expectation {
  parked: ((grant: Grant | undefined) => void) | undefined;
  early: Grant | undefined;
  /** performance.now() at the send of the wait's first request that could queue it. */
  queuingSince: number | undefined;
}

/**
 * Targeted wake-ups (a fair lock's grants): the message names the owner field it is for.
 * Waiters register before they ask to be queued, because a grant can beat the reply to that
 * request; a grant for a registered waiter that is not parked yet is kept until it parks.
 */
export class ChannelGrants {
  private readonly expected = new Map<string, Expectation>();

  /**
   * Hands a grant to its waiter (kept until it parks); false when no such waiter is expected
   * here. `message` is the owner field, or (a fair lock's) "<field>@<µs>:<ttl ms>" (see parseGrant).
   */
  grant(message: string): boolean {
    if (this.expected.size === 0) return false;
    const { field, grant } = parseGrant(message);
    return this.grantTo(field, grant);
  }

  /** `grant` for the waiter expecting `field` (kept until it parks); false when none is expected here. */
  private grantTo(field: string, grant: Grant): boolean {
    const expectation = this.expected.get(field);
    if (!expectation) return false;
    if (expectation.parked) expectation.parked(grant);
    else expectation.early = grant;
    return true;
  }

  /** Every waiter expecting a grant asks again: a reconnect or a moved slot may have lost its grant (`ChannelEntry.wakeAll`). */
  wakeAll(): void {
    for (const { parked } of [...this.expected.values()]) parked?.(undefined);
  }

  /** The waiter expecting a grant for `field`, if parked, asks again (its lock runs out now). */
  wakeExpecting(field: string): void {
    this.expected.get(field)?.parked?.(undefined);
  }

  /** From now on a message naming `field` is a grant for this waiter. */
  expectGrant(field: string): Expectation {
    // Expected already (a wait that joined again): a grant that came early and when it first
    // asked to be queued still count.
    const existing = this.expected.get(field);
    if (existing) {
      existing.parked = undefined;
      return existing;
    }
    const expectation: Expectation = { parked: undefined, early: undefined, queuingSince: undefined };
    this.expected.set(field, expectation);
    return expectation;
  }

  forgetGrant(field: string): void {
    const expectation = this.expected.get(field);
    if (!expectation) return;
    // Cleared, not only deleted: a hash table the Map replaced may still point at it (see LinkedList).
    expectation.parked = expectation.early = undefined;
    this.expected.delete(field);
  }

  /** The waiter expecting `field` sends a request that may queue it (the first one of its wait counts). */
  queuing(field: string, sentAt: number): void {
    const expectation = this.expected.get(field);
    if (expectation) expectation.queuingSince ??= sentAt;
  }

  /**
   * A release of this client, sent at `sentAt`, granted `field` and said so in its reply instead
   * of a message. Told like a message, unless that waiter's wait asked to be queued only after
   * the release was sent: then the reply is one replayed from the release's latch (ioredis
   * resent the release after a reconnect) for an earlier wait of the same owner, which took the
   * lock by asking meanwhile. Both go over one connection, in order, so a grant for this wait
   * comes from a release sent after its queuing request.
   */
  grantFromReply(grant: string, sentAt: number): void {
    // Parsed once, for the check and the grant.
    const { field, grant: parsed } = parseGrant(grant);
    const since = this.expected.get(field)?.queuingSince;
    if (since !== undefined && since < sentAt) this.grantTo(field, parsed);
  }

  /** Resolves with the grant for `field`, undefined after `ms` or on `wakeAll`; rejects like `ChannelEntry.untilSubscribed` on abort. */
  async untilGranted(field: string, ms: number, stops: AbortSignal[]): Promise<Grant | undefined> {
    let granted: Grant | undefined;
    const expectation = this.expectGrant(field);
    await boundedWait(ms, stops, (done) => {
      if (expectation.early) {
        granted = expectation.early;
        expectation.early = undefined;
        done();
        return undefined;
      }
      expectation.parked = (value) => {
        granted = value;
        done();
      };
      return () => {
        expectation.parked = undefined;
      };
    });
    return granted;
  }
}
