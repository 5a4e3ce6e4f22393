import { ensureRedis, RedisMissingError, TEST_BINARIES } from '../../scripts/ensureRedis';

/**
 * Every test file starts private redis-server processes (even with REDIS_URL set: the fault
 * tests kill and pause their own), the topology tests also redis-cli and redis-sentinel. A
 * missing one is installed here (root + apt-get) or stops the run with one line naming the
 * package, instead of a wall of failed tests.
 */
export default async function globalSetup(): Promise<void> {
  try {
    ensureRedis(TEST_BINARIES);
  } catch (error) {
    if (!(error instanceof RedisMissingError)) throw error;
    process.stderr.write(`\n${error.message}\n`);
    process.exit(1);
  }
}
