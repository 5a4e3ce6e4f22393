// Builds dist/: CommonJS + declarations from tsc, the Lua scripts beside them, and an ESM entry
// that re-exports the CommonJS one, so `import` and `require` share one copy of the library.
// `node scripts/build.mjs [outDir]` (default dist/; the consumer test builds into a temp dir).
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = resolve(process.argv[2] ?? join(root, 'dist'));
rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', dist], {
  stdio: 'inherit',
});
cpSync(join(root, 'src/lua'), join(dist, 'lua'), { recursive: true });

// Our Lua commands are internal: an augmentation of ioredis's types in our declarations would
// add them to every ioredis client of a consumer, and clash with a different ioredis version
// (TS2322 "missing rlock_acquire"). tsc's stripInternal drops the block once src/scripts.ts marks
// it `/** @internal */`; until then it is cut here. Either way none may be left.
const AUGMENTATION = /^declare module ['"]ioredis['"] \{\n[\s\S]*?^\}\n/m;
for (const file of readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.d.ts'))) {
  const path = join(dist, file);
  const text = readFileSync(path, 'utf8');
  if (AUGMENTATION.test(text)) writeFileSync(path, text.replace(AUGMENTATION, ''));
  if (/declare module ['"]ioredis['"]/.test(readFileSync(path, 'utf8'))) throw new Error(`${file}: could not remove the ioredis augmentation`);
}

const names = Object.keys(createRequire(import.meta.url)(join(dist, 'index.js'))).filter((name) => name !== '__esModule');
writeFileSync(
  join(dist, 'index.mjs'),
  `import cjs from './index.js';\nexport const { ${names.join(', ')} } = cjs;\nexport default cjs;\n`,
);
// Types of the ESM entry, as ESM: under node16/nodenext an `import` typed by index.d.ts (a CJS
// file, our package has no "type": "module") would be "masquerading as CJS" (attw).
writeFileSync(
  join(dist, 'index.d.mts'),
  `export * from './index.js';\nimport * as rlock from './index.js';\nexport default rlock;\n`,
);
console.log(`built ${dist} (${names.length} exports)`);
