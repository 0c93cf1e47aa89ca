/**
 * A call with a deadline settles by it, even where nothing else keeps the process alive: the
 * deadline's timer was unref'd, so a script awaiting one `retry()` (or `ServerSet.run`) whose
 * attempt never settled exited with code 13 (an unsettled top-level await), its
 * `DeadlineExceededError` never thrown and nothing printed (an outside review). The timer is
 * cleared when the call settles, so it keeps a process alive no longer than the call itself.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

describe('retry(): a deadline in a process with nothing else to do', () => {
  it('rejects with DeadlineExceededError and the process exits 0 (was: exit 13, nothing thrown)', { timeout: 30_000 }, async () => {
    const viteNode = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));
    const child = fileURLToPath(new URL('./fixtures/deadline-alone-child.ts', import.meta.url));
    const proc = spawn(process.execPath, [viteNode, child], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => void (out += String(d)));
    proc.stderr.on('data', () => {});
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    const killer = setTimeout(() => proc.kill(), 25_000);
    cleanup.push(() => {
      clearTimeout(killer);
      proc.kill();
    });
    expect(await exited).toBe(0);
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ retry: 'DIALGUARD_DEADLINE_EXCEEDED', run: 'DIALGUARD_DEADLINE_EXCEEDED' });
  });
});
