// The channels a primitive's waiters listen on, as PUBSUB CHANNELS patterns: the harness checks
// that none is left subscribed once the run is over.
import { grantChannelPrefixOf, wakeChannelPrefixOf } from '../../../src/names';

/** `text` as a literal in a PUBSUB CHANNELS / SCAN MATCH pattern. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Every channel under `prefixOf`'s prefix: one per client (RLock's wake-ups, the fair lock's grants). */
export const perClient =
  (prefixOf: (keyPrefix: string, key: string) => string) =>
  (keyPrefix: string, key: string): string =>
    `${globEscape(prefixOf(keyPrefix, key))}*`;

/** The one channel `channelOf` names. */
export const oneChannel =
  (channelOf: (keyPrefix: string, key: string) => string) =>
  (keyPrefix: string, key: string): string =>
    globEscape(channelOf(keyPrefix, key));

export const lockWakeChannels = perClient(wakeChannelPrefixOf);
export const fairGrantChannels = perClient(grantChannelPrefixOf);
