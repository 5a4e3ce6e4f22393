// The Redis binaries the demo and the tests run: present, installed here with apt-get (root on
// Debian/Ubuntu), or one line saying which package to install. Used by jest's globalSetup and
// `npm run demo`, so that a fresh clone needs nothing but Node: `npm ci && npm test`.
// Run alone: `npx tsx scripts/ensureRedis.ts [--topologies]`.
import { execFileSync } from 'node:child_process';

/** Each binary and the Debian/Ubuntu package that ships it. */
const PACKAGES = {
  'redis-server': 'redis-server',
  'redis-cli': 'redis-tools',
  'redis-sentinel': 'redis-sentinel',
} as const;

export type RedisBinary = keyof typeof PACKAGES;

/** What the test suite runs: private servers, and the Cluster (redis-cli) and Sentinel groups. */
export const TEST_BINARIES: RedisBinary[] = ['redis-server', 'redis-cli', 'redis-sentinel'];

/** A missing binary that could not be installed here. */
export class RedisMissingError extends Error {}

function onPath(binary: string): boolean {
  try {
    execFileSync(binary, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes sure every binary in `binaries` is on the PATH. Missing ones are installed with apt-get
 * when this process is root and apt-get exists (unless RLOCK_NO_INSTALL is set); otherwise this
 * throws a RedisMissingError whose message is the one line to show.
 */
export function ensureRedis(binaries: RedisBinary[], log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): void {
  let missing = binaries.filter((binary) => !onPath(binary));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((binary) => PACKAGES[binary]))];
  const command = `apt-get install -y ${packages.join(' ')}`;
  const root = process.getuid?.() === 0;
  if (root && !process.env.RLOCK_NO_INSTALL && onPath('apt-get')) {
    log(`rlock: ${missing.join(', ')} not found; running apt-get update && ${command}`);
    try {
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      execFileSync('apt-get', ['update'], { stdio: ['ignore', 'ignore', 'inherit'], env });
      execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...packages], { stdio: ['ignore', 'ignore', 'inherit'], env });
    } catch {
      // reported below, with what is still missing
    }
    missing = binaries.filter((binary) => !onPath(binary));
    if (missing.length === 0) return;
  }
  const how = root ? command : `sudo ${command}`;
  throw new RedisMissingError(
    `rlock: ${missing.join(', ')} not found on the PATH; install the package${packages.length > 1 ? 's' : ''} ${packages.join(' ')} (\`${how}\` on Debian/Ubuntu, or Redis 7 from redis.io) and run again`,
  );
}

if (require.main === module) {
  try {
    ensureRedis(process.argv.includes('--topologies') ? TEST_BINARIES : ['redis-server']);
  } catch (error) {
    if (!(error instanceof RedisMissingError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
  }
}
