import { defineConfig } from 'vitest/config';

// The suite Stryker runs once per mutant: the unit, model and property tests of the layers it
// mutates (core, guard, pool, retry). Left out, as they only slow each run without reaching
// more of that code: live-capture tests, privileged tests (they re-run in a namespace child that cannot see the
// active mutant), adapters, HTTP/2, chaos and observability. Properties run shorter here
// (DIALGUARD_FC_RUNS); CI's own test run keeps their full 10 000 sequences.
export default defineConfig({
  test: {
    include: ['test/core/**/*.test.ts', 'test/guard/**/*.test.ts', 'test/pool/**/*.test.ts', 'test/retry/**/*.test.ts', 'test/model/**/*.test.ts'],
    // classify-real captures live failures over sockets (seconds per file); its cases are mirrored
    // as shapes in classify.test.ts, which is what mutants of classify are run against.
    exclude: ['**/*.netns.test.ts', 'test/core/classify-real.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    env: { DIALGUARD_FC_RUNS: '300' },
  },
});
