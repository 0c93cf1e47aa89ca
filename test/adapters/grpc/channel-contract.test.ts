/**
 * The channel contract a drop-in must keep (issue 18): every promise below is checked on a plain
 * grpc-js client and on the same client made with `guard.clientOptions()`, against a stock grpc-js
 * server, with the same expectations. What is recorded is what a caller observes: the order of
 * events and callbacks, statuses and their metadata, connectivity states, and what the server saw.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, echoService } from './helpers.js';

const cleanup = leakCheckEach();
const { IDLE, CONNECTING, READY, SHUTDOWN } = grpc.connectivityState;

/** A stock grpc-js server: Echo answers with a trailer, Hold never answers, Fail fails with a trailer, Count streams. */
class ContractServer {
  port = 0;
  holds = 0;
  /** Deadlines the Hold calls arrived with (ms left on arrival). */
  readonly deadlines: number[] = [];
  #server: grpc.Server | undefined;

  async listen(port = 0): Promise<this> {
    const server = new grpc.Server();
    const trailer = (): grpc.Metadata => {
      const m = new grpc.Metadata();
      m.set('x-trailer', 'yes');
      return m;
    };
    server.addService(echoService, {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const header = new grpc.Metadata();
        header.set('x-header', 'yes');
        c.sendMetadata(header);
        cb(null, c.request, trailer());
      },
      Hold: (c: grpc.ServerUnaryCall<Buffer, Buffer>) => {
        this.holds++;
        const d = c.getDeadline();
        const at = d instanceof Date ? d.getTime() : d;
        this.deadlines.push(at === Infinity ? Infinity : at - Date.now());
      },
      Fail: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        cb({ code: grpc.status.NOT_FOUND, details: 'no such key', metadata: trailer() });
      },
      Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => {
        for (let i = 0; i < Number(String(c.request)); i++) c.write(Buffer.from(String(i)));
        c.end(trailer());
      },
      Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        c.on('data', (d: Buffer) => c.write(d));
        c.on('end', () => c.end());
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    this.#server = server;
    return this;
  }

  close(): void {
    this.#server?.forceShutdown();
    this.#server = undefined;
  }
}

type Make = (address: string) => EchoClient;

/** The two clients every promise is checked on. */
const kinds: Array<[string, () => Make]> = [
  ['plain grpc-js', () => (address) => new EchoClient(address, grpc.credentials.createInsecure())],
  [
    'guarded',
    () => {
      const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, breaker: new HostBreaker({ failureThreshold: 100 }) });
      cleanup.push(() => guard.close());
      return (address) => new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
    },
  ],
];

async function serve(): Promise<ContractServer> {
  const server = await new ContractServer().listen();
  cleanup.push(() => server.close());
  return server;
}

function open(make: Make, address: string): EchoClient {
  const client = make(address);
  cleanup.push(() => client.close());
  return client;
}

describe.each(kinds)('channel contract: %s', (_kind, factory) => {
  it('callback order, unary: metadata, then the callback with the response, then the status with the trailers', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    const events: string[] = [];
    await new Promise<void>((resolve) => {
      const c = client.Echo(Buffer.from('x'), new grpc.Metadata(), {}, (err, res) => events.push(`callback ${err?.code ?? String(res)}`));
      c.on('metadata', (m: grpc.Metadata) => events.push(`metadata ${String(m.get('x-header'))}`));
      c.on('status', (s: grpc.StatusObject) => {
        events.push(`status ${s.code} ${String(s.metadata.get('x-trailer'))}`);
        resolve();
      });
    });
    expect(events).toEqual(['metadata yes', 'callback x', 'status 0 yes']);
  });

  it('callback order, server streaming: metadata, every message in order, end, then the status with the trailers', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    const events: string[] = [];
    const stream = client.Count(Buffer.from('3'), new grpc.Metadata(), {});
    stream.on('metadata', () => events.push('metadata'));
    stream.on('data', (d: Buffer) => events.push(`data ${String(d)}`));
    stream.on('end', () => events.push('end'));
    await new Promise<void>((resolve) =>
      stream.on('status', (s: grpc.StatusObject) => {
        events.push(`status ${s.code} ${String(s.metadata.get('x-trailer'))}`);
        resolve();
      }),
    );
    await eventually(() => events.includes('end'), (x) => x);
    expect(events.filter((e) => e !== 'end')).toEqual(['metadata', 'data 0', 'data 1', 'data 2', 'status 0 yes']);
  });

  it('trailers: a failed call\'s ServiceError carries the status, the details and the trailing metadata', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
      client.Fail(Buffer.from('x'), new grpc.Metadata(), {}, (e) => (e ? resolve(e) : reject(new Error('succeeded')))),
    );
    expect({ code: err.code, details: err.details, trailer: err.metadata.get('x-trailer') }).toEqual({
      code: grpc.status.NOT_FOUND,
      details: 'no such key',
      trailer: ['yes'],
    });
    expect(err.message).toBe('5 NOT_FOUND: no such key');
  });

  it('deadlines: the server sees the deadline, and the caller gets DEADLINE_EXCEEDED at it', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    // Connected first, so the deadline is all the call's.
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 2_000, (e) => (e ? reject(e) : resolve())));
    const t0 = performance.now();
    const err = await new Promise<grpc.ServiceError>((resolve) => client.Hold(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + 200 }, (e) => resolve(e!)));
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(server.holds).toBe(1);
    expect(server.deadlines[0]).toBeGreaterThan(100);
    expect(server.deadlines[0]).toBeLessThanOrEqual(200);
  });

  it('cancel: CANCELLED "Cancelled on client", delivered after cancel() returns, once', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    let inside = false;
    const seen: Array<[boolean, grpc.status | undefined, string | undefined]> = [];
    const c = client.Hold(Buffer.from('x'), new grpc.Metadata(), {}, (e) => seen.push([inside, e?.code, e?.details]));
    await eventually(() => server.holds, (n) => n === 1);
    inside = true;
    c.cancel();
    inside = false;
    await eventually(() => seen.length, (n) => n === 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(seen).toEqual([[false, grpc.status.CANCELLED, 'Cancelled on client']]);
  });

  it('wait-for-ready: a call with waitForReady waits for a server that comes up late, and is served', async () => {
    const peer = await refusing();
    const server = new ContractServer();
    cleanup.push(() => server.close());
    const client = open(factory(), peer.address);
    const late = new Promise<void>((resolve, reject) => setTimeout(() => server.listen(peer.port).then(() => resolve(), reject), 300));
    cleanup.push(() => late);
    const res = await new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from('waited'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 4_000 }, (e, r) => (e ? reject(e) : resolve(r!))),
    );
    expect(String(res)).toBe('waited');
  });

  // grpc-js itself may call a watcher inside getConnectivityState(true); the guarded channel never
  // does (server-answers.test.ts), which no caller can tell from the outside as a difference.
  it('connectivity state: IDLE, then CONNECTING and READY once asked to connect, each seen by a watcher; SHUTDOWN once closed', async () => {
    const server = await serve();
    const client = open(factory(), `127.0.0.1:${server.port}`);
    const channel = client.getChannel();
    expect(channel.getConnectivityState(false)).toBe(IDLE);
    const seen: grpc.connectivityState[] = [];
    const ready = new Promise<void>((resolve) => {
      const watch = (state: grpc.connectivityState): void =>
        channel.watchConnectivityState(state, Date.now() + 2_000, () => {
          const now = channel.getConnectivityState(false);
          seen.push(now);
          if (now === READY) resolve();
          else watch(now);
        });
      watch(IDLE);
    });
    channel.getConnectivityState(true);
    await ready;
    expect(seen).toEqual([CONNECTING, READY]);
    client.close();
    expect(channel.getConnectivityState(false)).toBe(SHUTDOWN);
    expect(() => client.Echo(Buffer.from('x'), new grpc.Metadata(), {}, () => {})).toThrow(/shut down/i);
  });
});
