import { inspect } from 'node:util';

/**
 * Hides the password of URLs in `text` (`redis://user:secret@host` → `redis://user:***@host`;
 * userinfo without a `:` is all password to Redis, so it goes entirely) before the text reaches an
 * error message or the CLI's output. Greedy up to the last `@` before the path, as URL parsers read it.
 */
export function redactUrls(text: string): string {
  return text
    .replace(/\/\/([^/\s]*)@/g, (_, userinfo: string) => {
      const colon = userinfo.indexOf(':');
      return colon < 0 ? '//***@' : `//${userinfo.slice(0, colon)}:***@`;
    })
    // ioredis also reads options from the query: `redis://host?password=secret`.
    .replace(/([?&](?:password|pass|pwd|secret|token)=)[^&#\s]*/gi, '$1***');
}

/** Commands whose arguments carry credentials. */
const SECRET_COMMANDS = new Set(['auth', 'hello', 'migrate']);

/**
 * ioredis attaches the failed command to its errors (`error.command = { name, args }`): for AUTH
 * that is the username and password, printed by every logger that shows an error's properties.
 * Blanks those arguments in `error` and its causes, in place (the same object may already be in
 * other hands), and returns `error`.
 */
export function redactError<T>(error: T): T {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const command = (current as { command?: { name?: unknown; args?: unknown } }).command;
    if (command && typeof command.name === 'string' && SECRET_COMMANDS.has(command.name.toLowerCase()) && Array.isArray(command.args)) {
      command.args = command.args.map(() => '(redacted)');
    }
    current = current.cause;
  }
  return error;
}

/**
 * A URL to print: its password hidden, its query and fragment left out (ioredis reads options,
 * a password among them, from the query, under names no list can foresee); not shown at all if
 * an `@` is left that redactUrls could not place.
 */
export function displayUrl(url: string): string {
  // Redacted before the query is cut: a password with a `?` or `#` in it (not encoded) would
  // otherwise lose its `@` to the cut, and its start would show.
  const shown = redactUrls(url).replace(/[?#][\s\S]*$/, '');
  // Any `@` beyond the one redacted: a password with an `@` and a `/` in it (not encoded) was cut
  // at the `/`, and what followed its first `@` would show (as the host, too).
  return shown.replace(/\/\/([^/\s]*:)?\*\*\*@/, '//').includes('@') ? '(not shown: it may hold a password)' : shown;
}

/** `util.inspect` shows `label` for `object`, and `JSON.stringify` leaves it out. */
export function hideFromLogs(object: object, label: string): void {
  Object.defineProperty(object, inspect.custom, { value: () => label });
  Object.defineProperty(object, 'toJSON', { value: () => undefined });
}
