// `await using` as TypeScript compiles it: `held = await lock.hold()` is given back and
// `client = new LockClient(...)` closed at the end of their scopes; the process then exits by itself.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { usePrivateRedis } from './helpers/privateRedis';

const redis = usePrivateRedis();
const root = join(__dirname, '..');
let out: string;

beforeAll(() => {
  out = mkdtempSync(join(tmpdir(), 'rlock-await-using-'));
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    types: ['node'],
    rootDir: root,
    outDir: out,
  };
  const program = ts.createProgram([join(__dirname, 'fixtures', 'awaitUsing.ts')], options);
  const result = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...result.diagnostics].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
  cpSync(join(root, 'src', 'lua'), join(out, 'src', 'lua'), { recursive: true }); // read at run time
}, 60_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

test('a hold is given back at the end of its scope (re-entering inside withLock, reporting a loss); the client closes at the end of its; the process exits by itself', async () => {
  const compiled = join(out, '__tests__', 'fixtures', 'awaitUsing.js');
  // Lowered, not native: the output calls TypeScript's disposal helper.
  expect(execFileSync('grep', ['-c', '__addDisposableResource', compiled], { encoding: 'utf8' }).trim()).not.toBe('0');
  // NODE_PATH: the compiled files live in a temp dir, our dependencies here.
  const child = spawn(process.execPath, [compiled, redis.server.url], { env: { ...process.env, NODE_PATH: join(root, 'node_modules') }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000); // an open handle would keep it alive
  const code = await new Promise((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  expect(stdout.split('\n')).toEqual([
    'hold: locked true, signal aborted false',
    "after the hold's scope: locked false",
    'nested: await-using holds 2',
    'nested scope ended: holds 1',
    'lost: lock "await-using" was lost: its lease of 100 ms ran out',
    'fair: locked true',
    'after: closed',
    '',
  ]);
});
