/**
 * A real grpc-js server with a generic service (Buffer passthrough, no codegen), a client
 * constructor for it, and a counting TCP relay that stands in front of it: the relay counts the
 * connections the clients open and can die (every connection reset, port closed) and come back.
 * Everything binds 127.0.0.1 or ::1 only.
 */
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { PooledChannel } from '../../../src/adapters/grpc/channel-connector.js';
import type { CallHost } from '../../../src/adapters/grpc/guarded-call.js';
import type { SpecTable } from '../../../src/adapters/grpc/target.js';
import type { Clock } from '../../../src/core/clock.js';
import type { ConnectionPool } from '../../../src/pool/connection-pool.js';
import type { LoopbackHost } from '../../../src/testing/tcp-peers.js';

const passthrough = (b: Buffer): Buffer => b;
const method = (name: string, requestStream: boolean, responseStream: boolean) => ({
  path: `/dialguard.test.Echo/${name}`,
  requestStream,
  responseStream,
  requestSerialize: passthrough,
  requestDeserialize: passthrough,
  responseSerialize: passthrough,
  responseDeserialize: passthrough,
});

/** Echo: answers its request; Hold: answers when released; Fail: answers the status in its request. */
export const echoService = {
  Echo: method('Echo', false, false),
  Hold: method('Hold', false, false),
  Fail: method('Fail', false, false),
  Count: method('Count', false, true),
  Chat: method('Chat', true, true),
} satisfies grpc.ServiceDefinition;

type Unary = (request: Buffer, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response?: Buffer) => void) => grpc.ClientUnaryCall;

/** The generic client's methods. */
export interface EchoClient extends grpc.Client {
  Echo: Unary;
  Hold: Unary;
  Fail: Unary;
  Count(request: Buffer, metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientReadableStream<Buffer>;
  Chat(metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientDuplexStream<Buffer, Buffer>;
}

/** The generic client constructor (what codegen would have produced). */
export const EchoClient = grpc.makeGenericClientConstructor(echoService, 'Echo') as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => EchoClient;

/** One unary call; resolves with the response, rejects with the ServiceError. */
export function call(
  client: EchoClient,
  name: 'Echo' | 'Hold' | 'Fail',
  payload = 'x',
  options: grpc.CallOptions & { onCall?: (c: grpc.ClientUnaryCall) => void } = {},
): Promise<Buffer> {
  const { onCall, ...callOptions } = options;
  return new Promise((resolve, reject) => {
    const c = client[name](Buffer.from(payload), new grpc.Metadata(), callOptions, (err, res) => (err ? reject(err) : resolve(res!)));
    onCall?.(c);
  });
}

/** A failed call's ServiceError (fails the test if the call succeeded). */
export async function failure(p: Promise<unknown>): Promise<grpc.ServiceError & { cause?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error('the call succeeded');
}

/** A grpc-js server of {@link echoService} on loopback. */
export class EchoServer {
  readonly host: LoopbackHost;
  port = 0;
  #server: grpc.Server | undefined;
  /** Hold calls waiting to be answered. */
  readonly held = new Set<grpc.ServerUnaryCall<Buffer, Buffer>>();
  readonly #release = new Set<() => void>();
  /** Calls received, per method. */
  readonly calls = { Echo: 0, Hold: 0, Fail: 0, Count: 0, Chat: 0 };
  /** The deadline each call arrived with (ms from its arrival; Infinity for none). */
  readonly deadlines: number[] = [];
  /** The `x-token` values each Echo call arrived with. */
  readonly tokens: string[][] = [];
  /** The authority (`:authority`) each Echo call arrived with. */
  readonly authorities: string[] = [];
  /** Set to fail the next N Echo (or Count) calls with this status. */
  failNext: { count: number; code: grpc.status; details: string } | undefined;

  constructor(host: LoopbackHost = '127.0.0.1') {
    this.host = host;
  }

  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /** Answers every Hold call now. */
  releaseHeld(): void {
    for (const r of [...this.#release]) r();
  }

  async listen(port = this.port): Promise<this> {
    const server = new grpc.Server();
    server.addService(echoService, {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        this.calls.Echo++;
        this.#noteDeadline(c);
        this.tokens.push(c.metadata.get('x-token').map(String));
        this.authorities.push(c.getHost());
        const f = this.failNext;
        if (f !== undefined && f.count > 0) {
          f.count--;
          cb({ code: f.code, details: f.details });
          return;
        }
        cb(null, c.request);
      },
      Hold: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        this.calls.Hold++;
        this.#noteDeadline(c);
        this.held.add(c);
        const release = (): void => {
          this.#release.delete(release);
          this.held.delete(c);
          cb(null, c.request);
        };
        this.#release.add(release);
        c.on('cancelled', () => {
          this.#release.delete(release);
          this.held.delete(c);
        });
      },
      Fail: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        this.calls.Fail++;
        const [code, ...details] = String(c.request).split(':');
        cb({ code: Number(code), details: details.join(':') });
      },
      Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => {
        this.calls.Count++;
        const f = this.failNext;
        if (f !== undefined && f.count > 0) {
          f.count--;
          c.emit('error', { code: f.code, details: f.details });
          return;
        }
        // `n`: n messages then OK; `n:fail`: n messages then UNAVAILABLE 'rpc error: EOF'.
        const [count, fail] = String(c.request).split(':');
        for (let i = 0; i < Number(count); i++) c.write(Buffer.from(String(i)));
        if (fail === 'fail') c.emit('error', { code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' });
        else c.end();
      },
      Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        this.calls.Chat++;
        c.on('data', (d: Buffer) => c.write(d));
        c.on('end', () => c.end());
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${this.host.includes(':') ? `[${this.host}]` : this.host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.#server = server;
    return this;
  }

  /** Stops at once: every connection and call dropped. */
  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.#release.clear();
    this.held.clear();
    if (server === undefined) return;
    server.forceShutdown();
  }

  #noteDeadline(c: grpc.ServerUnaryCall<Buffer, Buffer>): void {
    const d = c.getDeadline();
    const at = d instanceof Date ? d.getTime() : d;
    this.deadlines.push(at === Infinity ? Infinity : at - Date.now());
  }
}

/** Starts an {@link EchoServer}. */
export function echoServer(host: LoopbackHost = '127.0.0.1'): Promise<EchoServer> {
  return new EchoServer(host).listen();
}

/**
 * A TCP relay in front of a server: counts the connections clients open (`attempts`), and can
 * reset them all while staying up (`resetConnections`), or `kill()` (every connection reset, port
 * closed: a dead process) and `listen()` again on the same port.
 */
export class CountingRelay {
  readonly host: LoopbackHost;
  readonly #upstream: { host: LoopbackHost; port: number };
  port = 0;
  attempts = 0;
  #server: net.Server | undefined;
  readonly #sockets = new Map<net.Socket, Promise<void>>();
  readonly #upstreams = new Map<net.Socket, net.Socket>();

  constructor(upstream: { host: LoopbackHost; port: number }, host: LoopbackHost = upstream.host) {
    this.#upstream = upstream;
    this.host = host;
  }

  get address(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /** Client connections open now. */
  get openSockets(): number {
    return this.#sockets.size;
  }

  async listen(): Promise<this> {
    if (this.#server !== undefined) return this;
    const server = net.createServer({ noDelay: true }, (socket) => {
      this.attempts++;
      const up = net.connect({ host: this.#upstream.host, port: this.#upstream.port, noDelay: true });
      socket.on('error', () => {});
      up.on('error', () => {});
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve())).then(() => {
        this.#sockets.delete(socket);
      });
      this.#sockets.set(socket, closed);
      this.#upstreams.set(socket, up);
      socket.once('close', () => this.#upstreams.delete(socket));
      socket.pipe(up);
      up.pipe(socket);
      // Either side ending ends the relay; a reset toward the client stays a reset.
      socket.once('close', () => up.destroy());
      up.once('close', () => socket.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.host, port: this.port }, () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
    return this;
  }

  /**
   * The `index`-th open client connection goes silent: nothing flows either way (PINGs go
   * unanswered) while TCP stays open, like a peer whose host froze.
   */
  silence(index: number): void {
    const socket = [...this.#sockets.keys()][index];
    const up = socket === undefined ? undefined : this.#upstreams.get(socket);
    if (socket === undefined || up === undefined) throw new Error(`no open connection #${index}`);
    socket.unpipe(up);
    up.unpipe(socket);
    socket.pause();
    up.pause();
  }

  /** Resets (RST) the `index`-th client connection still open (0: the oldest); keeps listening. */
  async resetConnection(index: number): Promise<void> {
    const entry = [...this.#sockets][index];
    if (entry === undefined) throw new Error(`no open connection #${index}`);
    entry[0].resetAndDestroy();
    await entry[1];
  }

  /** Resets (RST) every client connection; keeps listening. */
  async resetConnections(): Promise<void> {
    const open = [...this.#sockets];
    for (const [socket] of open) socket.resetAndDestroy();
    await Promise.all(open.map(([, closed]) => closed));
  }

  /** Dies: every connection reset, the port closed until {@link listen}. */
  async kill(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    const closing = this.resetConnections();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    await closing;
  }

  async close(): Promise<void> {
    await this.kill();
  }
}

/** Starts a {@link CountingRelay} in front of `upstream`. */
export function countingRelay(upstream: { host: LoopbackHost; port: number }, host?: LoopbackHost): Promise<CountingRelay> {
  return new CountingRelay(upstream, host).listen();
}

/**
 * The CallHost a GuardedCall test runs its calls on: no retries, non-idempotent methods, a 1 KiB
 * replay buffer, no reconnects or watchers; `ready` says whether the channel counts as READY.
 */
export function testCallHost(pool: ConnectionPool<PooledChannel>, specs: SpecTable, clock: Clock, ready: boolean): CallHost {
  return {
    pool,
    ready: () => ready,
    mistake: () => undefined,
    specs,
    clock,
    replayBufferSize: 1_024,
    idempotent: () => false,
    idempotentUse: { idempotent: true, resends: 0 },
    retry: undefined,
    reconnect: () => {},
    onChange: () => () => {},
    closed: false,
    refused: () => false,
  };
}
