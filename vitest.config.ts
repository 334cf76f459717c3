import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// Test tiers by file name (STYLE.md): `*.spec.ts` pure unit, `*.pg.spec.ts` against a real
// Postgres, `*.e2e.spec.ts` against running processes. All run in one `npm test`.
export default defineConfig({
  resolve: {
    alias: [
      { find: '@tessera/core', replacement: here('./libs/core/src/index.ts') },
      { find: '@tessera/protocol', replacement: here('./libs/protocol/src/index.ts') },
      { find: '@tessera/platform', replacement: here('./libs/platform/src/index.ts') },
      { find: '@tessera/query', replacement: here('./libs/query/src/index.ts') },
      { find: '@tessera/migrations', replacement: here('./migrations/index.ts') },
      { find: '@tessera/routing', replacement: here('./libs/routing/src/index.ts') },
      // One copy of graphql: Nest loads its CommonJS build, so our code must too (two copies of
      // GraphQLScalarType fail each other's instanceof checks).
      { find: /^graphql$/, replacement: here('./node_modules/graphql/index.js') },
    ],
  },
  test: {
    include: ['apps/**/*.spec.ts', 'bench/**/*.spec.ts', 'libs/**/*.spec.ts', 'tools/**/*.spec.ts', 'test/**/*.spec.ts', 'loadtests/**/*.spec.ts'],
    // A hang detector, not a speed check: end-to-end tests restart real processes on a shared
    // 2-core machine, where a slow phase stretches a 20 s test past 30 s.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['./test/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
  },
});
