/**
 * A chaos run killed alone (SIGTERM from a CI timeout or `kill`, SIGINT, SIGHUP) reaps the
 * servers it started. Node's default end for these signals runs no 'exit' handler, so
 * memcached and redis-server lived on with PPID 1 (an outside review). Real servers; the child
 * stands in for the CLI's entry point (it calls the same exitOnSignals()).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** Whether a process with `pid` still runs (a zombie awaiting its reaper counts as gone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('chaos servers and signals', { timeout: 30_000 }, () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)('%s to the run alone: it exits 128+n and its memcached and redis-server are gone', async (signal) => {
    const viteNode = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));
    const script = fileURLToPath(new URL('./fixtures/signal-child.ts', import.meta.url));
    const proc = spawn(process.execPath, [viteNode, script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const killer = setTimeout(() => proc.kill('SIGKILL'), 25_000);
    let pids: { memcached: number; redis: number } | undefined;
    try {
      pids = await new Promise<{ memcached: number; redis: number }>((resolve, reject) => {
        let out = '';
        proc.stdout.on('data', (d: Buffer) => {
          out += String(d);
          const line = out.split('\n').find((l) => l.startsWith('{'));
          if (line !== undefined) resolve(JSON.parse(line) as { memcached: number; redis: number });
        });
        proc.on('exit', (code) => reject(new Error(`the child exited (${code}) before starting its servers`)));
      });
      expect(running(pids.memcached) && running(pids.redis)).toBe(true);
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.on('exit', (code, sig) => resolve({ code, signal: sig })));
      proc.kill(signal);
      const { code } = await exited;
      expect(code).toBe(128 + os.constants.signals[signal]); // was: killed by the signal, no 'exit' handlers
      const until = Date.now() + 3_000;
      while ((running(pids.memcached) || running(pids.redis)) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect({ memcached: running(pids.memcached), redis: running(pids.redis) }).toEqual({ memcached: false, redis: false }); // were orphans
    } finally {
      clearTimeout(killer);
      proc.kill('SIGKILL');
      for (const pid of [pids?.memcached, pids?.redis]) if (pid !== undefined && running(pid)) process.kill(pid, 'SIGKILL'); // a failed run leaves no orphan
    }
  });
});
