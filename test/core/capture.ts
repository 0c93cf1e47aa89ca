/**
 * Produces real failures, so `classify` is tested against what the clients really throw rather
 * than against objects shaped the way we expect. Each producer runs a real client (net, tls,
 * node:http2, undici, @grpc/grpc-js) against a real misbehaving peer on loopback (127.0.0.1 or
 * ::1 only), with short timeouts, and registers everything it opens with the {@link Scope}, which
 * closes it all whether the capture succeeds or not.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { TcpPeer } from '../../src/testing/tcp-peers.js';

/** Collects what a capture opened, to close it afterwards. */
export interface Scope {
  /** Registers a clean-up; they run in reverse order, errors ignored. */
  defer(close: () => unknown): void;
}

/**
 * Runs `produce` and returns what it rejected with. Fails if it resolves (the fault did not
 * happen) or does not settle within `limitMs`; always runs the scope's clean-ups.
 */
export async function capture(produce: (scope: Scope) => Promise<unknown>, limitMs = 4_000): Promise<unknown> {
  const closers: Array<() => unknown> = [];
  const scope: Scope = { defer: (close) => void closers.push(close) };
  let timer: NodeJS.Timeout | undefined;
  try {
    const outcome = await Promise.race([
      produce(scope).then(
        (value) => ({ state: 'resolved' as const, value }),
        (error: unknown) => ({ state: 'rejected' as const, error }),
      ),
      new Promise<{ state: 'timeout' }>((resolve) => {
        timer = setTimeout(() => resolve({ state: 'timeout' }), limitMs);
      }),
    ]);
    if (outcome.state === 'timeout') throw new Error(`capture: no failure within ${limitMs} ms`);
    if (outcome.state === 'resolved') throw new Error('capture: expected a failure, the operation succeeded');
    return outcome.error;
  } finally {
    clearTimeout(timer);
    for (const close of closers.reverse()) {
      try {
        await close();
      } catch {
        /* best effort */
      }
    }
  }
}

// A self-signed certificate for 127.0.0.1, ::1 and localhost, valid until 2126 (test fixture only).
export const CERT = `-----BEGIN CERTIFICATE-----
MIIBrTCCAVSgAwIBAgIUEllVlaV4RgZ5i3wXFyPdP1j0jykwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyOTE4MzQwMloYDzIxMjYxMTA1
MTgzNDAyWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAThDd7ewXAxr6kP2joJcsO6PncSYjBKHiKGpHj//kDoOhA7+3feVQ/M
3qy14jX+Br316NEAA92RUlUvVyIpDxhGo4GBMH8wHQYDVR0OBBYEFD7OKg8xrLV5
jMNc9+5P2cXaphFvMB8GA1UdIwQYMBaAFD7OKg8xrLV5jMNc9+5P2cXaphFvMA8G
A1UdEwEB/wQFMAMBAf8wLAYDVR0RBCUwI4IJbG9jYWxob3N0hwR/AAABhxAAAAAA
AAAAAAAAAAAAAAABMAoGCCqGSM49BAMCA0cAMEQCIGIDfoqlgyiIj3lm55n1nXod
s7UiB4QKJctanaITa4PMAiAfIdJxzXXJKyqHILflXPs+Q9vUkiffVHB6+6oHC2h4
8w==
-----END CERTIFICATE-----
`;
export const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgc8SgRe8CrxAUmrzX
Sr/S+HzHPfr10WmjkY7JnslRyhihRANCAAThDd7ewXAxr6kP2joJcsO6PncSYjBK
HiKGpHj//kDoOhA7+3feVQ/M3qy14jX+Br316NEAA92RUlUvVyIpDxhG
-----END PRIVATE KEY-----
`;

/** Starts a fault peer and closes it with the scope. */
export async function peer<P extends { close(): Promise<void> }>(scope: Scope, start: Promise<P>): Promise<P> {
  const p = await start;
  scope.defer(() => p.close());
  return p;
}

/** A TCP peer that runs `onData` on the first bytes each connection sends. */
export function onFirstData(scope: Scope, kind: string, onData: (socket: net.Socket) => void): Promise<TcpPeer> {
  return peer(scope, new TcpPeer(kind, {}, (socket) => socket.once('data', () => onData(socket))).listen());
}

/**
 * Connects with `open` and rejects with the socket's first error. `write`: 'once' sends a line
 * after connecting, 'flood' keeps writing (to meet EPIPE after the peer closed).
 */
export function socketFailure(scope: Scope, open: () => net.Socket, write: 'none' | 'once' | 'flood' = 'none'): Promise<never> {
  return new Promise((_, reject) => {
    const socket = open();
    let flood: NodeJS.Timeout | undefined;
    scope.defer(() => {
      clearInterval(flood);
      socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('capture: socket closed without an error')));
    socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', () => {
      if (write === 'none') return;
      socket.write('hello\n');
      if (write === 'flood') flood = setInterval(() => socket.write('x'.repeat(1024)), 10);
    });
  });
}

/** A lookup that answers every name with both loopback addresses (::1 first): happy eyeballs. */
export function dualStackLookup(
  _host: string,
  options: dns.LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void,
): void {
  if (options.all === true) callback(null, [{ address: '::1', family: 6 }, { address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
}

type LookupFunction = (
  host: string,
  options: dns.LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void,
) => void;

/**
 * A DNS server on 127.0.0.1 that answers every query NXDOMAIN (`nxdomain`) or never answers
 * (`silent`), and a lookup function resolving through it with Node's c-ares resolver. The name
 * lookup fails for real, without a query ever leaving loopback.
 */
export async function loopbackDns(scope: Scope, mode: 'nxdomain' | 'silent'): Promise<LookupFunction> {
  const server = dgram.createSocket('udp4');
  scope.defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
  server.on('message', (query, rinfo) => {
    if (mode === 'silent' || query.length < 12) return;
    const reply = Buffer.from(query);
    reply[2] = (reply[2]! | 0x80) & 0xf9; // QR = response; clear AA, TC
    reply[3] = 0x83; // RA, RCODE = 3 (NXDOMAIN)
    server.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => server.bind(0, '127.0.0.1', resolve));
  const resolver = new dns.Resolver({ timeout: 150, tries: 1 });
  resolver.setServers([`127.0.0.1:${server.address().port}`]);
  scope.defer(() => resolver.cancel());
  return (host, options, callback) => {
    resolver.resolve4(host, (err, addresses) => {
      if (err !== null) return callback(err, options.all === true ? [] : '');
      const first = addresses[0] ?? '127.0.0.1';
      if (options.all === true) callback(null, addresses.map((address) => ({ address, family: 4 })));
      else callback(null, first, 4);
    });
  };
}

/** A node:http2 server (TLS when `secure`) running `onStream` for each stream. */
export async function h2Server(
  scope: Scope,
  onStream: (stream: http2.ServerHttp2Stream, sockets: Set<net.Socket>) => void,
  options: { secure?: boolean; onSession?: (session: http2.ServerHttp2Session) => void } = {},
): Promise<number> {
  const server = options.secure ? http2.createSecureServer({ key: KEY, cert: CERT, allowHTTP1: true }) : http2.createServer();
  const sockets = new Set<net.Socket>();
  server.on(options.secure ? 'secureConnection' : 'connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  server.on('session', (session) => {
    session.on('error', () => {});
    options.onSession?.(session);
  });
  server.on('stream', (stream) => {
    stream.on('error', () => {});
    onStream(stream, sockets);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  scope.defer(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return (server.address() as net.AddressInfo).port;
}

/**
 * One request on a fresh node:http2 session; rejects with the stream's error (or the session's,
 * if the stream gets none), resolves when a response ends.
 */
export function h2Request(scope: Scope, url: string, options: { signal?: AbortSignal; afterGoaway?: boolean } = {}): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    scope.defer(() => session.destroy());
    let sessionError: unknown;
    session.on('error', (err) => {
      sessionError = err;
    });
    const send = (): void => {
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request({ ':path': '/', ':method': 'POST' }, options.signal ? { signal: options.signal } : {});
      } catch (err) {
        reject(err);
        return;
      }
      stream.on('error', reject);
      stream.on('response', () => {
        stream.resume();
        stream.on('end', () => resolve('response'));
      });
      stream.on('close', () => setImmediate(() => reject(sessionError ?? new Error(`capture: stream closed (rst ${stream.rstCode}) without an error`))));
      stream.end('x');
    };
    if (options.afterGoaway) session.once('goaway', send);
    else send();
  });
}

const passthrough = (b: Buffer): Buffer => b;
const echoService = {
  Echo: {
    path: '/dialguard.test.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: passthrough,
    requestDeserialize: passthrough,
    responseSerialize: passthrough,
    responseDeserialize: passthrough,
  },
} satisfies grpc.ServiceDefinition;
const EchoClient = grpc.makeGenericClientConstructor(echoService, 'Echo');

/** A grpc-js server whose one method is `impl`. */
export async function grpcServer(scope: Scope, impl: grpc.handleUnaryCall<Buffer, Buffer>): Promise<number> {
  const server = new grpc.Server();
  server.addService(echoService, { Echo: impl });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  scope.defer(() => server.forceShutdown());
  return port;
}

/** One unary call with a fresh grpc-js client; rejects with the ServiceError. */
export function grpcCall(
  scope: Scope,
  port: number,
  options: { deadlineMs?: number; onCall?: (call: grpc.ClientUnaryCall) => void } = {},
): Promise<unknown> {
  const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.initial_reconnect_backoff_ms': 100,
  }) as unknown as grpc.Client & {
    Echo(req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Buffer) => void): grpc.ClientUnaryCall;
  };
  scope.defer(() => client.close());
  return new Promise((resolve, reject) => {
    const call = client.Echo(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + (options.deadlineMs ?? 2_000) }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
    options.onCall?.(call);
  });
}
