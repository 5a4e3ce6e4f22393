import { OUTCOME_UNKNOWN } from '../services/bounds';
import { ExclusiveLock, type ForceUnlockResult } from '../core/ExclusiveLock';
import { forceWhileRefused, leaveWhileRefused, waitFor } from '../core/waitLoop';
import type { Hold } from '../services/Hold';
import { clientNames, type LockInfo, type QueuedWaiter } from '../introspection';
import { grantChannelPrefixOf, queueExpiryKeyOf, queueKeyOf, RELEASE_LATCH_TTL_MS } from '../names';
import { type LockContext, queuePublishing } from '../services/LockContext';
import type { ChannelEntry, EntryKeeper } from '../services/ChannelEntry';
import { readValues } from '../services/database';
import type { LockOwner } from '../services/LockOwner';
import { turnBlocked } from '../services/ownerTurns';
import type { Link } from '../services/LinkedList';
import type { QueuedEntry } from '../services/QueueHeartbeat';
import type { ScriptedRedis } from '../services/scripts';

/** Past the PTTL a heartbeat answered, before the waiter asks: the PTTL was read after the beat's send. */
const LEASE_END_MARGIN_MS = 5;

const MEMBER = /^(\d+):([\w-]{21}):([\w-]{21})$/;

/**
 * Keeps a grant channel subscribed until the event loop's next turn after its last waiter left:
 * an owner that releases and at once locks again (a loop, a queue of jobs) finds it subscribed.
 * Without it, a grant made in the release's reply lets that waiter leave the channel before the
 * releasing owner comes back, and every acquisition paid an UNSUBSCRIBE and a SUBSCRIBE. A grant
 * message that comes meanwhile is for nobody here (its waiter's leave passes the grant on).
 */
const LINGER_ONE_TURN: EntryKeeper = {
  lingers: (drop) => {
    setImmediate(drop);
    return true;
  },
  joined: () => undefined,
  heard: () => undefined,
  unheard: () => undefined,
  dropped: () => undefined,
};

/**
 * A fair lock (Redisson's RFairLock, seed 003): the same reentrant hash as `RLock`, plus a queue
 * in Redis, so owners are served first come, first served across all processes. A release hands
 * the lock straight to the first live waiter (it becomes the owner inside the release script) and
 * tells only that waiter's client, on a channel of its own: no other process wakes, and the new
 * owner needs no further round trip. See docs/design.md, "The fair lock".
 */
export class FairLock extends ExclusiveLock {
  /** @internal Use `client.getFairLock(name)`. */
  constructor(context: LockContext, name: unknown) {
    super(context, name);
  }

  protected async forceUnlockCall(holder: string): Promise<ForceUnlockResult> {
    const { publish, trust } = await queuePublishing(this.context);
    const [removed, ...holders] = await forceWhileRefused(this.context, (redis) =>
      redis.rlock_fairLock_forceUnlock(this.key, this.names.queue, this.names.expiry, this.context.queueTimeout, this.names.grantPrefix, publish, trust, holder),
    );
    return this.forceUnlockAnswered(removed, holders);
  }

  /** Holders, TTL, and the queue in order (who waits, with their leases and how long their entries live). */
  async inspect(): Promise<LockInfo> {
    this.context.assertOpen();
    const { key, name } = this;
    return this.context.command('inspect', async (redis) => {
      const [hash, ttl, members, deadlines, time] = (await readValues(redis, (reads) => reads.hgetall(key).pttl(key).zrange(this.names.queue, 0, -1).zrange(this.names.expiry, 0, -1, 'WITHSCORES').time())) as [Record<string, string>, number, string[], string[], [string, string]];
      const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const deadlineOf = new Map<string, number>();
      for (let i = 0; i < deadlines.length; i += 2) deadlineOf.set(deadlines[i]!, Number(deadlines[i + 1]));
      const queue: QueuedWaiter[] = [];
      for (const member of members) {
        const match = MEMBER.exec(member);
        const deadline = deadlineOf.get(member);
        // An entry past its deadline is dead: the next script call drops it.
        if (!match || deadline === undefined || deadline <= now) continue;
        queue.push({ clientId: match[2]!, ownerId: match[3]!, leaseMs: Number(match[1]), expiresInMs: deadline - now, clientName: undefined });
      }
      const holders = Object.entries(hash).map(([field, count]) => {
        const [clientId = '', ownerId = ''] = field.split(':');
        return { clientId, ownerId, holdCount: Number(count), clientName: undefined as string | undefined };
      });
      if (holders.length + queue.length > 0) {
        const names = await clientNames(redis);
        for (const party of [...holders, ...queue]) party.clientName = names.get(party.clientId);
      }
      const waitingClients = new Set(queue.map((waiter) => waiter.clientId)).size;
      return { name, key, locked: holders.length > 0, holders, ttl, waitingClients, queue };
    });
  }

  /**
   * Two acquires of one owner at once (re-entries started together inside a scope) would share
   * one queue entry and one grant, and both book its one hold: they go one after the other, the
   * second counting up the hold the first took (see ownerTurns).
   */
  protected override get acquiresInTurn(): boolean {
    return true;
  }

  protected async acquireFor(owner: LockOwner, leaseTime: number | undefined, waitTime: number, signal?: AbortSignal, attemptDeadline?: number): Promise<Hold | undefined> {
    const { key, context } = this;
    const { queueTimeout } = context;
    const lease = leaseTime ?? context.watchdogTimeout;
    const field = this.field(owner);
    const member = `${lease}:${field}`;
    const { queue, expiry, grantPrefix, grantChannel: channel } = this.names;
    // Awaited even when known: an acquire asked for as close() starts is then never sent
    // (faults/08-close-in-flight.test.ts "an acquire a primitive would send only after close()").
    const { publish, trust } = await queuePublishing(this.context);
    // A re-entry counts up the owner's hold, but only if it finds one on its first attempt:
    // once an attempt found none (the hold was lost) and queued, a field of its own is a grant,
    // taken as is (1 hold), as its message would give it.
    const holding = owner.holds > 0;
    // Whether an attempt of this wait put the owner in the queue.
    let queued = false;
    // The latest attempt's send time here and its run time in Redis (µs): a grant stamped G
    // happened here no sooner than `sentAt + (G - redisMicros)`, whatever its message's delay.
    let anchor: { sentAt: number; redisMicros: number } | undefined;
    // Redis's time (µs) of the latest attempt that found this owner not granted: a grant stamped
    // no later was made before it, so it is gone by now (run out, or passed on), whenever its
    // message comes (the soak had one published as Redis froze and read after the waiter queued
    // again: the waiter took it beside the next owner).
    let notGrantedAt = -Infinity;
    let entry: ChannelEntry | undefined;
    let beat: Link<QueuedEntry> | undefined;
    /** Wakes this waiter when the lock runs out unless renewed (by the latest heartbeat's PTTL). */
    let leaseEnd: NodeJS.Timeout | undefined;
    const events = this.waitEvents(owner);
    try {
      return await waitFor(
        context,
        {
          channel,
          attempt: async (listening, bound) => {
            if (listening && listening !== entry) {
              // Registered before the request to queue: the grant can beat its reply.
              entry?.grants.forgetGrant(field);
              entry = listening;
              entry.keeper ??= LINGER_ONE_TURN;
              entry.grants.expectGrant(field);
            }
            const sentAt = performance.now();
            if (listening) listening.grants.queuing(field, sentAt);
            const countsUp = holding && notGrantedAt === -Infinity;
            const reply = await context.command(
              'acquire',
              (redis) => redis.rlock_fairLock_acquire(key, queue, expiry, member, listening ? 1 : 0, countsUp ? 1 : 0, queueTimeout, grantPrefix, publish, trust),
              {
                // The wait's bound, copied field by field (a spread cost more per attempt).
                deadline: bound.deadline,
                signals: bound.signals,
                cutShort: bound.cutShort,
                idempotent: bound.idempotent,
                // Answered after the wait ended (Redis frozen, a silent connection): a hold taken
                // for the caller that is gone is given back, a queue entry leaves (a grant that
                // reached it is passed on), instead of keeping the lock or the queue's head. But
                // an acquire that took the owner's field as is (not counted up) leaves it to a
                // newer acquire of the same owner, sent after this one on the same connection:
                // that one found the field and took it as its own hold (or queued under it). One
                // still waiting its turn (ownerTurns) counts: it is sent after this one too.
                lateReply: (late) => {
                  const newer = owner.pending > 0 || owner.holds > 0;
                  const giveBack = countsUp || !newer ? () => this.releases.giveBackUnbooked(owner) : undefined;
                  const leave = listening && !newer ? () => this.leaveQueue(owner, member) : undefined;
                  // It may have taken the lock or queued (or neither): undone for a single-use owner
                  // that books nothing only (see RLock's attempt).
                  if (late === OUTCOME_UNKNOWN) return owner.undoesUnknown ? (giveBack?.() ?? Promise.resolve()).then(() => leave?.()) : undefined;
                  return late === null || late === 0 ? giveBack?.() : leave?.();
                },
              },
            );
            if (reply === null) return { held: true, sentAt };
            if (reply === 0) {
              // A re-entry that found no hold of its own but the lock free took it afresh: the
              // hold it entered was lost (another owner may have held the lock in between), and
              // its scope is told now, not at the inner release, which would also free the lock
              // under the outer scope. The loss zeroes the owner's count: the hold taken now is its one.
              this.releases.holdsLost(owner, 'a re-entry found its hold gone (the lock was free: taken afresh)');
              return { held: true, sentAt };
            }
            const [ttl, redisMicros] = reply;
            // A re-entry that found no hold of its own: the hold it entered was lost (run out,
            // force-unlocked, a restart), and its scope is told now, not when a tick finds out
            // (a grant to this field from now on would pass for the lost hold at that tick).
            if (countsUp) this.releases.holdsLost(owner, 'a re-entry found its hold gone');
            notGrantedAt = Math.max(notGrantedAt, redisMicros);
            if (!anchor || redisMicros > anchor.redisMicros) anchor = { sentAt, redisMicros };
            if (listening) {
              queued = true;
              if (!beat) {
                beat = context.heartbeat.add({
                  lockKey: key,
                  queueKey: queue,
                  expiryKey: expiry,
                  member,
                  refreshed: (at, stillQueued, heldForMs) => {
                    // Granted (its message lost), dropped, or the lock ran out unreleased: ask again now.
                    clearTimeout(leaseEnd);
                    if (!stillQueued) {
                      entry?.wakeAll();
                      return;
                    }
                    // Ask when the lock runs out unless renewed, not a heartbeat later: a grant to a
                    // process that cannot take it (stopped; killed before Redis saw its subscription
                    // go) lives its lease, and the next waiter in line took it up to a third of
                    // the queue timeout after that.
                    if (heldForMs !== undefined) leaseEnd = setTimeout(() => entry?.grants.wakeExpecting(field), Math.max(0, at + heldForMs + LEASE_END_MARGIN_MS - performance.now())).unref();
                  },
                });
              }
            }
            // Grants come by message; the bound only covers a holder that vanished without one.
            return { held: false, ttl };
          },
          sleep: async (woken, ms, stops) => {
            // (woken is the entry of the last attempt: waitFor keeps one entry for the whole wait.)
            const grant = await woken.grants.untilGranted(field, ms, stops);
            if (!grant || !queued || anchor === undefined) return undefined;
            // Made before an attempt found this owner not granted: stale. Asking again takes a
            // grant that is still there (as is), and queues the owner again otherwise. So does a
            // grant whose lease is not known (a version that did not send it).
            if (grant.redisMicros === undefined || grant.redisMicros <= notGrantedAt || grant.ttl === undefined) return undefined;
            // When Redis granted it, on this process's clock at the earliest (less 0.1 % of the
            // time since the anchor, for the two clocks' rates), and when Redis may expire it: its
            // lease is min(lease, the granter's queueTimeout), which need not be this client's.
            const grantedAt = anchor.sentAt + ((grant.redisMicros - anchor.redisMicros) / 1000) * 0.999;
            const now = performance.now();
            // Later than now: Redis's clock jumped forward (a step, a failover to a master whose
            // clock is ahead), and the date says nothing: confirmed by an attempt.
            if (grantedAt > now) return undefined;
            const expiresAt = grantedAt + grant.ttl;
            // A grant that may already be half gone (its message came late), or shorter than an
            // explicit lease, is confirmed by one more attempt, which takes it with the full lease.
            if ((leaseTime !== undefined && leaseTime > grant.ttl) || expiresAt - now < grant.ttl / 2) return undefined;
            return { sentAt: grantedAt, expiresAt };
          },
          giveUp: async () => {
            if (!queued) return;
            await this.leaveQueue(owner, member).catch(() => undefined); // the entry then runs out after queueTimeout
          },
          waitStarted: () => {
            // The owner's single attempts in line behind this wait would find the lock taken too.
            turnBlocked(owner);
            events.waitStarted?.();
          },
          waitEnded: events.waitEnded,
        },
        waitTime,
        signal,
        attemptDeadline,
      );
    } finally {
      clearTimeout(leaseEnd);
      entry?.grants.forgetGrant(field);
      context.heartbeat.remove(beat);
    }
  }

  /** Takes `member` (of `owner`) out of the queue; a grant that reached it meanwhile is passed on. Rides out a refusal (see `leaveWhileRefused`). */
  private async leaveQueue(owner: LockOwner, member: string): Promise<void> {
    const { key, context, names } = this;
    // No await when known: queued in the order asked (see RLock's releaseCall).
    const publishing = queuePublishing(context);
    const { publish, trust } = publishing instanceof Promise ? await publishing : publishing;
    await leaveWhileRefused(context, owner, (redis) => redis.rlock_fairLock_leave(key, names.queue, names.expiry, member, context.queueTimeout, names.grantPrefix, publish, trust));
  }

  protected async releaseCall(redis: ScriptedRedis, field: string, latch: string): Promise<0 | 1 | null> {
    // No local handoff here: the queue decides who is next, across every process. When the next
    // is a waiter of this client, the script grants it without a message and answers its field:
    // the waiter is told here, a pub/sub hop sooner.
    const { key, context, names } = this;
    // Written as sent, no await when known (see RLock's releaseCall).
    const publishing = queuePublishing(context);
    const { publish, trust } = publishing instanceof Promise ? await publishing : publishing;
    const sentAt = performance.now();
    const result = await redis.rlock_fairLock_release(key, names.queue, names.expiry, latch, field, RELEASE_LATCH_TTL_MS, context.queueTimeout, names.grantPrefix, publish, trust, context.clientId);
    if (typeof result !== 'string') return result;
    context.pubsub.peek(names.grantChannel)?.grants.grantFromReply(result, sentAt);
    return 1;
  }

  /** The queue, its deadlines, the grant channels' prefix and this client's grant channel (made once per handle). */
  private get names(): FairLockNames {
    if (this.namesMade) return this.namesMade;
    const { keyPrefix, clientId } = this.context;
    const grantPrefix = grantChannelPrefixOf(keyPrefix, this.key);
    return (this.namesMade = { queue: queueKeyOf(keyPrefix, this.key), expiry: queueExpiryKeyOf(keyPrefix, this.key), grantPrefix, grantChannel: grantPrefix + clientId });
  }

  private namesMade: FairLockNames | undefined;
}

interface FairLockNames {
  readonly queue: string;
  readonly expiry: string;
  readonly grantPrefix: string;
  readonly grantChannel: string;
}
