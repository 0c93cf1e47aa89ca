/**
 * classify() against errors the supported clients really produce, captured live from fault peers
 * on loopback. Each case asserts kind, notSent and connectionDead (and the code where it is
 * stable), so a client upgrade that changes an error's shape turns a row red.
 */
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { Agent, fetch, interceptors, request } from 'undici';
import { describe, it } from 'vitest';
import { type FailureKind, classify } from '../../src/core/classify.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { connect } from '../../src/guard/connect.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { acceptAndHold, echoPeer, refusing, resetOnAccept } from '../../src/testing/tcp-peers.js';
import {
  CERT,
  type Scope,
  capture,
  dualStackLookup,
  grpcCall,
  grpcServer,
  h2Request,
  h2Server,
  loopbackDns,
  onFirstData,
  peer,
  socketFailure,
} from './capture.js';

interface Case {
  name: string;
  produce: (scope: Scope) => Promise<unknown>;
  kind: FailureKind;
  notSent: boolean;
  connectionDead: boolean;
  transient?: boolean;
  code?: string;
  /** Pass to classify as the caller's signal. */
  signal?: AbortSignal;
}

const L = '127.0.0.1';
const C = http2.constants;

async function agent(scope: Scope, options: Agent.Options): Promise<Agent> {
  const a = new Agent(options);
  scope.defer(() => a.destroy());
  return a;
}

const callerAbort = new AbortController();
callerAbort.abort(new Error('the caller changed its mind'));

const netCases: Case[] = [
  {
    name: 'connect to a closed port (ECONNREFUSED)',
    produce: async (s) => {
      const p = await refusing();
      return socketFailure(s, () => net.connect({ host: L, port: p.port }));
    },
    kind: 'dial', notSent: true, connectionDead: false, transient: true, code: 'ECONNREFUSED',
  },
  {
    name: 'connect to a closed port on ::1',
    produce: async (s) => {
      const p = await refusing({ host: '::1' });
      return socketFailure(s, () => net.connect({ host: '::1', port: p.port }));
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'happy eyeballs: both families refused (AggregateError)',
    produce: async (s) => {
      const p = await refusing();
      return socketFailure(s, () => net.connect({ host: 'dual.test', port: p.port, lookup: dualStackLookup, autoSelectFamily: true }));
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'peer resets once data arrives (read ECONNRESET)',
    produce: async (s) => {
      const p = await onFirstData(s, 'reset-on-data', (socket) => socket.resetAndDestroy());
      return socketFailure(s, () => net.connect({ host: L, port: p.port }), 'once');
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'ECONNRESET',
  },
  {
    name: 'writing after the peer closed (EPIPE)',
    produce: async (s) => {
      const p = await onFirstData(s, 'close-on-data', (socket) => socket.destroy());
      return socketFailure(s, () => net.connect({ host: L, port: p.port, allowHalfOpen: true }), 'flood');
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'EPIPE',
  },
  {
    name: 'name does not resolve (ENOTFOUND from a loopback DNS server)',
    produce: async (s) => {
      const lookup = await loopbackDns(s, 'nxdomain');
      return socketFailure(s, () => net.connect({ host: 'no-such-host.test', port: 80, lookup }));
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ENOTFOUND',
  },
  {
    name: 'DNS server never answers (ETIMEOUT)',
    produce: async (s) => {
      const lookup = await loopbackDns(s, 'silent');
      return socketFailure(s, () => net.connect({ host: 'slow-dns.test', port: 80, lookup }));
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ETIMEOUT',
  },
  {
    name: 'dialguard connect to a blackhole (ConnectTimeoutError, tcp)',
    produce: async (s) => {
      const p = await peer(s, blackhole());
      return connect({ host: L, port: p.port }, { timeout: 200, breaker: null });
    },
    kind: 'dial', notSent: true, connectionDead: false, transient: true, code: 'DIALGUARD_CONNECT_TIMEOUT',
  },
  {
    name: 'dialguard connect refused',
    produce: async () => {
      const p = await refusing();
      return connect({ host: L, port: p.port }, { timeout: 300, breaker: null });
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'dialguard breaker refuses a host that failed (HostUnavailableError)',
    produce: async () => {
      const p = await refusing();
      const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
      await connect({ host: L, port: p.port }, { timeout: 300, breaker }).catch(() => {});
      return connect({ host: L, port: p.port }, { timeout: 300, breaker });
    },
    kind: 'refused', notSent: true, connectionDead: false, transient: false, code: 'DIALGUARD_HOST_UNAVAILABLE',
  },
];

const tlsCases: Case[] = [
  {
    name: 'dialguard TLS connect to a peer that never handshakes (ConnectTimeoutError, tls)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      return connect({ host: L, port: p.port }, { timeout: 200, tls: true, breaker: null });
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'DIALGUARD_CONNECT_TIMEOUT',
  },
  {
    name: 'TLS to a peer that echoes plaintext (ERR_SSL_*)',
    produce: async (s) => {
      const p = await peer(s, echoPeer());
      return socketFailure(s, () => tls.connect({ host: L, port: p.port, rejectUnauthorized: false }));
    },
    kind: 'dial', notSent: true, connectionDead: false,
  },
  {
    name: 'TLS to a peer that hangs up during the handshake',
    produce: async (s) => {
      const p = await onFirstData(s, 'close-on-data', (socket) => socket.destroy());
      return socketFailure(s, () => tls.connect({ host: L, port: p.port }));
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNRESET',
  },
  {
    name: 'TLS to a self-signed certificate (not transient)',
    produce: async (s) => {
      const port = await h2Server(s, () => {}, { secure: true });
      return socketFailure(s, () => tls.connect({ host: L, port }));
    },
    kind: 'dial', notSent: true, connectionDead: false, transient: false, code: 'DEPTH_ZERO_SELF_SIGNED_CERT',
  },
];

const h2Cases: Case[] = [
  {
    name: 'session to a closed port: pending stream cancelled, caused by ECONNREFUSED',
    produce: async (s) => {
      const p = await refusing();
      return h2Request(s, `http://${L}:${p.port}`);
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  ...(
    [
      ['REFUSED_STREAM', C.NGHTTP2_REFUSED_STREAM, true, true],
      ['ENHANCE_YOUR_CALM', C.NGHTTP2_ENHANCE_YOUR_CALM, false, true],
      ['INTERNAL_ERROR', C.NGHTTP2_INTERNAL_ERROR, false, true],
      ['PROTOCOL_ERROR', C.NGHTTP2_PROTOCOL_ERROR, false, false],
    ] as const
  ).map(
    ([code, rst, notSent, transient]): Case => ({
      name: `server resets the stream with ${code}`,
      produce: async (s) => {
        const port = await h2Server(s, (stream) => stream.close(rst));
        return h2Request(s, `http://${L}:${port}`);
      },
      kind: 'stream', notSent, connectionDead: false, transient, code,
    }),
  ),
  {
    name: 'request on a session the server sent GOAWAY(NO_ERROR): refused stream',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.respond({ ':status': 200 }), { onSession: (x) => x.goaway(C.NGHTTP2_NO_ERROR) });
      return h2Request(s, `http://${L}:${port}`, { afterGoaway: true });
    },
    kind: 'stream', notSent: true, connectionDead: false, code: 'REFUSED_STREAM',
  },
  {
    name: 'server sends GOAWAY(INTERNAL_ERROR) (ERR_HTTP2_SESSION_ERROR)',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.session?.goaway(C.NGHTTP2_INTERNAL_ERROR));
      return h2Request(s, `http://${L}:${port}`);
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'INTERNAL_ERROR',
  },
  {
    name: 'server resets the TCP connection mid-stream',
    produce: async (s) => {
      const port = await h2Server(s, (_stream, sockets) => setTimeout(() => sockets.forEach((k) => k.resetAndDestroy()), 20));
      return h2Request(s, `http://${L}:${port}`);
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'ECONNRESET',
  },
  {
    name: 'request on a destroyed session (ERR_HTTP2_INVALID_SESSION)',
    produce: async (s) => {
      const port = await h2Server(s, () => {});
      const session = http2.connect(`http://${L}:${port}`);
      session.on('error', () => {});
      session.destroy();
      return new Promise((_, reject) => {
        try {
          session.request({ ':path': '/' });
        } catch (err) {
          reject(err);
        }
      });
    },
    kind: 'connection', notSent: true, connectionDead: true, code: 'ERR_HTTP2_INVALID_SESSION',
  },
  {
    name: 'keepalive ping cancelled by the session closing (ERR_HTTP2_PING_CANCEL)',
    produce: async (s) => {
      const port = await h2Server(s, () => {});
      const session = http2.connect(`http://${L}:${port}`);
      s.defer(() => session.destroy());
      session.on('error', () => {});
      return new Promise((_, reject) =>
        session.once('connect', () => {
          session.ping((err) => reject(err ?? new Error('capture: ping succeeded')));
          session.destroy();
        }),
      );
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'ERR_HTTP2_PING_CANCEL',
  },
  {
    name: 'the caller aborts the stream (AbortError)',
    produce: async (s) => {
      const port = await h2Server(s, () => {});
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 20);
      return h2Request(s, `http://${L}:${port}`, { signal: controller.signal });
    },
    kind: 'cancelled', notSent: false, connectionDead: false, transient: false,
  },
];

const undiciCases: Case[] = [
  {
    name: 'request: connect refused',
    produce: async () => request(`http://${L}:${(await refusing()).port}/`),
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: "fetch: connect refused ('fetch failed' wrapping ECONNREFUSED)",
    produce: async () => fetch(`http://${L}:${(await refusing()).port}/`),
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'fetch: happy eyeballs, both families refused (AggregateError)',
    produce: async (s) => {
      const dispatcher = await agent(s, { connect: { lookup: dualStackLookup, autoSelectFamily: true } });
      return fetch(`http://dual.test:${(await refusing()).port}/`, { dispatcher });
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'request: TLS handshake never completes (UND_ERR_CONNECT_TIMEOUT)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      const dispatcher = await agent(s, { connect: { timeout: 150 } });
      return request(`https://${L}:${p.port}/`, { dispatcher });
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'UND_ERR_CONNECT_TIMEOUT',
  },
  {
    name: 'fetch: connect timeout against a blackhole',
    produce: async (s) => {
      const p = await peer(s, blackhole());
      const dispatcher = await agent(s, { connect: { timeout: 150 } });
      return fetch(`http://${p.address}/`, { dispatcher });
    },
    kind: 'dial', notSent: true, connectionDead: false, code: 'UND_ERR_CONNECT_TIMEOUT',
  },
  {
    name: 'request: server never answers (UND_ERR_HEADERS_TIMEOUT)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      const dispatcher = await agent(s, { headersTimeout: 200 });
      return request(`http://${L}:${p.port}/`, { dispatcher });
    },
    kind: 'timeout', notSent: false, connectionDead: false, transient: true, code: 'UND_ERR_HEADERS_TIMEOUT',
  },
  {
    name: 'fetch: server never answers (headers timeout under fetch failed)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      const dispatcher = await agent(s, { headersTimeout: 200 });
      return fetch(`http://${L}:${p.port}/`, { dispatcher });
    },
    kind: 'timeout', notSent: false, connectionDead: false, code: 'UND_ERR_HEADERS_TIMEOUT',
  },
  {
    name: 'request: body stalls (UND_ERR_BODY_TIMEOUT)',
    produce: async (s) => {
      const p = await onFirstData(s, 'slow-body', (socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab'));
      const dispatcher = await agent(s, { bodyTimeout: 200 });
      const res = await request(`http://${L}:${p.port}/`, { dispatcher });
      return res.body.text();
    },
    kind: 'timeout', notSent: false, connectionDead: false, code: 'UND_ERR_BODY_TIMEOUT',
  },
  {
    name: "request: server closes after the request ('other side closed')",
    produce: async (s) => request(`http://${L}:${(await onFirstData(s, 'close-on-data', (k) => k.destroy())).port}/`),
    kind: 'connection', notSent: false, connectionDead: true, code: 'UND_ERR_SOCKET',
  },
  {
    name: 'fetch: server closes after the request',
    produce: async (s) => fetch(`http://${L}:${(await onFirstData(s, 'close-on-data', (k) => k.destroy())).port}/`),
    kind: 'connection', notSent: false, connectionDead: true, code: 'UND_ERR_SOCKET',
  },
  {
    name: 'request: server resets after the request (read ECONNRESET)',
    produce: async (s) => request(`http://${L}:${(await onFirstData(s, 'reset-on-data', (k) => k.resetAndDestroy())).port}/`),
    kind: 'connection', notSent: false, connectionDead: true, code: 'ECONNRESET',
  },
  {
    name: "fetch: connection dies mid-body ('terminated' wrapping other side closed)",
    produce: async (s) => {
      const p = await onFirstData(s, 'die-mid-body', (k) => {
        k.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab');
        setTimeout(() => k.destroy(), 20);
      });
      const res = await fetch(`http://${L}:${p.port}/`);
      return res.text();
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'UND_ERR_SOCKET',
  },
  {
    name: 'request: the caller aborts (DOMException AbortError)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      return request(`http://${L}:${p.port}/`, { signal: abortSoon() });
    },
    kind: 'cancelled', notSent: false, connectionDead: false, transient: false,
  },
  {
    name: 'fetch: AbortSignal.timeout() fires (DOMException TimeoutError)',
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      return fetch(`http://${L}:${p.port}/`, { signal: AbortSignal.timeout(50) });
    },
    kind: 'timeout', notSent: false, connectionDead: false,
  },
  {
    name: "fetch: the caller aborts with its own reason (classify told the caller's signal)",
    produce: async (s) => {
      const p = await peer(s, acceptAndHold());
      return fetch(`http://${L}:${p.port}/`, { signal: callerAbort.signal });
    },
    signal: callerAbort.signal,
    kind: 'cancelled', notSent: false, connectionDead: false,
  },
  {
    name: 'request: the dispatcher was destroyed (UND_ERR_DESTROYED)',
    produce: async (s) => {
      const dispatcher = await agent(s, {});
      await dispatcher.destroy();
      return request(`http://${L}:1/`, { dispatcher });
    },
    kind: 'cancelled', notSent: false, connectionDead: false, code: 'UND_ERR_DESTROYED',
  },
  {
    name: 'request: responseError interceptor on a 503 (ResponseError)',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.respond({ ':status': 503 }, { endStream: true }), { secure: true });
      const dispatcher = (await agent(s, { allowH2: true, connect: { ca: CERT } })).compose(interceptors.responseError());
      return request(`https://${L}:${port}/`, { dispatcher });
    },
    kind: 'application', notSent: false, connectionDead: false, transient: false, code: 'HTTP_503',
  },
  {
    name: 'request over HTTP/2: stream refused (REFUSED_STREAM)',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.close(C.NGHTTP2_REFUSED_STREAM), { secure: true });
      return request(`https://${L}:${port}/`, { dispatcher: await agent(s, { allowH2: true, connect: { ca: CERT } }) });
    },
    kind: 'stream', notSent: true, connectionDead: false, code: 'REFUSED_STREAM',
  },
  {
    name: 'request over HTTP/2: stream cancelled by the server (UND_ERR_INFO)',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.close(C.NGHTTP2_CANCEL), { secure: true });
      return request(`https://${L}:${port}/`, { dispatcher: await agent(s, { allowH2: true, connect: { ca: CERT } }) });
    },
    kind: 'stream', notSent: false, connectionDead: false,
  },
  {
    name: 'request over HTTP/2: GOAWAY with an error (UND_ERR_SOCKET)',
    produce: async (s) => {
      const port = await h2Server(s, (stream) => stream.session?.goaway(C.NGHTTP2_INTERNAL_ERROR), { secure: true });
      return request(`https://${L}:${port}/`, { dispatcher: await agent(s, { allowH2: true, connect: { ca: CERT } }) });
    },
    kind: 'connection', notSent: false, connectionDead: true, code: 'UND_ERR_SOCKET',
  },
];

function abortSoon(): AbortSignal {
  const c = new AbortController();
  setTimeout(() => c.abort(), 20);
  return c.signal;
}

/** A raw HTTP/2 server posing as a grpc server, misbehaving at the transport level. */
function rawGrpcPeer(s: Scope, onStream: Parameters<typeof h2Server>[1]): Promise<number> {
  return h2Server(s, onStream);
}

// Plain grpc-js (no GrpcGuard): a status's details cannot prove it unsent, since a server relays
// them verbatim after answering (see CLIENT_MADE in classify-grpc.ts); the kind still says what failed.
const grpcCases: Case[] = [
  {
    name: 'UNAVAILABLE: connect refused (No connection established)',
    produce: async (s) => grpcCall(s, (await refusing()).port),
    kind: 'dial', notSent: false, connectionDead: false, code: 'ECONNREFUSED',
  },
  {
    name: 'UNAVAILABLE: peer resets every connection',
    produce: async (s) => grpcCall(s, (await peer(s, resetOnAccept())).port),
    kind: 'dial', notSent: false, connectionDead: false,
  },
  {
    name: 'DEADLINE_EXCEEDED while waiting for a connection (plain grpc-js: not provably unsent)',
    produce: async (s) => grpcCall(s, (await peer(s, acceptAndHold())).port, { deadlineMs: 200 }),
    kind: 'timeout', notSent: false, connectionDead: false, code: 'DEADLINE_EXCEEDED',
  },
  {
    name: 'DEADLINE_EXCEEDED with the call on the wire',
    produce: async (s) => grpcCall(s, await grpcServer(s, () => {}), { deadlineMs: 200 }),
    kind: 'timeout', notSent: false, connectionDead: false, transient: true, code: 'DEADLINE_EXCEEDED',
  },
  {
    name: 'CANCELLED by the caller',
    produce: async (s) => grpcCall(s, await grpcServer(s, () => {}), { onCall: (call) => setTimeout(() => call.cancel(), 50) }),
    kind: 'cancelled', notSent: false, connectionDead: false, code: 'CANCELLED',
  },
  {
    name: 'NOT_FOUND sent by the server',
    produce: async (s) => grpcCall(s, await grpcServer(s, (_call, cb) => cb({ code: grpc.status.NOT_FOUND, details: 'no such key' }))),
    kind: 'application', notSent: false, connectionDead: false, transient: false, code: 'NOT_FOUND',
  },
  {
    name: "UNAVAILABLE sent by the server, details 'rpc error: EOF' (its upstream died)",
    produce: async (s) => grpcCall(s, await grpcServer(s, (_call, cb) => cb({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' }))),
    kind: 'connection', notSent: false, connectionDead: false, transient: true, code: 'EOF',
  },
  {
    name: 'UNAVAILABLE: stream refused (RST_STREAM REFUSED_STREAM)',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.close(C.NGHTTP2_REFUSED_STREAM))),
    kind: 'stream', notSent: false, connectionDead: false, code: 'REFUSED_STREAM',
  },
  {
    name: 'RESOURCE_EXHAUSTED from RST_STREAM ENHANCE_YOUR_CALM (not a dead connection)',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.close(C.NGHTTP2_ENHANCE_YOUR_CALM))),
    kind: 'stream', notSent: false, connectionDead: false, code: 'ENHANCE_YOUR_CALM',
  },
  {
    name: 'CANCELLED from RST_STREAM CANCEL (the server ended one stream)',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.close(C.NGHTTP2_CANCEL))),
    kind: 'stream', notSent: false, connectionDead: false, code: 'CANCEL',
  },
  {
    name: 'INTERNAL from RST_STREAM INTERNAL_ERROR',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.close(C.NGHTTP2_INTERNAL_ERROR))),
    kind: 'stream', notSent: false, connectionDead: false, code: 'INTERNAL_ERROR',
  },
  {
    name: 'UNAVAILABLE: connection dropped mid-call',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (_st, sockets) => setTimeout(() => sockets.forEach((k) => k.destroy()), 30))),
    kind: 'connection', notSent: false, connectionDead: true, code: 'UNAVAILABLE',
  },
  {
    name: 'UNAVAILABLE: connection reset mid-call (read ECONNRESET)',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (_st, sockets) => setTimeout(() => sockets.forEach((k) => k.resetAndDestroy()), 30))),
    kind: 'connection', notSent: false, connectionDead: true, code: 'ECONNRESET',
  },
  {
    name: 'INTERNAL: GOAWAY with an error closes the session under the call',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.session?.goaway(C.NGHTTP2_INTERNAL_ERROR))),
    kind: 'connection', notSent: false, connectionDead: true,
  },
  {
    name: 'UNAVAILABLE mapped from an HTTP 503 (a proxy answered)',
    produce: async (s) => grpcCall(s, await rawGrpcPeer(s, (st) => st.respond({ ':status': 503 }, { endStream: true }))),
    kind: 'application', notSent: false, connectionDead: false, code: 'UNAVAILABLE',
  },
];

const table: Array<[string, Case[]]> = [
  ['net', netCases],
  ['tls', tlsCases],
  ['node:http2', h2Cases],
  ['undici', undiciCases],
  ['@grpc/grpc-js', grpcCases],
];

for (const [client, cases] of table) {
  describe(`classify: real ${client} failures`, () => {
    // Concurrent: most cases settle in milliseconds, a few wait out a client's own timer.
    it.concurrent.for(cases.map((c) => [c.name, c] as const))('%s', async ([, c], { expect }) => {
      const err = await capture(c.produce);
      const result = classify(err, c.signal === undefined ? undefined : { signal: c.signal });
      const got = { kind: result.kind, notSent: result.notSent, connectionDead: result.connectionDead };
      expect(got, `classified ${describeError(err)} as ${JSON.stringify(result.code)}`).toEqual({
        kind: c.kind,
        notSent: c.notSent,
        connectionDead: c.connectionDead,
      });
      if (c.transient !== undefined) expect(result.transient).toBe(c.transient);
      if (c.code !== undefined) expect(result.code).toBe(c.code);
    });
  });
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? ` <- ${describeError(err.cause)}` : '';
  return `${err.name}(${String(code)}: ${err.message.slice(0, 120)})${cause}`;
}
