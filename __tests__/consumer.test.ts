// The package as a user gets it: `npm pack`ed, unpacked into a fresh project beside ioredis 5 or
// 6, type-checked under the common module settings (nodenext ESM and CJS, bundler, node10) with
// skipLibCheck off, and run (import and require) against a private redis-server.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { usePrivateRedis } from './helpers/privateRedis';

const redis = usePrivateRedis();
const root = join(__dirname, '..');
let work: string;
let tarball: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'rlock-consumer-'));
  // Built into a copy, not dist/: other test files run dist/cli.js meanwhile.
  const pkg = join(work, 'pkg');
  mkdirSync(pkg);
  for (const file of ['package.json', 'README.md', 'LICENSE', 'docs']) cpSync(join(root, file), join(pkg, file), { recursive: true });
  // NODE_PATH: the build loads the built index.js to list its exports; from the copy, its
  // dependencies are found only through it.
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs'), join(pkg, 'dist')], {
    stdio: 'ignore',
    env: { ...process.env, NODE_PATH: join(root, 'node_modules') },
  });
  const name = execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', work], { cwd: pkg, encoding: 'utf8' }).trim().split('\n').pop()!;
  tarball = join(work, name);
  mkdirSync(join(work, 'unpacked'));
  execFileSync('tar', ['-xzf', tarball, '-C', join(work, 'unpacked')]);
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A fresh project with the tarball unpacked in node_modules/rlock and `ioredis` pointing at `ioredisDir`. */
function consumer(label: string, ioredisDir: string): string {
  const dir = join(work, label);
  const modules = join(dir, 'node_modules');
  mkdirSync(join(modules, '@types'), { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', dir]);
  cpSync(join(dir, 'package'), join(modules, 'rlock'), { recursive: true });
  rmSync(join(dir, 'package'), { recursive: true });
  symlinkSync(ioredisDir, join(modules, 'ioredis'));
  symlinkSync(join(root, 'node_modules', '@types', 'node'), join(modules, '@types', 'node'));
  const { dependencies } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const dependency of Object.keys(dependencies)) symlinkSync(join(root, 'node_modules', dependency), join(modules, dependency));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `consumer-${label}`, private: true }));
  return dir;
}

/** What a user writes; `rlock_acquire` must not be on their ioredis client's type. */
const USE = `
const redis = new Redis({ lazyConnect: true });
const client = new LockClient({ redis, keyPrefix: 'app:' });
const lock = client.getLock('order:1');
const held: Promise<boolean> = lock.tryLock({ waitTime: 10 });
const done: Promise<number> = lock.withLock((signal: AbortSignal) => (signal.aborted ? 0 : 1));
const code = (error: unknown): string | undefined => (error instanceof RedisCommandError ? error.code : undefined);
// @ts-expect-error rlock's script commands are not part of ioredis's types
redis.rlock_acquire;
export { client, code, done };
`;

/**
 * Source files parsed once for all the checks below (lib, @types/node, ioredis, rlock): a tsc
 * process per check parses them again and takes seconds each.
 */
const parsed = new Map<string, ts.SourceFile | undefined>();

/** tsc's diagnostics for `source` in `dir`, compiled with `options` (as in a tsconfig.json). */
function typeCheck(dir: string, file: string, source: string, options: Record<string, unknown>): string {
  writeFileSync(join(dir, file), source);
  const { options: compilerOptions, errors } = ts.convertCompilerOptionsFromJson({ strict: true, noEmit: true, skipLibCheck: false, types: ['node'], ...options }, dir);
  expect(errors).toEqual([]);
  const host = ts.createCompilerHost(compilerOptions);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, version, ...rest) => {
    const settings = typeof version === 'object' ? `${version.languageVersion}:${version.impliedNodeFormat}` : String(version);
    const key = `${fileName}|${settings}`;
    if (fileName.endsWith(file)) return read(fileName, version, ...rest);
    if (!parsed.has(key)) parsed.set(key, read(fileName, version, ...rest));
    return parsed.get(key);
  };
  const program = ts.createProgram([join(dir, file)], compilerOptions, host);
  // Only rlock's declarations and the user's file are checked (as skipLibCheck: false would
  // check them); checking @types/node and ioredis too costs seconds and is not ours to fix.
  const checked = program.getSourceFiles().filter((sf) => sf.fileName.includes('/node_modules/rlock/') || sf.fileName.endsWith(file));
  expect(checked.length).toBeGreaterThan(5);
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...checked.flatMap((sf) => [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]),
  ];
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: () => dir,
    getNewLine: () => '\n',
  });
}

/** tsc's complaints about rlock's declarations or the consumer's file (ioredis's own are not ours to fix). */
function ours(output: string): string[] {
  return output.split('\n').filter((line) => /error TS/.test(line) && !/node_modules\/(ioredis|@ioredis|@types)\//.test(line));
}

const IMPORT = `import { LockClient, RedisCommandError } from 'rlock';\nimport { Redis } from 'ioredis';\n`;
const REQUIRE = `import rlock = require('rlock');\nimport ioredis = require('ioredis');\nconst { LockClient, RedisCommandError } = rlock;\nconst { Redis } = ioredis;\n`;

const SETTINGS: [name: string, file: string, head: string, options: Record<string, unknown>][] = [
  ['nodenext, ESM (.mts)', 'use.mts', IMPORT, { module: 'nodenext', moduleResolution: 'nodenext' }],
  ['nodenext, CJS (.cts)', 'use.cts', REQUIRE, { module: 'nodenext', moduleResolution: 'nodenext' }],
  ['bundler, default target', 'use.ts', IMPORT, { module: 'esnext', moduleResolution: 'bundler' }],
  ['node10, CJS, default target', 'use.ts', IMPORT, { module: 'commonjs', moduleResolution: 'node10' }],
];

// Every setting beside ioredis 6 (the suite itself runs on 5); beside 5, one ESM and one CJS
// setting show the peer range holds, and keep this file to a few seconds.
describe.each([
  ['ioredis 5', join(root, 'node_modules', 'ioredis'), [SETTINGS[0]!, SETTINGS[3]!]],
  ['ioredis 6', join(root, 'node_modules', 'ioredis6'), SETTINGS],
])('beside %s', (label, ioredisDir, settings) => {
  let dir: string;
  beforeAll(() => {
    dir = consumer(label.replace(' ', ''), ioredisDir);
  });

  test.each(settings)('type-checks under %s', (_name, file, head, options) => {
    expect(ours(typeCheck(dir, file, head + USE, options))).toEqual([]);
  }, 60_000);

  test('runs: import and require share one library; a lock is taken, waited for (pub/sub) and handed over', () => {
    const esm = `import rlock, { LockClient } from 'rlock';
import { createRequire } from 'node:module';
const cjs = createRequire(import.meta.url)('rlock');
if (cjs.LockClient !== LockClient || rlock.LockClient !== LockClient) throw new Error('two copies');
const client = new LockClient({ redis: process.argv[2] });
const other = new LockClient({ redis: process.argv[2] });
const lock = client.getLock('consumer');
const held = await lock.tryLock();
const ttl = await lock.remainTimeToLive();
// A waiter on another client parks on the release channel (pub/sub) and is woken by unlock().
const waited = other.getLock('consumer').withLock(async () => (await other.inspect('consumer')).holders.length, { waitTime: 10_000 });
while (other.stats.waiters === 0) await new Promise((resolve) => setTimeout(resolve, 10));
await lock.unlock();
const holdersSeen = await waited;
await Promise.all([client.close(), other.close()]);
console.log(JSON.stringify({ held, ttl: ttl > 0, holdersSeen }));
`;
    writeFileSync(join(dir, 'run.mjs'), esm);
    const out = execFileSync(process.execPath, [join(dir, 'run.mjs'), redis.server.url], { cwd: dir, encoding: 'utf8', timeout: 20_000 });
    expect(JSON.parse(out)).toEqual({ held: true, ttl: true, holdersSeen: 1 });
  });
});

test("the README's first program runs as written, beside ioredis 6, and exits by itself", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const program = /A first program[^\n]*\n\n```js\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(program).toBeDefined();
  const dir = consumer('readme', join(root, 'node_modules', 'ioredis6'));
  writeFileSync(join(dir, 'first.mjs'), program!);
  const out = execFileSync(process.execPath, ['first.mjs'], { cwd: dir, encoding: 'utf8', timeout: 20_000, env: { ...process.env, REDIS_URL: redis.server.url } });
  expect(out).toBe('one process at a time runs this\n');
});

test('the tarball: built files, docs, no test code, source maps carry their sources', () => {
  const listing = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
  expect(listing).toEqual(expect.arrayContaining(['package/dist/index.js', 'package/dist/index.mjs', 'package/dist/index.d.mts', 'package/dist/cli.js', 'package/docs/design.md', 'package/README.md']));
  expect(listing.filter((file) => /__tests__|\/src\/|scripts\//.test(file))).toEqual([]);
  const dir = join(work, 'unpacked', 'package', 'dist');
  for (const map of readdirSync(dir).filter((file) => file.endsWith('.js.map'))) {
    const { sources, sourcesContent } = JSON.parse(readFileSync(join(dir, map), 'utf8')) as { sources: string[]; sourcesContent?: string[] };
    expect(sourcesContent?.length).toBe(sources.length);
  }
  // Our script commands stay internal: no declaration adds them to ioredis's types.
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.d.ts') || name.endsWith('.d.mts'))) {
    expect([file, readFileSync(join(dir, file), 'utf8')]).not.toEqual([file, expect.stringMatching(/declare module ['"]ioredis['"]|rlock_acquire/)]);
  }
  // README links to docs/*.md: every one of them is in the package.
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  for (const [, link] of readme.matchAll(/\]\((docs\/[^)#]+)/g)) expect(listing).toContain(`package/${link}`);
});
