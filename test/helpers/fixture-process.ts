/**
 * A TypeScript fixture run in a child process of its own (through vite-node), for tests of what a
 * whole process does: whether it stays alive, exits, and what its last line says.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** A fixture process started by {@link runFixture}. */
export interface FixtureProcess {
  /** Its exit code (null if killed). */
  readonly exited: Promise<number | null>;
  /** Its last stdout line, parsed as JSON. */
  lastLine(): unknown;
}

/**
 * Runs `fixture` (a file URL) with `args`; killed after `killAfterMs`, or by `stop` (push it to
 * the test's cleanups).
 */
export function runFixture(fixture: URL, args: readonly string[], killAfterMs: number): { proc: FixtureProcess; stop: () => void } {
  const viteNode = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));
  const child = spawn(process.execPath, [viteNode, fileURLToPath(fixture), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => void (out += String(d)));
  child.stderr.on('data', () => {});
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const killer = setTimeout(() => child.kill(), killAfterMs);
  return {
    proc: { exited, lastLine: () => JSON.parse(out.trim().split('\n').pop()!) as unknown },
    stop: () => {
      clearTimeout(killer);
      child.kill();
    },
  };
}
