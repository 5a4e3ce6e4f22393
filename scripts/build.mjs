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

// Our script commands are internal (src/services/scripts.ts types them without augmenting
// ioredis): a `declare module 'ioredis'` in our declarations would add them to every ioredis
// client of a consumer and clash with another ioredis version (TS2322 "missing rlock_acquire").
for (const file of readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((name) => /\.d\.m?ts$/.test(name))) {
  if (/declare module ['"]ioredis['"]/.test(readFileSync(join(dist, file), 'utf8'))) throw new Error(`${file} augments ioredis's types`);
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
