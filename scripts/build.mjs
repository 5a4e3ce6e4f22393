// Builds dist/: CommonJS + declarations from tsc, the Lua scripts beside them, and an ESM entry
// that re-exports the CommonJS one, so `import` and `require` share one copy of the library.
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
cpSync(join(root, 'src/lua'), join(dist, 'lua'), { recursive: true });

const names = Object.keys(createRequire(import.meta.url)(join(dist, 'index.js'))).filter((name) => name !== '__esModule');
writeFileSync(
  join(dist, 'index.mjs'),
  `import cjs from './index.js';\nexport const { ${names.join(', ')} } = cjs;\nexport default cjs;\n`,
);
console.log(`built dist/ (${names.length} exports)`);
