/**
 * Small pieces shared by everything that runs a real server process or listener on loopback (the
 * chaos scenarios' redis-server and memcached, the blackhole, the redis tests): a free port, a
 * plain TCP accept probe, whether a process holds a listener, and SIGSTOP/SIGCONT that wait for
 * the kernel to agree. Internal: not exported from `dialguard/testing`.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';

/** A port that was free on 127.0.0.1 a moment ago (bound to port 0, then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether a TCP connect to 127.0.0.1:port completes (the socket is closed at once). */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Waits (at most 2 s) until every thread of `pid` shows a state `ok` accepts in /proc; where
 * /proc cannot tell (not Linux, or the process is gone), at once. A SIGSTOP is only delivered
 * when the scheduler gets to it: without this wait a request can still slip in. `what` names the
 * process in the error thrown after 2 s.
 */
export async function waitForThreads(pid: number | undefined, ok: (state: string) => boolean, what = 'process'): Promise<void> {
  if (pid === undefined) return;
  const until = Date.now() + 2_000;
  while (Date.now() < until) {
    let states: string[];
    try {
      states = readdirSync(`/proc/${pid}/task`).map((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '';
      });
    } catch {
      return;
    }
    if (states.every(ok)) return;
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`${what} ${pid} did not reach the expected state in 2 s`);
}

/** Whether a process state letter (from /proc/<pid>/stat) is stopped. */
export const stopped = (s: string): boolean => s === 'T' || s === 't';

/**
 * SIGSTOP `child`; resolves once every thread is stopped (bounded, see {@link waitForThreads}).
 * A frozen listener still completes TCP handshakes into the kernel's backlog.
 */
export async function freezeProcess(child: ChildProcess | undefined, what?: string): Promise<void> {
  if (child === undefined) return;
  child.kill('SIGSTOP');
  await waitForThreads(child.pid, stopped, what);
}

/** SIGCONT `child`; resolves once every thread runs again (bounded). */
export async function thawProcess(child: ChildProcess | undefined, what?: string): Promise<void> {
  if (child === undefined) return;
  child.kill('SIGCONT');
  await waitForThreads(child.pid, (s) => !stopped(s), what);
}

/**
 * Whether process `pid` holds the socket listening on 127.0.0.1:`port` (Linux: /proc/net/tcp
 * names the listener's inode, /proc/<pid>/fd the process's sockets). Where /proc cannot tell, true.
 */
export function ownsListener(pid: number | undefined, port: number): boolean {
  if (pid === undefined) return false;
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return true;
  }
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[3] === '0A') inodes.add(f[9]!); // 0A: LISTEN
  }
  if (inodes.size === 0) return false;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const target = readlinkSafe(`/proc/${pid}/fd/${fd}`);
      const m = /^socket:\[(\d+)\]$/.exec(target ?? '');
      if (m !== null && inodes.has(m[1]!)) return true;
    }
  } catch {
    return true; // its fds are not ours to read: cannot tell
  }
  return false;
}

function readlinkSafe(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined; // an fd closed while we looked
  }
}

/** Children to kill when this process exits (see {@link reapAtExit}). */
const reaped = new Set<ChildProcess>();

/**
 * Kills `child` (SIGCONT, then SIGKILL: a frozen one too) when this process exits, unless it
 * exited first: a server or worker never outlives the run that started it. One 'exit' listener
 * serves every child (a scenario starts a dozen: one each crossed Node's listener warning).
 * `process.exit()` runs it; a signal's default end does not, so a command that starts children
 * turns its signals into `process.exit()` (src/cli.ts).
 */
export function reapAtExit(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  if (reaped.size === 0) process.once('exit', reapAll);
  reaped.add(child);
  child.once('exit', () => {
    reaped.delete(child);
    if (reaped.size === 0) process.off('exit', reapAll);
  });
}

function reapAll(): void {
  for (const child of reaped) {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  reaped.clear();
}

/**
 * Ends this process through `process.exit(128 + signal number)` on SIGINT, SIGTERM or SIGHUP, so
 * the children {@link reapAtExit} holds are killed: Node's default end for these signals runs no
 * 'exit' handler, and a chaos run killed alone (a CI job's timeout, `kill PID`, a closed
 * terminal) left memcached and redis-server running as orphans (an outside review). For a
 * command's entry point; a library never takes a process's signals.
 */
export function exitOnSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => process.exit(128 + os.constants.signals[signal]));
  }
}
