/**
 * What the http adapter's tests share: real `node:http` and `node:https` servers on loopback that
 * count the TCP connections and requests they see, agents destroyed after each test, a manual
 * breaker, a counting resolver, and a way to capture what a call rejected with.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { beforeEach } from 'vitest';
import { GuardedHttpAgent, type GuardedHttpAgentOptions, GuardedHttpsAgent, type GuardedHttpsAgentOptions } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';

export { failure, manualBreaker } from '../../helpers/adapter-tests.js';

/** A loopback server that counts what it sees. */
export interface CountingServer {
  readonly port: number;
  /** `http://127.0.0.1:port` or `https://localhost:port`. */
  readonly origin: string;
  /** `host:port` as the breaker files it. */
  readonly address: string;
  /** TCP connections accepted. */
  readonly connections: number;
  readonly requests: number;
  /** Every open connection reset, listener closed. */
  kill(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const ok: Handler = (req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
};

/** Starts a counting `node:http` (or, with `tls`, `node:https`) server on 127.0.0.1. */
export async function countingServer(options: { tls?: boolean; handler?: Handler } = {}): Promise<CountingServer> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const handler = options.handler ?? ok;
  const onRequest: Handler = (req, res) => {
    requests++;
    handler(req, res);
  };
  const server = options.tls
    ? https.createServer({ cert: TEST_CERT, key: TEST_KEY, keepAliveTimeout: 10_000 }, onRequest)
    : http.createServer({ keepAliveTimeout: 10_000 }, onRequest);
  server.on('connection', (socket: net.Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', () => {});
  let port = 0;
  const listen = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port }, () => {
        server.off('error', reject);
        port = (server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  const stop = async (end: (s: net.Socket) => void): Promise<void> => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) end(s);
    await closed;
  };
  await listen();
  const host = options.tls ? 'localhost' : '127.0.0.1';
  return {
    get port() {
      return port;
    },
    get origin() {
      return `${options.tls ? 'https' : 'http'}://${host}:${port}`;
    },
    get address() {
      return `${host}:${port}`;
    },
    get connections() {
      return connections;
    },
    get requests() {
      return requests;
    },
    kill: () => stop((s) => s.resetAndDestroy()),
    restart: listen,
    close: () => stop((s) => s.destroy()),
  };
}

const cleanupAgents: Array<{ destroy(): void }> = [];

/** A GuardedHttpAgent for one test (destroyed after it), with a private breaker unless given. */
export function guardedHttp(options: GuardedHttpAgentOptions = {}): GuardedHttpAgent {
  const agent = new GuardedHttpAgent({ connectTimeout: 1_000, breaker: new HostBreaker(), ...options });
  cleanupAgents.push(agent);
  return agent;
}

/** A GuardedHttpsAgent trusting the test certificate, for one test, with a private breaker unless given. */
export function guardedHttps(options: GuardedHttpsAgentOptions = {}): GuardedHttpsAgent {
  const agent = new GuardedHttpsAgent({ connectTimeout: 1_000, breaker: new HostBreaker(), ca: TEST_CERT, ...options });
  cleanupAgents.push(agent);
  return agent;
}

/** Node's own agent, destroyed after the test. */
export function plain<A extends { destroy(): void }>(agent: A): A {
  cleanupAgents.push(agent);
  return agent;
}

/**
 * A resolver that answers every name with 127.0.0.1 and counts its calls: Node's connect looks
 * the name up once per TCP attempt, so against a closed port (which can count nothing) this counts
 * the dials the client made.
 */
export function countingLookup(): { lookup: net.LookupFunction; readonly calls: number } {
  let calls = 0;
  const lookup = ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
    calls++;
    if (opts?.all === true) cb(null, [{ address: '127.0.0.1', family: 4 }]);
    else cb(null, '127.0.0.1', 4);
  }) as unknown as net.LookupFunction;
  return {
    lookup,
    get calls() {
      return calls;
    },
  };
}

/** Registers the per-test leak check and agent clean-up. Call once at the top of a test file. */
export function leakChecked(): Array<() => unknown> {
  const cleanups = leakCheckEach();
  beforeEach(() => {
    cleanups.push(() => {
      for (const a of cleanupAgents.splice(0)) a.destroy();
    });
  });
  return cleanups;
}

/** One GET through `agent` with `node:http`/`node:https`, resolving with the body. */
export function get(url: string, agent: http.Agent, extra: http.RequestOptions = {}): Promise<string> {
  const mod = url.startsWith('https:') ? https : http;
  return new Promise<string>((resolve, reject) => {
    const req = mod.get(url, { agent, ...extra }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}
