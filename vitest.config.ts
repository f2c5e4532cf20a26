import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@ctrlrun/source'] },
  ssr: { resolve: { conditions: ['@ctrlrun/source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'playground/test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/*.case.ts'],
    testTimeout: 30000,
    // One throwaway PostgreSQL server for the whole run (or PG_URL); see test/support/pg-cluster.ts.
    globalSetup: ['test/support/pg-cluster.ts'],
  },
});
