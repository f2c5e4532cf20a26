import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['@ctrlrun/source'] },
  ssr: { resolve: { conditions: ['@ctrlrun/source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'playground/test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/*.case.ts'],
    testTimeout: 30000,
    // Two test files at a time even on two cores (Vitest's default there is one): most files wait
    // on child processes, servers and browsers, and every deadline scales with the load it measures
    // (test/support/load.ts). The whole run took 16 min one at a time on a 2-core machine, 12 min so.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // One throwaway PostgreSQL server for the whole run (or PG_URL); see test/support/pg-cluster.ts.
    globalSetup: ['test/support/pg-cluster.ts'],
  },
});
