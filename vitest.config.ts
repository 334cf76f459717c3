import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// Test tiers by file name (STYLE.md): `*.spec.ts` pure unit, `*.pg.spec.ts` against a real
// Postgres, `*.e2e.spec.ts` against running processes. All run in one `npm test`.
export default defineConfig({
  resolve: {
    alias: {
      '@tessera/core': here('./libs/core/src/index.ts'),
      '@tessera/protocol': here('./libs/protocol/src/index.ts'),
      '@tessera/platform': here('./libs/platform/src/index.ts'),
      '@tessera/query': here('./libs/query/src/index.ts'),
      '@tessera/migrations': here('./migrations/index.ts'),
      '@tessera/routing': here('./libs/routing/src/index.ts'),
    },
  },
  test: {
    include: ['apps/**/*.spec.ts', 'libs/**/*.spec.ts', 'tools/**/*.spec.ts', 'test/**/*.spec.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    globalSetup: ['./test/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
  },
});
