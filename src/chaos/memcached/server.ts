/**
 * Real memcached servers for the storm scenario and its tests: found on PATH or installed from
 * Debian's package, started on loopback ports, stopped for sure.
 *
 * @module
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { MemcachedConnection } from './connection.js';

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

/** A port that was free a moment ago on 127.0.0.1. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts one memcached on loopback and waits (bounded) until it answers `version`. */
export async function startMemcached(): Promise<{ node: string; proc: ChildProcess; stop: () => Promise<void> }> {
  const port = await freePort();
  const args = ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-t', '1', '-m', '16', '-c', '8192', '-b', '1024'];
  if (process.getuid?.() === 0) args.push('-u', 'nobody');
  const proc = spawn('memcached', args, { stdio: 'ignore' });
  const node = `127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
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
    if (ok) {
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      const stop = async (): Promise<void> => {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGCONT');
          proc.kill('SIGKILL');
        }
        await exited;
      };
      return { node, proc, stop };
    }
    await wait(20);
  }
  proc.kill('SIGKILL');
  throw new Error(`memcached on ${node} did not start`);
}


function wait(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
