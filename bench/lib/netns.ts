/**
 * Lets a bench count dials exactly: it re-runs itself inside a user + network namespace of its
 * own (`unshare --user --map-root-user --net`), where a veth blackhole counts every
 * connection attempt. Where namespaces are unavailable it runs as it is and says so.
 */
import { spawnSync } from 'node:child_process';

const MARK = 'DIALGUARD_BENCH_NETNS';

/** True inside the namespace this module made. */
export const inBenchNetns = process.env[MARK] === '1';

/**
 * Re-runs this process in a fresh namespace and exits with its status, unless already inside one
 * or `--no-netns` was given. Returns only when the bench should run here.
 */
export function reexecInNetns(): void {
  if (inBenchNetns || process.argv.includes('--no-netns')) return;
  const probe = spawnSync('unshare', ['--user', '--map-root-user', '--net', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    process.stderr.write(`… no network namespace here (${(probe.stderr || probe.error?.message || '').trim()}); counting dials at the client\n`);
    return;
  }
  const r = spawnSync(
    'unshare',
    ['--user', '--map-root-user', '--net', '--', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, [MARK]: '1' } },
  );
  process.exit(r.status ?? 1);
}
