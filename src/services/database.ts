import type { ChainableCommander, Cluster, Redis } from 'ioredis';

/**
 * The database a connection's calls are meant for: the one its options name (a URL's path, `db`);
 * always 0 on a Cluster. A user's own `redis.select()` on a shared connection is not followed.
 *
 * ioredis sends its own SELECT after each (re)connect, but a refusal (an ACL without `+select`,
 * an index past `databases`, BUSY while another client's script runs long) only emits an error,
 * and every call after it ran in database 0: a lock taken there beside another client's lock of
 * the same name in the right database. So every call of the library names its database itself
 * (`selectingScript`, `inDatabase`): it runs there, or fails with Redis's refusal, and nothing is
 * held back waiting for ioredis's SELECT to be confirmed (`security.test.ts`, "a database Redis
 * refuses").
 */
export function databaseOf(redis: Redis | Cluster): number {
  return redis.isCluster ? 0 : ((redis as Redis).options.db ?? 0);
}

/**
 * A script that selects database `db` before it runs: a SELECT inside a script changes only that
 * script's database, and a refused one answers an error before anything is touched. Covers the
 * watchdog's renewals and what ioredis resends after a reconnect as well. Nothing is prepended for
 * database 0, the default (no SELECT is sent then either).
 */
export function selectingScript(lua: string, db: number): string {
  if (db === 0) return lua;
  return (
    `local rlock_selected = redis.pcall('SELECT', ${db})\n` +
    `if type(rlock_selected) == 'table' and rlock_selected.err then return redis.error_reply('ERR cannot select database ${db} (' .. rlock_selected.err .. ')') end\n` +
    lua
  );
}

/** One reply of a pipeline: its error, or its value. */
export type PipelineReply = [error: Error | null, value: unknown];

/**
 * Plain commands (no script: reads, SCAN, a latch's DEL) sent as one pipeline that starts with a
 * SELECT of the connection's database when it is not 0: Redis runs them there, or the SELECT's
 * refusal is thrown and their replies (from database 0) are dropped. On a connection passed in
 * whose user selected another database since (`redis.select()`), the pipeline selects that one
 * again after them, so that the user's own commands stay where they were. The replies are the
 * commands' own, in order; an error of one of them is left to the caller.
 */
export async function inDatabase(redis: Redis | Cluster, build: (pipeline: ChainableCommander) => unknown): Promise<PipelineReply[]> {
  const db = databaseOf(redis);
  // ioredis's record of the database it last sent a SELECT for (its own or the user's).
  const usersDb = (redis as unknown as { condition?: { select?: unknown } }).condition?.select;
  const restore = db !== 0 && typeof usersDb === 'number' && usersDb !== db ? usersDb : undefined;
  const pipeline = redis.pipeline();
  if (db !== 0) pipeline.select(db);
  build(pipeline);
  if (restore !== undefined) pipeline.select(restore);
  const replies = await pipeline.exec();
  if (!replies) throw new Error('pipeline gave no replies');
  const [selectError] = db !== 0 ? (replies[0] ?? [new Error('pipeline gave no replies')]) : [null];
  if (selectError) throw Object.assign(new Error(`ERR cannot select database ${db} (${selectError.message})`), { name: 'ReplyError' });
  return replies.slice(db !== 0 ? 1 : 0, restore === undefined ? undefined : -1);
}

/** `inDatabase`, the values only: the first read that failed throws its error. */
export async function readValues(redis: Redis | Cluster, build: (pipeline: ChainableCommander) => unknown): Promise<unknown[]> {
  const replies = await inDatabase(redis, build);
  const failed = replies.find(([error]) => error);
  if (failed) throw failed[0];
  return replies.map(([, value]) => value);
}

/** One plain read in the connection's database (`inDatabase`). */
export async function readOne<T = unknown>(redis: Redis | Cluster, build: (pipeline: ChainableCommander) => unknown): Promise<T> {
  const [value] = await readValues(redis, build);
  return value as T;
}
