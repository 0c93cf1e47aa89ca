/**
 * Privileged tests that cannot fail quietly.
 *
 * A test that needs CAP_NET_ADMIN (a veth pair and a neighbour entry) re-runs itself inside a
 * network namespace of its own: `unshare --user --map-root-user --net`, so it holds that capability over nothing but
 * its own loopback, needs no sudo, and the namespace vanishes when the child exits. The child
 * writes the test's name to a report file when the body has run to completion; the parent passes
 * only if the child exited 0 AND reported. A stale name filter that matches nothing (the runner
 * would exit 0 having run nothing, seed 003) therefore fails loudly, as does a machine that
 * cannot make the namespace. The tools are util-linux's `unshare` and iproute2's `ip` (both in
 * Debian's base system); where one is missing the test fails naming the package to install.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const CHILD = process.env.DIALGUARD_NETNS_CHILD === '1';
const vitestBin = fileURLToPath(new URL('../../node_modules/vitest/vitest.mjs', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Whether this process is the privileged child (inside its own network namespace). */
export const inNetns = CHILD;

/** The tools a netns test needs, with the Debian package that ships each. */
const TOOLS: ReadonlyArray<readonly [tool: string, pkg: string]> = [
  ['unshare', 'util-linux'],
  ['ip', 'iproute2'],
];

/** The install command for whatever of {@link TOOLS} is not on PATH, or undefined. */
export function missingTools(): string | undefined {
  const missing = TOOLS.filter(([tool]) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
  if (missing.length === 0) return undefined;
  return `${missing.map(([tool]) => tool).join(' and ')} not found: apt-get install ${missing.map(([, pkg]) => pkg).join(' ')}`;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Declares a test whose body runs inside a fresh user + network namespace (loopback up,
 * CAP_NET_ADMIN held). In the parent it spawns that child and checks the child's report.
 *
 * @param file - `import.meta.url` of the test file.
 */
export function netnsTest(file: string, name: string, body: () => Promise<void>, timeout = 60_000): void {
  const fullName = `[netns] ${name}`;
  if (CHILD) {
    it(fullName, async () => {
      await body();
      appendFileSync(process.env.DIALGUARD_NETNS_REPORT!, `${fullName}\n`);
    }, timeout);
    return;
  }
  it(fullName, () => {
    const missing = missingTools();
    expect(missing, `privileged tests need unshare and ip: ${missing}`).toBeUndefined();
    const dir = mkdtempSync(join(tmpdir(), 'dialguard-netns-'));
    const report = join(dir, 'ran');
    try {
      const testFile = fileURLToPath(file);
      const script = 'ip link set lo up && exec "$@"';
      const r = spawnSync(
        'unshare',
        ['--user', '--map-root-user', '--net', '--', 'sh', '-c', script, 'sh', process.execPath, vitestBin, 'run', testFile, '-t', `${escapeRegExp(fullName)}$`],
        {
          cwd: root,
          env: { ...process.env, DIALGUARD_NETNS_CHILD: '1', DIALGUARD_NETNS_REPORT: report, NO_COLOR: '1' },
          encoding: 'utf8',
          timeout: timeout - 2_000,
        },
      );
      const output = `${r.error?.message ?? ''}\n${r.stdout}\n${r.stderr}`;
      expect(r.status, `privileged child failed (exit ${r.status}):\n${output.slice(-4_000)}`).toBe(0);
      let ran = '';
      try {
        ran = readFileSync(report, 'utf8');
      } catch {
        /* no report: handled below */
      }
      expect(ran.split('\n'), `privileged child exited 0 but never reported running "${fullName}":\n${output.slice(-2_000)}`).toContain(fullName);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, timeout);
}
