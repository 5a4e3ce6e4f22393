import calculateSlot from 'cluster-key-slot';
import { ExclusiveLock, type ForceUnlockResult } from '../../core/ExclusiveLock';
import { forceWhileRefused, stopsOf, waitFor, type WaitProtocol } from '../../core/waitLoop';
import type { Hold } from '../../services/Hold';
import { inspectLock, type LockInfo } from '../../introspection';
import { clientQueueExpiryKeyOf, fenceKeyOf, RELEASE_LATCH_TTL_MS } from '../../names';
import { type Parking, sleepAsCandidate } from '../../services/candidateSleep';
import { OUTCOME_UNKNOWN, PARK_AGAIN } from '../../services/LocalHandoff';
import { type LockContext, queuePublishing } from '../../services/LockContext';
import { type LockOwner, scopedOwner } from '../../services/LockOwner';
import type { RenewalTarget } from '../../services/RenewalTarget';
import type { ScriptedRedis } from '../../services/scripts';
import { boundedWait } from '../../services/bounds';
import { ClientQueue } from './ClientQueue';
import { type AttemptingSteps, RLockAttempt, tookAfresh, Unconfirmed } from './rlockAttempt';
import { passTurn, turnLeft, turnPassed } from './rlockTurns';

/**
 * A reentrant distributed lock, Redisson's RLock: a Redis hash `<clientId>:<ownerId> → holds`.
 * Not fair: whoever asks while it is free takes it. Waiting is per client: a client whose
 * waiter was refused is put in a queue of waiting clients in Redis (one entry per client), and
 * a release wakes the first of them only, on a channel of that client's own; its waiters pass
 * the lock between them in the release script (a run of at most MAX_LOCAL_HANDOFFS handoffs and
 * MAX_LOCAL_RUN_MS while other clients wait) before it goes to the next client. See docs/design.md, "RLock contention";
 * FairLock serves owners first come, first served.
 */
export class RLock extends ExclusiveLock {
  /** @internal Use `client.getLock(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
  }

  /** @internal The lock's queue of waiting clients: its names and this client's place in it (made once per handle). */
  protected get queue(): ClientQueue {
    return (this.queueMade ??= new ClientQueue(this.context, this.key));
  }

  private queueMade: ClientQueue | undefined;

  /** This handle's acquire attempts (made on the first wait). */
  private get attempts(): RLockAttempt<RLock> {
    return (this.attemptsMade ??= new RLockAttempt(this, RLock.attempting));
  }

  /** The steps one acquire asks of a handle: one table for every handle (see `AttemptingSteps`). */
  private static readonly attempting: AttemptingSteps<RLock> = {
    context: (handle) => handle.context,
    releases: (handle) => handle.releases,
    field: (handle, owner) => handle.field(owner),
    acquireScript: (handle, owner) => handle.acquireScript(owner),
  };

  private attemptsMade: RLockAttempt<RLock> | undefined;

  protected async forceUnlockCall(holder: string): Promise<ForceUnlockResult> {
    const { publish, trust } = await queuePublishing(this.context);
    const { queue } = this;
    const [removed, ...holders] = await forceWhileRefused(this.context, (redis) => redis.rlock_forceUnlock(...queue.keys, publish, queue.wakePrefix, trust, holder));
    const result = this.forceUnlockAnswered(removed, holders);
    // If the lock was with this client, it is not any more.
    const waiting = queue.here();
    if (result.removed && waiting) {
      const wasHere = waiting.heldHere;
      waiting.released(waiting.queued);
      if (wasHere && !waiting.queued) queue.wakeOneJoined();
    }
    return result;
  }

  /**
   * Who holds the lock (clientId, ownerId, hold count, and the holding client's `name` when its
   * connection is still there), its remaining TTL, and how many clients wait in line for it.
   */
  async inspect(): Promise<LockInfo> {
    this.context.assertOpen();
    return this.context.command('inspect', (redis) => inspectLock(redis, this.name, this.key, clientQueueExpiryKeyOf(this.context.keyPrefix, this.key)));
  }

  /** @internal See LockHandle.yieldsTurn. */
  override yieldsTurn(): boolean {
    return turnPassed(this.context, this.key);
  }

  protected acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
    // This client's release just woke another client's waiter: a new caller (one that may wait)
    // lets it ask first, for at most TURN_PASSED_MS. Not fair, bounded: it ends the starvation of
    // a busy process by one that releases and locks again at once ("a one-task client that locks
    // again at once does not starve a busy one").
    const left = owner.holds === 0 && waitTime > 0 ? turnLeft(this.context, this.key) : undefined;
    if (left === undefined) return this.waitForLock(owner, leaseTime, waitTime, signal, attemptDeadline);
    if (left <= 0) return this.waitForLock(owner, leaseTime, waitTime, signal);
    // At most half the waitTime: what is left stays a wait (bounded by its deadline while Redis
    // is unreachable), never a single attempt (bounded only by offlineTimeout).
    const pause = Math.min(left, waitTime / 2);
    const stops = stopsOf(this.context, signal);
    return boundedWait(pause, stops, () => undefined).then(() => this.waitForLock(owner, leaseTime, waitTime - pause, signal));
  }

  private waitForLock(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
    const { queue } = this;
    const lease = leaseTime ?? this.context.watchdogTimeout;
    let first = true;
    // One for the whole wait, made at its first sleep: it keeps the waiter's place in its
    // client's line from sleep to sleep.
    let parking: Parking | undefined;
    const parkingOf = (): Parking => (parking ??= {
      field: this.field(owner),
      lease,
      giveBack: () => this.releases.giveBackUnbooked(owner),
      // Sent at once, on the connection the release went by, so it runs after that release: a
      // hold it handed over is taken away, and with none it answers nil. Not while the owner holds
      // or acquires anything else (this wait is its one acquire while it waits): its own hold
      // could be the one taken away.
      giveBackIfUnknown: (stillWaiting) => (owner.holds === 0 && owner.pending === (stillWaiting ? 1 : 0) ? this.releases.giveBackUnbooked(owner) : Promise.resolve()),
    });
    const protocol: WaitProtocol = {
      channel: queue.channel,
      attempt: async (listening, bound) => {
        const waiting = listening && queue.waitingClient(listening);
        // A new caller while the lock is with this client, or while its waiters are in line,
        // could only fail: it joins them. A woken waiter always asks, and so does an owner
        // entering again (it may be the very holder).
        const skip = first && owner.holds === 0 ? waiting?.skipAttemptFor() : undefined;
        first = false;
        if (skip !== undefined) return { held: false, ttl: skip };
        const sentAt = performance.now();
        const reply = await this.attempts.attempt(owner, lease, waiting ? 1 : 0, bound);
        if (reply instanceof Unconfirmed) {
          // Taken, but the replicas did not confirm it in time: given back (syncedAttempt), a
          // refusal that says nothing of the owner's other holds.
          waiting?.refused(reply.ttl);
          return { held: false, ttl: reply.ttl };
        }
        if (typeof reply === 'number') {
          // A re-entry refused: the owner's hold is gone (another owner has the lock now); the
          // re-entry waits on as a new hold's acquire.
          this.releases.reentryFoundHoldGone(owner, 'taken');
          waiting?.refused(reply);
          return { held: false, ttl: reply };
        }
        waiting?.took(lease, true);
        // A re-entry that found the lock free took it afresh: another owner may have held the lock
        // in between. The loss zeroes the owner's count: the hold taken now is its one.
        if (tookAfresh(reply)) this.releases.reentryFoundHoldGone(owner, 'free');
        this.held(owner, reply);
        return { held: true, sentAt };
      },
      // A wake-up means this client's turn came: one waiter tries again. A release of this
      // client may instead hand a waiter the lock directly, unless the hold must come from an
      // acquire (a fenced lock's token; syncReplicas's WAIT): such a waiter is never a
      // candidate, also for a release through a plain handle of the same name.
      sleep: this.handsOverLocally
        ? (entry, ms, stops, deadline, debt) => sleepAsCandidate(entry, this.context.clientId, parkingOf(), ms, stops, deadline, debt)
        : async (entry, ms, stops) => {
            await entry.untilReleased(ms, stops);
            return undefined;
          },
      // A waiter that stops after its client's wake-up came, before it asked, passes the turn on.
      giveUp: async () => queue.here()?.waiterGaveUp(),
      ...this.waitEvents(owner),
    };
    return waitFor(this.context, protocol, waitTime, signal, attemptDeadline);
  }

  protected async releaseCall(redis: ScriptedRedis, field: string, latch: string, last: boolean, retry = false): Promise<0 | 1 | null> {
    const { queue } = this;
    const entry = last ? this.context.pubsub.peek(queue.channel) : undefined;
    const local = entry?.local;
    // Not for a retry, whose latch may answer what its first call did: a handover to the waiter
    // that call claimed (told the outcome was unknown, it gives that hold back itself), which a
    // waiter claimed now would take for its own.
    const next = this.handsOverLocally && !retry ? local?.claimFirst() : undefined;
    // Waiters of this client that joined the lock's channel, parked or about to park.
    const stayInLine = next !== undefined || (entry !== undefined && entry.refCount > 0) ? 1 : 0;
    const mustYield = local?.runIsOver ? 1 : 0;
    // Written as the call is sent, with no await when the publish command is known: calls queued
    // while the connection was down go out in their order, and a give-back queued before a newer
    // acquire of the same owner, written after it (an await of a value yields), took its new
    // hold (a second reader's repro: two holders).
    const publishing = queuePublishing(this.context);
    const { publish, trust } = publishing instanceof Promise ? await publishing : publishing;
    const args = [...queue.keys, latch, field, RELEASE_LATCH_TTL_MS, publish, queue.wakePrefix, trust, this.context.queueTimeout, stayInLine, mustYield] as const;
    const sentAt = performance.now();
    let result: 0 | 1 | 2 | 3 | 4 | null | undefined;
    try {
      result = next ? await redis.rlock_release(...args, next.candidate.field, next.candidate.lease) : await redis.rlock_release(...args);
    } finally {
      // Handed over: the waiter holds the lock from the send of this call on. Sent to another
      // client while this one stays in line: the waiter sleeps on. Otherwise it asks again.
      // Rejected (ioredis gave up on it, its commandTimeout say): Redis may still run it and hand over.
      next?.deliver(result === 2 ? { sentAt } : result === 1 && stayInLine ? PARK_AGAIN : result === undefined ? OUTCOME_UNKNOWN : undefined);
    }
    // Looked up afresh: the entry seen before the reply may have been dropped meanwhile (its last
    // waiter left, the client closed), and a heartbeat restarted on its WaitingClient ran for good.
    const waiting = last ? queue.here() : undefined;
    if (result === 2 && !next) return 1; // a retry's replayed handover (above)
    if (result === 2) {
      local!.handedOver();
      waiting?.took(next!.candidate.lease, false);
      return 1;
    }
    if (result === 4) {
      // Another client's waiter was woken and none of this client's waits: this client's next
      // callers let it ask first (see acquireFor), or a task that locks again at once would take
      // the free lock back before that waiter's attempt arrives, again and again.
      passTurn(this.context, this.key);
      result = 1;
    }
    if (result === 1 || result === 3) {
      local?.endRun();
      waiting?.released(result === 1 && stayInLine === 1);
      // Nobody else waits: this client's own waiters go on (no message comes for them).
      // (A retry's replayed 3 may find the entry gone since: nobody of this client waits then.)
      if (result === 3 && !next) (entry ?? this.context.pubsub.peek(queue.channel))?.wakeOne();
      // Sent without waiters (stayInLine 0), the release left the client out of line; those
      // that joined while it was out parked without an attempt, the lock being here.
      else if (result === 1 && stayInLine === 0) queue.wakeOneJoined();
      return 1;
    }
    // Not held any more (lost, forced): whatever it was, it is not with this client now.
    if (result === null) waiting?.released(waiting.queued);
    return result;
  }

  /**
   * Whether a release may hand the lock to a parked waiter of this client without a new acquire,
   * and whether this handle's waiters park as candidates for that. Not with `syncReplicas`: a
   * hold handed over in the release script would skip the WAIT that vouches for an acquire (a
   * failover could then lose it); nor for a variant whose acquire script does more than take
   * the hash (FencedLock mints a token).
   */
  protected get handsOverLocally(): boolean {
    return this.context.syncReplicas === undefined;
  }

  /**
   * The acquire script and the keys it takes before ARGV = (lease, field, join, queueTimeout, reentry). It answers the PTTL (a
   * number) when someone else holds the lock, anything else (nil; a fenced lock's token) when the
   * owner got a hold: a variant (FencedLock) swaps in its own script and keeps the answer in `held`.
   */
  protected acquireScript(owner: LockOwner): { command: string; keys: string[] } {
    // Re-entering a fenced hold (a FencedLock's scope): the fenced script lengthens the token key
    // with the lock, which a longer lease than the fenced hold's would otherwise outlive.
    if (owner.fenced && owner.holds > 0) return { command: 'rlock_fencedLock_acquire', keys: [...this.queue.keys, this.tokenKey] };
    return { command: 'rlock_acquire', keys: this.queue.keys };
  }

  /** The owner got a hold; `reply` is what the acquire script answered. A fresh plain hold has no token. */
  protected held(owner: LockOwner, _reply: unknown): void {
    if (owner.holds === 0) owner.fenced = false;
  }

  /**
   * A hold with a fencing token is renewed with its token key (fencedLock/renew.lua), also when a
   * plain handle re-entered it and the watchdog keeps it for that handle.
   */
  protected override renewalTarget(owner: LockOwner): RenewalTarget {
    const target = super.renewalTarget(owner);
    return owner.fenced ? { ...target, renewCommand: 'rlock_fencedLock_renew', renewKeys: [this.key, this.tokenKey] } : target;
  }

  /**
   * @internal A plain lock (not a fenced hold) without `syncReplicas`, taken for a fork's own
   * owner: its single attempt is acquire-3.lua's without a queue entry, which acquireAll.lua
   * makes for several keys of one slot at once.
   */
  override togetherKey(): string | undefined {
    const { context } = this;
    if (this.constructor !== RLock || context.syncReplicas || scopedOwner(this.identity) !== undefined) return undefined;
    return `${context.clientId}/${context.isCluster ? calculateSlot(this.key) : ''}`;
  }

  /** @internal The key of the last fencing token minted for this lock name (made once per handle). */
  get tokenKey(): string {
    return (this.tokenKeyName ??= fenceKeyOf(this.context.keyPrefix, this.key));
  }

  private tokenKeyName: string | undefined;
}
