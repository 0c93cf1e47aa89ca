/**
 * A server that hangs up on a TLS server name it does not serve (Node's `SNICallback` failing; a
 * gateway with no route for the name) resets the handshake without a byte, which looks like a dead
 * host. One client with a wrong `servername` on the shared breaker opened the host, and every
 * correctly configured client of that host:port was refused: in an outside review 0 of 20-25
 * requests served, through undici, node:https (http.get, axios, got), Http2Client, and an undici
 * client beside a gRPC client with a wrong name override (the plain clients: all served). A TLS
 * dial now names its server name (`'tls:<name>'`): while only other names' dials failed, it is let
 * through, and its success closes the host.
 */
import https from 'node:https';
import http2 from 'node:http2';
import type net from 'node:net';
import tls from 'node:tls';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedHttpsAgent } from '../../src/adapters/http/index.js';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker, type Transport, tlsTransport } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { acceptAndHold } from '../../src/testing/tcp-peers.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** Opens a host on its first failed dial and keeps it open for the test. */
const quickBreaker = (): HostBreaker => new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });

describe('the breaker: a TLS dial by server name', () => {
  const fail = (b: HostBreaker, t: Transport | undefined): void => (b.admit('h', 1, t) as { failed(e?: unknown): void }).failed(new Error('reset'));

  it("only one name's dials failed: another name, an unnamed TLS dial and a plain one are let through; that name and an unsaid transport are refused", () => {
    const b = quickBreaker();
    fail(b, tlsTransport('wrong.example'));
    expect(b.tryAdmit('h', 1, tlsTransport('wrong.example'))).toBeInstanceOf(HostUnavailableError);
    expect(b.tryAdmit('h', 1)).toBeInstanceOf(HostUnavailableError);
    for (const t of [tlsTransport('localhost'), 'tls', 'plain'] as const) {
      const p = b.tryAdmit('h', 1, t);
      expect(p).not.toBeInstanceOf(HostUnavailableError);
      expect((p as { probe: boolean }).probe).toBe(true); // its transport's trial
      (p as { abandoned(): void }).abandoned();
    }
    expect(b.state('h', 1, tlsTransport('localhost'))?.state).toBe('closed');
    expect(b.state('h', 1, tlsTransport('wrong.example'))?.state).toBe('open');
    // The good name's success closes the host for everyone.
    (b.admit('h', 1, tlsTransport('localhost')) as { succeeded(): void }).succeeded();
    expect(b.state('h', 1, tlsTransport('wrong.example'))?.state).toBe('closed');
  });

  it("a dial that did not say its transport, or an unnamed TLS one under every name's failure past 8 names, refuses every TLS dial", () => {
    const any = quickBreaker();
    fail(any, undefined);
    for (const t of [tlsTransport('localhost'), 'tls', 'plain'] as const) expect(any.tryAdmit('h', 1, t)).toBeInstanceOf(HostUnavailableError);
    const many = quickBreaker();
    for (let i = 0; i < 9; i++) fail(many, tlsTransport(`n${i}.example`));
    expect(many.tryAdmit('h', 1, tlsTransport('fresh.example'))).toBeInstanceOf(HostUnavailableError);
    const p = many.tryAdmit('h', 1, 'plain');
    expect(p).not.toBeInstanceOf(HostUnavailableError);
    (p as { abandoned(): void }).abandoned();
  });

  it('tlsTransport: no name (an address without servername) is plain "tls"', () => {
    expect([tlsTransport(undefined), tlsTransport(''), tlsTransport('a.example')]).toEqual(['tls', 'tls', 'tls:a.example']);
  });

  it('tlsTransport lower-cases the name: API.example and api.example are one name, as servers match them', () => {
    expect(tlsTransport('API.Example')).toBe('tls:api.example');
    const b = quickBreaker();
    fail(b, tlsTransport('API.example'));
    expect(b.tryAdmit('h', 1, tlsTransport('api.example'))).toBeInstanceOf(HostUnavailableError);
  });
});

/** A TLS server (h2 and http/1.1) serving 'localhost' and hanging up on any other name; counts connections. */
/** `handshakeDelay`: ms the right name's certificate takes to come (a slow certificate store, a busy server). */
async function sniServer(handshakeDelay = 0): Promise<{ port: number; connections: () => number }> {
  const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
  let connections = 0;
  const timers = new Set<NodeJS.Timeout>();
  const answer = (cb: (err: Error | null, ctx?: tls.SecureContext) => void): void => {
    if (handshakeDelay === 0) return cb(null, context);
    const t = setTimeout(() => {
      timers.delete(t);
      cb(null, context);
    }, handshakeDelay);
    timers.add(t);
  };
  const server = http2.createSecureServer(
    { cert: TEST_CERT, key: TEST_KEY, allowHTTP1: true, SNICallback: (name, cb) => (name === 'localhost' ? answer(cb) : cb(new Error('unknown name'))) },
    (_req, res) => res.end('ok'),
  );
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections };
}

const BAD = 4;
const GOOD = 5;

describe('a client with a wrong servername beside a right one, on one breaker, against a server hanging up on unknown names', () => {
  it('connect(): the wrong name opens the host for itself only; the right name is served every time', async () => {
    const { port } = await sniServer();
    const breaker = quickBreaker();
    const target = { host: '127.0.0.1', port };
    const bad: string[] = [];
    for (let i = 0; i < BAD; i++) bad.push(await connect(target, { breaker, timeout: 1_000, tls: { servername: 'wrong.example', ca: TEST_CERT } }).then(() => 'ok', (e: { code?: string }) => String(e.code)));
    expect(bad[0]).toBe('ECONNRESET');
    expect(bad.slice(1)).toEqual(Array(BAD - 1).fill('DIALGUARD_HOST_UNAVAILABLE'));
    for (let i = 0; i < GOOD; i++) {
      const s = await connect(target, { breaker, timeout: 1_000, tls: { servername: 'localhost', ca: TEST_CERT } }); // was HostUnavailableError
      s.destroy();
      // The wrong name is refused again (its own dials failed since), the right one never.
      await expect(connect(target, { breaker, timeout: 1_000, tls: { servername: 'wrong.example', ca: TEST_CERT } })).rejects.toMatchObject({ code: 'ECONNRESET' });
    }
  });

  it('connect(): 30 concurrent right-name dials while the host is open for the wrong name are all served (one dial at a time served 1 of 30)', async () => {
    const { port, connections } = await sniServer();
    const breaker = quickBreaker();
    const target = { host: '127.0.0.1', port };
    await connect(target, { breaker, timeout: 1_000, tls: { servername: 'wrong.example', ca: TEST_CERT } }).catch(() => undefined);
    expect(breaker.state(`127.0.0.1:${port}`, undefined, tlsTransport('wrong.example'))?.state).toBe('open');
    const before = connections();
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, () =>
        connect(target, { breaker, timeout: 1_000, tls: { servername: 'localhost', ca: TEST_CERT } }).then(
          (s) => {
            s.destroy();
            return 'ok';
          },
          (e: { code?: string }) => String(e.code),
        ),
      ),
    );
    expect(outcomes).toEqual(Array(30).fill('ok'));
    expect(connections() - before).toBe(30);
  });

  it('connect(): a right name whose handshake takes 400 ms, called every 50 ms while the host is open for the wrong name: every call served (with the 250 ms grace alone, those between it and the end of the first handshake were refused)', async () => {
    const { port, connections } = await sniServer(400);
    const breaker = quickBreaker();
    const target = { host: '127.0.0.1', port };
    await connect(target, { breaker, timeout: 2_000, tls: { servername: 'wrong.example', ca: TEST_CERT } }).catch(() => undefined);
    expect(breaker.state(`127.0.0.1:${port}`, undefined, tlsTransport('wrong.example'))?.state).toBe('open');
    const before = connections();
    const calls: Promise<string>[] = [];
    for (let i = 0; i < 12; i++) {
      calls.push(
        connect(target, { breaker, timeout: 2_000, tls: { servername: 'localhost', ca: TEST_CERT } }).then(
          (s) => {
            s.destroy();
            return 'ok';
          },
          (e: { code?: string }) => String(e.code),
        ),
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await Promise.all(calls)).toEqual(Array(12).fill('ok'));
    expect(connections() - before).toBe(12);
  });

  it('undici GuardedAgent, node:https GuardedHttpsAgent and Http2Client, each beside a wrong-name client of its kind: every right-name request served, as with the plain clients', async () => {
    const { port, connections } = await sniServer();
    const origin = `https://127.0.0.1:${port}`;
    const results: Record<string, string[]> = {};
    const undiciGet = async (agent: Agent, servername: string): Promise<string> => {
      try {
        const res = await agent.request({ origin, path: '/', method: 'GET', headers: { host: servername } });
        await res.body.text();
        return 'ok';
      } catch (e) {
        return String((e as { code?: string }).code ?? (e as { cause?: { code?: string } }).cause?.code);
      }
    };
    const httpsGet = (agent: https.Agent, servername: string): Promise<string> =>
      new Promise((resolve) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/', agent, servername, ca: TEST_CERT }, (res) => {
          res.resume();
          res.on('end', () => resolve('ok'));
        });
        req.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)));
      });
    for (const lane of ['plain', 'guarded'] as const) {
      const breaker = quickBreaker();
      const before = connections();
      // undici: one agent per name (a servername is the agent's); fresh connections per request.
      const mk = (servername: string): Agent =>
        lane === 'plain'
          ? new Agent({ connect: { servername, ca: TEST_CERT }, pipelining: 0 })
          : new GuardedAgent({ breaker, maxAttempts: 1, tls: { servername, ca: TEST_CERT }, undici: { pipelining: 0 } });
      const [badU, goodU] = [mk('wrong.example'), mk('localhost')];
      const badH = lane === 'plain' ? new https.Agent() : new GuardedHttpsAgent({ breaker });
      const goodH = lane === 'plain' ? new https.Agent() : new GuardedHttpsAgent({ breaker });
      const badC = new Http2Client({ breaker: lane === 'plain' ? null : breaker, retry: false, tls: { servername: 'wrong.example', ca: TEST_CERT } });
      const goodC = new Http2Client({ breaker: lane === 'plain' ? null : breaker, tls: { servername: 'localhost', ca: TEST_CERT } });
      cleanup.push(
        () => badU.close(),
        () => goodU.close(),
        () => badH.destroy(),
        () => goodH.destroy(),
        () => badC.close(),
        () => goodC.close(),
      );
      const seen: string[] = [];
      for (let i = 0; i < 3; i++) {
        await undiciGet(badU, 'wrong.example');
        await httpsGet(badH, 'wrong.example');
        await badC.request(`${origin}/`).catch(() => undefined);
        seen.push(await undiciGet(goodU, 'localhost'), await httpsGet(goodH, 'localhost'));
        seen.push(
          await goodC.request(`${origin}/`).then(
            () => 'ok',
            (e: { code?: string }) => String(e.code),
          ),
        );
      }
      results[lane] = seen;
      expect(connections() - before).toBeGreaterThan(0);
    }
    expect(results).toEqual({ plain: Array(9).fill('ok'), guarded: Array(9).fill('ok') });
  });
});

describe("connect(): the transport each TLS option shape tells the breaker (read from which dials a refused port's failure refuses)", () => {
  async function refusedPort(): Promise<number> {
    const s = (await import('node:net')).createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const { port } = s.address() as net.AddressInfo;
    await new Promise<void>((r) => s.close(() => r()));
    return port;
  }
  const cases: Array<[string, NonNullable<Parameters<typeof connect>[1]>['tls'], Transport]> = [
    ['tls: true to an address', true, 'tls'],
    ['tls: {} to an address', {}, 'tls'],
    ["servername ''", { servername: '' }, 'tls'],
    ['a servername', { servername: 'a.example' }, 'tls:a.example'],
    ['tls: false', false, 'plain'],
    ['no tls', undefined, 'plain'],
  ];
  for (const [what, tlsOption, expected] of cases) {
    it(`${what}: ${expected}`, async () => {
      const port = await refusedPort();
      const breaker = quickBreaker();
      await expect(connect({ host: '127.0.0.1', port }, { breaker, timeout: 1_000, tls: tlsOption })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      const key = `127.0.0.1:${port}`;
      const refusedFor = (['plain', 'tls', 'tls:a.example', 'tls:127.0.0.1'] as const).filter((t) => breaker.state(key, undefined, t)?.state === 'open');
      expect(refusedFor).toEqual([expected]);
    });
  }

  it('a name, dialled per address: its TLS dials name it (the host is the server name sent)', async () => {
    const port = await refusedPort();
    const breaker = quickBreaker();
    const lookup = ((_h: string, _o: unknown, cb: (e: null, a: Array<{ address: string; family: number }>) => void) => queueMicrotask(() => cb(null, [{ address: '127.0.0.1', family: 4 }]))) as unknown as net.LookupFunction;
    await expect(connect({ host: 'svc.test', port }, { breaker, timeout: 1_000, tls: { ca: TEST_CERT }, socket: { lookup } })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    const key = `127.0.0.1:${port}`;
    expect((['plain', 'tls', 'tls:svc.test'] as const).filter((t) => breaker.state(key, undefined, t)?.state === 'open')).toEqual(['tls:svc.test']);
  });
});

describe("undici: the early refusal looks under the name the request's dials are filed under", () => {
  // A request's Host header (or its own servername) names its TLS dials, as undici derives its
  // servername from it. The early refusal read the agent's name alone, so it looked under
  // another name: requests went into undici and queued behind its connecting probe (an outside
  // review: 223-230 ms a request where an early refusal costs 135-142).
  const headerShapes: [string, (name: string) => Record<string, unknown>][] = [
    ['a Host header (record)', (name) => ({ headers: { Host: `${name}:8443` } })],
    ['a Host header (flat array)', (name) => ({ headers: ['x-a', '1', 'host', name] })],
    ['a Host header (Map)', (name) => ({ headers: new Map([['host', name]]) })],
    ['the request servername', (name) => ({ servername: name, headers: { host: '127.0.0.1' } })],
  ];
  for (const [what, shape] of headerShapes) {
    it(`${what}: while its name's probe is out, the next request is refused at once, before the probe settles`, async () => {
      const peer = await acceptAndHold();
      cleanup.push(() => peer.close());
      const clock = new ManualClock(1_000);
      const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: 1_000 });
      const agent = new GuardedAgent({ breaker, maxAttempts: 1, connectTimeout: 300, tls: { rejectUnauthorized: false } });
      cleanup.push(() => agent.close());
      const origin = `https://127.0.0.1:${peer.port}`;
      const get = (): Promise<string> =>
        agent.request({ origin, path: '/', method: 'GET', ...shape('n.example') }).then(
          async (res) => {
            await res.body.dump();
            return 'ok';
          },
          (e: { code?: string }) => String(e.code),
        );
      expect(await get()).toBe('UND_ERR_CONNECT_TIMEOUT'); // opens the host for tls:n.example
      expect(breaker.state(peer.address, undefined, 'tls:n.example')?.state).toBe('open');
      clock.advance(1_000);
      const order: string[] = [];
      const probe = get().then((r) => order.push(`probe ${r}`));
      await new Promise((r) => setTimeout(r, 20)); // the probe is out, held
      const next = get().then((r) => order.push(`next ${r}`));
      await Promise.all([probe, next]);
      expect(order).toEqual(['next DIALGUARD_HOST_UNAVAILABLE', 'probe UND_ERR_CONNECT_TIMEOUT']);
      expect(peer.attempts).toBe(2);
    });
  }
});
