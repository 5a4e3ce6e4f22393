import { RedisCommandError, TRANSIENT_CODES } from '../errors';
import type { CommandRunner } from './CommandRunner';
import type { PublishCommand } from './scripts';

/**
 * How a client's releases are published: sharded (`SPUBLISH`, to the lock's shard only) on a
 * Cluster whose servers know it (Redis >= 7), classic `PUBLISH` elsewhere.
 */
export class ShardedPublish {
  private answer: Promise<PublishCommand> | undefined;
  /** The Cluster's answer once it came (a failed probe is asked again, so it is not kept). */
  private knownAnswer: PublishCommand | undefined;

  constructor(
    private readonly isCluster: boolean,
    private readonly commands: CommandRunner,
  ) {}

  /**
   * The command to publish with. A call that could not ask publishes classic this once; the
   * subscriber waits for the answer (see `learn`).
   */
  command(): Promise<PublishCommand> {
    // Also when close() settled the question: a give-back waiting on it must still be sent.
    return this.learn().catch(() => 'publish' as PublishCommand);
  }

  /** The answer once known (at once off a Cluster). */
  known(): PublishCommand | undefined {
    return this.isCluster ? this.knownAnswer : 'publish';
  }

  /**
   * The answer, asked once. Rejects when Redis could not answer (a frozen or unreachable node):
   * asked again next time, and the subscriber asks until it knows, since one made on a guess
   * stayed deaf for good to every release published the other way (`13-cluster-down.test.ts`
   * "a client whose first COMMAND INFO a frozen master left unanswered ..."). A refusal that
   * will not change (an ACL without `command|info`, a server without COMMAND) is an answer:
   * classic, for the releases and the subscriber alike.
   */
  learn(): Promise<PublishCommand> {
    if (this.answer) return this.answer;
    if (!this.isCluster) return (this.answer = Promise.resolve('publish'));
    // A call like any other (bounded while the connection is down, settled by close()): sent
    // straight to ioredis it waited in the Cluster's offline queue, and the call that asked with it,
    // whatever its waitTime or signal, for as long as the Cluster was unreachable.
    this.answer = this.commands.run('publishCommand', (redis) => redis.call('COMMAND', 'INFO', 'SPUBLISH')).then(
      (info) => (this.knownAnswer = Array.isArray(info) && info[0] ? 'spublish' : 'publish'),
      (error: unknown) => {
        if (refusedForGood(error instanceof RedisCommandError ? error.cause : error)) return (this.knownAnswer = 'publish');
        this.answer = undefined;
        throw error;
      },
    );
    return this.answer;
  }
}

/**
 * Redis's refusal of COMMAND INFO that asking again will not change (no permission, no such
 * command or subcommand, a server that implements it otherwise): any error reply but those of a
 * server that is busy or changing (loading, failing over, a Cluster in flux).
 */
function refusedForGood(error: unknown): boolean {
  if ((error as { name?: unknown } | undefined)?.name !== 'ReplyError') return false;
  const code = /^([A-Z][A-Z_]+) /.exec(error instanceof Error ? error.message : '')?.[1];
  // BUSY too: a script running long answers every other call so until it ends.
  return code === undefined || (code !== 'BUSY' && !TRANSIENT_CODES.includes(code));
}
