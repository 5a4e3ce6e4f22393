// The benchmark measures the library as shipped: dist/ (tsc output, built by `npm run bench`
// first). src/ run through tsx would carry esbuild's keepNames helpers, which give closures a
// `name` property of their own and cost ~0.5 KiB per parked waiter that no user pays.
import type * as Library from '../src';

export const { LockClient, MultiLock, RedLock } = require('../dist') as typeof Library;
