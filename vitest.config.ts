import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Files run in parallel (two cores); tests inside a file run in order.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // A test that ran nothing must not pass quietly.
    passWithNoTests: false,
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
