/**
 * A call with a deadline settles by it, even where nothing else keeps the process alive: the
 * deadline's timer was unref'd, so a script awaiting one `retry()` (or `ServerSet.run`) whose
 * attempt never settled exited with code 13 (an unsettled top-level await), its
 * `DeadlineExceededError` never thrown and nothing printed (an outside review). The timer is
 * cleared when the call settles, so it keeps a process alive no longer than the call itself.
 */
import { describe, expect, it } from 'vitest';
import { runFixture } from '../helpers/fixture-process.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

describe('retry(): a deadline in a process with nothing else to do', () => {
  it('rejects with DeadlineExceededError and the process exits 0 (was: exit 13, nothing thrown)', { timeout: 30_000 }, async () => {
    const { proc, stop } = runFixture(new URL('./fixtures/deadline-alone-child.ts', import.meta.url), [], 25_000);
    cleanup.push(stop);
    expect(await proc.exited).toBe(0);
    expect(proc.lastLine()).toEqual({ retry: 'DIALGUARD_DEADLINE_EXCEEDED', run: 'DIALGUARD_DEADLINE_EXCEEDED' });
  });
});
