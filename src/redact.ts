/**
 * Hides the password of URLs in `text` (`redis://user:secret@host` → `redis://user:***@host`;
 * userinfo without a `:` is all password to Redis, so it goes entirely) before the text reaches an
 * error message or the CLI's output. Greedy up to the last `@` before the path, as URL parsers read it.
 */
export function redactUrls(text: string): string {
  return text.replace(/\/\/([^/\s]*)@/g, (_, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon < 0 ? '//***@' : `//${userinfo.slice(0, colon)}:***@`;
  });
}
