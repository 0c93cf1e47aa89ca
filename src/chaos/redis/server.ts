/**
 * Real `redis-server` processes for the redis chaos scenario and the redis tests: started on
 * loopback, frozen (SIGSTOP) and thawed with the kernel's word that every thread has stopped or
 * runs again, killed for sure, restarted on the same port.
 *
 * @module
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { accepts, freezeProcess, ownsListener, reapAtExit, thawProcess } from '../../testing/local-process.js';

export { stopped, waitForThreads } from '../../testing/local-process.js';

/** The install command named when `redis-server` is missing (Debian 12 ships 7.0). */
export const REDIS_INSTALL = 'apt-get install -y redis-server';

/** Why `redis-server` cannot run here, or undefined when it can. */
export function redisServerMissing(): string | undefined {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? undefined : `redis-server not found (${(r.error?.message ?? r.stderr).trim()}): install it with \`${REDIS_INSTALL}\``;
}

/** A `redis-server` on 127.0.0.1:port that can be frozen, thawed, killed and started again. */
export class RedisProcess {
  #child: ChildProcess | undefined;
  constructor(
    readonly port: number,
    readonly args: readonly string[] = [],
  ) {}

  /** `127.0.0.1:port`. */
  get node(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** The running process's id, if any. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Starts it and resolves once it accepts connections and holds the listener itself (bounded,
   * 5 s). Rejects if it exits first (e.g. the port was taken).
   */
  async start(): Promise<this> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...this.args], {
      stdio: 'ignore',
    });
    this.#child = child;
    reapAtExit(child); // never outlive this process, whatever happens to it
    for (let i = 0; i < 200; i++) {
      if ((await accepts(this.port)) && ownsListener(child.pid, this.port)) return this;
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis-server exited (${child.exitCode ?? child.signalCode}) on port ${this.port}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await this.kill();
    throw new Error(`redis-server on port ${this.port} did not accept within 5 s`);
  }

  /** SIGSTOP; resolves once every thread is stopped. Its listener still completes TCP handshakes into the backlog. */
  async freeze(): Promise<void> {
    await freezeProcess(this.#child);
  }

  /** SIGCONT; resolves once every thread runs again. */
  async thaw(): Promise<void> {
    await thawProcess(this.#child);
  }

  /** SIGKILL (a frozen process too), waiting for the exit: its port refuses from then on. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    child.kill('SIGCONT');
    await exited;
  }
}
