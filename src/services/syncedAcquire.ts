import { OUTCOME_UNKNOWN } from './bounds';
import { RedisCommandError } from '../errors';
import type { CommandBound, LockContext } from './LockContext';
import { databaseOf } from './database';
import { scriptOf } from './scripts';

/** The two commands of a synced acquire's pipeline. */
interface SyncPipeline {
  evalsha(...args: (string | number)[]): SyncPipeline;
  eval(...args: (string | number)[]): SyncPipeline;
  wait(replicas: number, timeout: number): SyncPipeline;
  exec(): Promise<[Error | null, unknown][] | null>;
}

/**
 * One acquire script call under `syncReplicas`: what it answered, and whether enough replicas
 * acknowledged it. A hold or permit counts only once they have it, or a failover could hand it
 * to one more owner than allowed. WAIT vouches only for the writes of the connection it runs on,
 * so it rides in the acquire's pipeline: ioredis sends a pipeline down one connection (on
 * Cluster, to the master of the key's slot, and its node connections never reconnect); on a
 * single connection a reconnect in between (the epoch moved) could have resent WAIT alone, so
 * that counts as unconfirmed. The caller gives an unconfirmed hold back and reports a refused
 * attempt, to be retried after the sync timeout.
 */
export async function syncedAcquire(
  context: LockContext,
  sync: { replicas: number; timeout: number },
  command: string,
  args: readonly (string | number)[],
  bound?: CommandBound,
): Promise<{ reply: unknown; confirmed: boolean; waitRefused?: RedisCommandError }> {
  const script = scriptOf(command, databaseOf(context.redis));
  const scriptArgs = script.numberOfKeys === undefined ? args : [script.numberOfKeys, ...args];
  const epoch = context.connectionEpoch();
  // A late answer is told as the acquire script's own reply, as without syncReplicas: what it
  // took goes back whatever WAIT said.
  const lateReply = bound?.lateReply;
  const callBound = lateReply ? { ...bound, lateReply: (late: unknown) => lateReply(late === OUTCOME_UNKNOWN ? late : (late as readonly unknown[])[0]) } : bound;
  const [reply, acked, waitError] = await context.command(
    'acquire',
    async (redis) => {
      // A raw EVALSHA, not the script command: on NOSCRIPT (a master just promoted, SCRIPT
      // FLUSH) ioredis would run the script again as EVAL *after* the pipeline, past the WAIT,
      // which then vouched for nothing of it. Refused here, it did not run: both go again, as EVAL.
      const send = (how: 'evalsha' | 'eval'): Promise<[Error | null, unknown][] | null> =>
        (redis.pipeline() as unknown as SyncPipeline)[how](how === 'evalsha' ? script.sha : script.lua, ...scriptArgs)
          .wait(sync.replicas, sync.timeout)
          .exec();
      let replies = await send('evalsha');
      if (replies?.[0]?.[0] && /NOSCRIPT/.test(replies[0][0].message)) replies = await send('eval');
      const [acquire, wait] = replies ?? [];
      if (!acquire || acquire[0]) throw acquire?.[0] ?? new Error('the pipeline was discarded');
      // A failed WAIT after a successful acquire is an unconfirmed hold, not a failed call; but
      // one Redis refuses (an ACL without +wait) will be refused again: the caller gives the hold
      // back and reports it, instead of retrying (its give-back's message woke it at once: a spin).
      return [acquire[1], wait && !wait[0] ? (wait[1] as number) : -1, wait?.[0] ?? undefined] as const;
    },
    callBound,
  );
  const waitRefused = waitError instanceof Error && /^[A-Z]+ /.test(waitError.message) ? new RedisCommandError('WAIT', waitError) : undefined;
  return { reply, confirmed: acked >= sync.replicas && epoch === context.connectionEpoch(), waitRefused };
}
