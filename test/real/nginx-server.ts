/**
 * A real nginx on loopback for the tests, run as users run it (a master process and a worker, its
 * own config), from a scratch prefix: reloaded with SIGHUP as a deploy does, stopped with SIGTERM
 * (its fast shutdown: connections closed) and started again on the same ports. Fails loudly,
 * naming the install command, where the binary is missing (`npm test` provisions it).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accepts, freePort } from '../../src/testing/local-process.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';

/** The install command named when nginx is missing (Debian 12 ships 1.22). */
export const INSTALL = 'apt-get install -y --no-install-recommends nginx-light';

/** Throws, naming {@link INSTALL}, unless nginx runs. */
export function requireNginx(): void {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nginx not found (${r.error?.message ?? r.stderr}): install it with \`${INSTALL}\` (as root, npm test does)`);
}

/**
 * An nginx serving `ok` over plain HTTP/1.1 (`h1`) and HTTP/2 over TLS (`h2`, the test
 * certificate), and, given an upstream, proxying gRPC (h2c on `grpc`) to it with `grpc_pass`.
 */
export class Nginx {
  #child: ChildProcess | undefined;
  readonly #dir = mkdtempSync(join(tmpdir(), 'dialguard-nginx-'));

  private constructor(
    readonly h1: number,
    readonly h2: number,
    /** Extra directives in the `http` block (`keepalive_requests 50;`...). */
    readonly extra: string,
    /** The port nginx proxies gRPC from (0: none). */
    readonly grpc: number,
    /** The plain-text gRPC server it proxies to (127.0.0.1). */
    readonly grpcUpstream: number,
  ) {
    for (const d of ['logs', 'tmp']) mkdirSync(join(this.#dir, d));
    writeFileSync(join(this.#dir, 'cert.pem'), TEST_CERT);
    writeFileSync(join(this.#dir, 'key.pem'), TEST_KEY);
    const d = this.#dir;
    writeFileSync(
      join(d, 'nginx.conf'),
      `daemon off; master_process on; worker_processes 1; pid ${d}/nginx.pid; error_log ${d}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${d}/tmp; proxy_temp_path ${d}/tmp; fastcgi_temp_path ${d}/tmp; uwsgi_temp_path ${d}/tmp; scgi_temp_path ${d}/tmp;
  ${extra}
  server { listen 127.0.0.1:${h1}; location / { return 200 "ok"; } }
  server { listen 127.0.0.1:${h2} ssl http2; ssl_certificate ${d}/cert.pem; ssl_certificate_key ${d}/key.pem; location / { return 200 "ok"; } }
  ${grpc === 0 ? '' : `server { listen 127.0.0.1:${grpc} http2; location / { grpc_pass grpc://127.0.0.1:${grpcUpstream}; } }`}
}
`,
    );
  }

  /** Starts one on free loopback ports; with `grpcUpstream`, a gRPC proxy to 127.0.0.1:grpcUpstream too. */
  static async start(extra = '', grpcUpstream = 0): Promise<Nginx> {
    requireNginx();
    return new Nginx(await freePort(), await freePort(), extra, grpcUpstream === 0 ? 0 : await freePort(), grpcUpstream).start();
  }

  get h1Url(): string {
    return `http://127.0.0.1:${this.h1}/`;
  }

  get h2Url(): string {
    return `https://127.0.0.1:${this.h2}/`;
  }

  /** Starts the master (again, after {@link stop}) and resolves once both ports accept. */
  async start(): Promise<this> {
    const child = spawn('nginx', ['-p', this.#dir, '-c', join(this.#dir, 'nginx.conf')], { stdio: 'ignore' });
    this.#child = child;
    const reap = (): void => {
      child.kill('SIGKILL');
    };
    process.once('exit', reap);
    child.once('exit', () => process.off('exit', reap));
    for (let i = 0; i < 200; i++) {
      if ((await accepts(this.h1)) && (await accepts(this.h2)) && (this.grpc === 0 || (await accepts(this.grpc)))) return this;
      if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error('nginx did not accept within 5 s');
  }

  /** A deploy's reload: new workers take the listeners, old ones drain their connections. */
  reload(): void {
    this.#child?.kill('SIGHUP');
  }

  /** Its fast shutdown (SIGTERM: every connection closed), waiting for the exit: both ports refuse from then on. */
  async stop(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const bound = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(bound);
  }

  /** Stops it and removes its prefix. */
  async close(): Promise<void> {
    await this.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
