/**
 * Real memcached servers for the storm scenario and its tests: found on PATH or installed from
 * Debian's package, started on loopback ports, stopped for sure.
 *
 * @module
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { freePort, freezeProcess, ownsListener, reapAtExit, thawProcess } from '../../testing/local-process.js';
import { MemcachedConnection } from './connection.js';

export { ownsListener } from '../../testing/local-process.js';

/** Whether a memcached binary is on PATH. */
export function hasMemcached(): boolean {
  return spawnSync('sh', ['-c', 'command -v memcached'], { encoding: 'utf8' }).status === 0;
}

/**
 * Finds memcached, or installs Debian's package when running as root with apt-get (and
 * DIALGUARD_NO_INSTALL is not 1), saying so through `log`. Returns why not when it cannot.
 */
export function ensureMemcached(log: (line: string) => void): string | undefined {
  if (hasMemcached()) return undefined;
  const root = process.getuid?.() === 0;
  const apt = spawnSync('sh', ['-c', 'command -v apt-get']).status === 0;
  if (!root || !apt || process.env.DIALGUARD_NO_INSTALL === '1') {
    return 'memcached is not installed (Debian: apt-get install memcached); installing needs root and apt-get';
  }
  log('memcached: not found; installing Debian\'s package (apt-get install memcached)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'memcached'], { env, timeout: 300_000, encoding: 'utf8' });
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], { env, timeout: 300_000 });
    r = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'memcached'], { env, timeout: 300_000, encoding: 'utf8' });
  }
  return hasMemcached() ? undefined : `memcached could not be installed: ${(r.stderr || r.error?.message || '').trim().slice(0, 300)}`;
}

/** A started memcached: its `host:port`, its process, and the faults the scenario applies to it. */
export interface MemcachedServer {
  readonly node: string;
  readonly proc: ChildProcess;
  /** SIGSTOP; resolves once the kernel shows every thread stopped (bounded), so no request slips in. */
  freeze(): Promise<void>;
  /** SIGCONT; resolves once the process runs again (bounded). */
  thaw(): Promise<void>;
  /** Kills it for sure (thawed first) and waits for its exit. */
  stop(): Promise<void>;
}

/**
 * Starts one memcached on loopback and waits (bounded) until it answers `version`, checking that
 * the process answering is this one: another memcached (a parallel test's) can take the port
 * between choosing it and binding it, and would otherwise answer in its place. On such a lost
 * race it starts again on another port (at most 5 times).
 */
export async function startMemcached(): Promise<MemcachedServer> {
  for (let round = 0; round < 5; round++) {
    const server = await startOnce();
    if (server !== undefined) return server;
  }
  throw new Error('memcached did not start on a port of its own in 5 tries');
}

async function startOnce(): Promise<MemcachedServer | undefined> {
  const port = await freePort();
  const args = ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-t', '1', '-m', '16', '-c', '8192', '-b', '1024'];
  if (process.getuid?.() === 0) args.push('-u', 'nobody');
  const proc = spawn('memcached', args, { stdio: 'ignore' });
  reapAtExit(proc); // never outlive this process, whatever happens to it
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const alive = (): boolean => proc.exitCode === null && proc.signalCode === null;
  const kill = async (): Promise<void> => {
    if (alive()) {
      proc.kill('SIGCONT');
      proc.kill('SIGKILL');
    }
    await exited;
  };
  const node = `127.0.0.1:${port}`;
  for (let i = 0; i < 100 && alive(); i++) {
    if ((await answersVersion(port)) && ownsListener(proc.pid, port)) {
      return {
        node,
        proc,
        freeze: () => freezeProcess(proc, 'memcached'),
        thaw: () => thawProcess(proc, 'memcached'),
        stop: kill,
      };
    }
    await wait(20);
  }
  const lostRace = !alive(); // it exited: the port was taken (another process bound it first)
  await kill();
  if (lostRace) return undefined;
  throw new Error(`memcached on ${node} did not start`);
}

/** Whether something on 127.0.0.1:port answers memcached's `version`. */
function answersVersion(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => {
      const c = new MemcachedConnection(socket);
      c.version(200).then(
        () => {
          c.close();
          resolve(true);
        },
        () => {
          c.close();
          resolve(false);
        },
      );
    });
  });
}

function wait(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
