/**
 * What the undici adapter's tests share: a real `node:http` server on loopback that counts the
 * connections and requests it sees, agents that are all closed after each test, and a way to
 * capture what a call rejected with.
 */
import http from 'node:http';
import type net from 'node:net';
import { beforeEach } from 'vitest';
import { GuardedAgent, type GuardedAgentOptions } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import type { LoopbackHost } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

export { failure, manualBreaker } from '../../helpers/adapter-tests.js';

/** A `node:http` server on loopback that counts what it sees. */
export interface TestServer {
  readonly origin: string;
  readonly port: number;
  /** `host:port` as the breaker files it. */
  readonly address: string;
  /** TCP connections accepted. */
  readonly connections: number;
  /** Requests received (headers complete). */
  readonly requests: number;
  /** Request bodies received in full, in order. */
  readonly bodies: string[];
  /** Resets every open connection (as a killed process's kernel would) and stops listening. */
  kill(): Promise<void>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts a `node:http` server on loopback (port 0 unless given) with `handler`. */
export async function httpServer(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void,
  options: { host?: LoopbackHost; port?: number } = {},
): Promise<TestServer> {
  const host = options.host ?? '127.0.0.1';
  let connections = 0;
  let requests = 0;
  const bodies: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    requests++;
    const n = requests;
    let body = '';
    req.on('data', (d: Buffer) => {
      body += String(d);
    });
    req.on('end', () => bodies.push(body));
    handler(req, res, n);
  });
  server.on('connection', (socket: net.Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: options.port ?? 0 }, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
    return closed;
  };
  return {
    origin: `http://${address}`,
    port,
    address,
    get connections() {
      return connections;
    },
    get requests() {
      return requests;
    },
    bodies,
    async kill() {
      for (const s of sockets) s.resetAndDestroy();
      await close();
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Answers every request with `status` and `body` (default 200 `ok`). */
export function answer(status = 200, body = 'ok', headers: http.OutgoingHttpHeaders = {}): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, headers);
      res.end(body);
    });
  };
}

const agents: GuardedAgent[] = [];

/**
 * A GuardedAgent for one test (destroyed after it), with a private breaker and no retry budget
 * unless given, so tests never share state through the process-wide ones.
 */
export function guarded(options: GuardedAgentOptions = {}): { agent: GuardedAgent; breaker: HostBreaker } {
  const breaker = options.breaker ?? new HostBreaker({ minOutage: 0, openDuration: 30_000 }); // the classic count-only rules
  const agent = new GuardedAgent({ connectTimeout: 1_000, budget: null, backoff: () => 0, ...options, breaker });
  agents.push(agent);
  return { agent, breaker };
}

/** Registers the per-test leak check and agent clean-up. Call once at the top of a test file. */
export function leakChecked(): void {
  const cleanups = leakCheckEach();
  beforeEach(() => {
    cleanups.push(() => Promise.all(agents.splice(0).map((a) => a.destroy())));
  });
}

/** The error itself, or fetch's `cause` when it is fetch's `TypeError: fetch failed`. */
export function unwrapFetch(err: unknown): unknown {
  if (err instanceof TypeError && err.message === 'fetch failed' && err.cause !== undefined) return err.cause;
  return err;
}
