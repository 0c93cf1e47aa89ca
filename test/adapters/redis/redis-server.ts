/**
 * A real `redis-server` on loopback for the tests: started on a port of the test's choosing,
 * killed (SIGKILL), restarted on the same port. Fails loudly, naming the install command, where
 * the binary is missing.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { expect } from 'vitest';
import type { RedisGuard } from '../../../src/adapters/redis/index.js';
import { accepts, freezeProcess, ownsListener, thawProcess } from '../../../src/testing/local-process.js';

/** A free loopback port (bound, then released). */
export { freePort } from '../../../src/testing/local-process.js';

/** The install command named when `redis-server` is missing (Debian 12 ships 7.0). */
export const INSTALL = 'apt-get install -y redis-server';

/** Throws, naming {@link INSTALL}, unless `redis-server` runs. */
export function requireRedisServer(): void {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`redis-server not found (${r.error?.message ?? r.stderr}): install it with \`${INSTALL}\` (as root; CI's .ci/run must do the same)`);
}

/** A `redis-server` process on 127.0.0.1:port. */
export class RedisServer {
  #child: ChildProcess | undefined;
  /**
   * @param config - redis-server's leading arguments (a config file, `--sentinel`): then it is
   *   started with these alone, its port and address coming from the file.
   */
  constructor(
    readonly port: number,
    readonly args: readonly string[] = [],
    readonly config: readonly string[] = [],
  ) {}

  /** Starts it and resolves once it accepts connections. */
  async start(): Promise<this> {
    const child = this.#spawn();
    for (let i = 0; i < 200; i++) {
      if (await accepts(this.port)) return this;
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode} on port ${this.port}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`redis-server on port ${this.port} did not accept within 5 s`);
  }

  /**
   * Starts it and freezes it (SIGSTOP) the moment /proc shows its listener, before its event loop
   * has run: clients that dial it from then on sit in the kernel's backlog with no byte answered.
   * {@link start} then {@link freeze} leaves a window of up to 25 ms in which a client redialling
   * on its own is answered (found in CI: a leader "in the handshake" had read 106 bytes).
   */
  async startFrozen(): Promise<this> {
    const child = this.#spawn();
    const until = performance.now() + 5_000;
    while (!ownsListener(child.pid, this.port)) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode} on port ${this.port}`);
      if (performance.now() > until) throw new Error(`redis-server on port ${this.port} did not listen within 5 s`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await this.freeze();
    return this;
  }

  #spawn(): ChildProcess {
    requireRedisServer();
    const argv = this.config.length > 0 ? [...this.config, ...this.args] : ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...this.args];
    const child = spawn('redis-server', argv, {
      stdio: 'ignore',
    });
    this.#child = child;
    // Never outlive the test process, whatever happens to the test (a timeout skips no clean-up
    // here, but a crashed worker would).
    const reap = (): void => {
      child.kill('SIGKILL');
    };
    process.once('exit', reap);
    child.once('exit', () => process.off('exit', reap));
    return child;
  }

  /** SIGKILL, waiting for the exit: its port refuses from then on. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    child.kill('SIGCONT'); // a frozen process takes no other signal until it runs
    await exited;
  }

  /**
   * SIGSTOP, resolving once /proc shows every thread stopped: frozen, its listener still
   * completes TCP handshakes into the kernel's backlog (accept-and-hold).
   */
  async freeze(): Promise<void> {
    await freezeProcess(this.#child);
  }

  /** SIGCONT after {@link freeze}, resolving once every thread runs again. */
  async thaw(): Promise<void> {
    await thawProcess(this.#child);
  }
}

/**
 * A Redis cluster of `ports.length` masters, no replicas, that keeps serving the slots of its live
 * nodes when one dies (`cluster-require-full-coverage no`). Config files go to `dir`.
 */
export async function startCluster(ports: readonly number[], dir: string): Promise<RedisServer[]> {
  const servers = await Promise.all(
    ports.map((port) =>
      new RedisServer(port, [
        '--cluster-enabled', 'yes',
        '--cluster-config-file', `nodes-${port}.conf`,
        '--cluster-require-full-coverage', 'no',
        '--cluster-node-timeout', '1000',
        '--dir', dir,
      ]).start(),
    ),
  );
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8', timeout: 20_000 });
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}\n${create.stderr}`);
  for (let i = 0; i < 200; i++) {
    const states = ports.map((p) => spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout);
    if (states.every((s) => s.includes('cluster_state:ok'))) return servers;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the cluster did not reach cluster_state:ok within 10 s');
}

/**
 * A Redis Sentinel on 127.0.0.1:port watching the master on 127.0.0.1:masterPort as `name`
 * (quorum 1). Sentinel wants a writable config file: it is written to `dir`.
 */
export async function startSentinel(port: number, masterPort: number, name: string, dir: string): Promise<RedisServer> {
  const config = join(dir, `sentinel-${port}.conf`);
  writeFileSync(config, `port ${port}\nbind 127.0.0.1\nsentinel monitor ${name} 127.0.0.1 ${masterPort} 1\n`);
  return new RedisServer(port, [], [config, '--sentinel']).start();
}

/** The cluster node (port) that serves `key`. */
export function nodeOf(key: string, port: number): number {
  const slot = Number(spawnSync('redis-cli', ['-p', String(port), 'cluster', 'keyslot', key], { encoding: 'utf8' }).stdout.trim());
  const slots = spawnSync('redis-cli', ['-p', String(port), '--json', 'cluster', 'slots'], { encoding: 'utf8' }).stdout;
  for (const [from, to, master] of JSON.parse(slots) as Array<[number, number, [string, number]]>) if (slot >= from && slot <= to) return master[1];
  throw new Error(`no node serves slot ${slot}`);
}

/**
 * A node-redis and an ioredis client of `guard` to `port` on 127.0.0.1, both connected and
 * answering PING (closed by `cleanups`).
 */
export async function connectedPair(guard: RedisGuard, port: number, cleanups: Array<() => unknown>): Promise<{ a: ReturnType<typeof createClient>; b: Redis }> {
  const a = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port } });
  const b = guard.ioredis(Redis, { host: '127.0.0.1', port });
  a.on('error', () => {});
  b.on('error', () => {});
  cleanups.push(() => a.destroy(), () => b.disconnect());
  await a.connect();
  expect(await a.ping()).toBe('PONG');
  expect(await b.ping()).toBe('PONG');
  return { a, b };
}
