/**
 * bench/addresses' gRPC lane: the same name and addresses, served by grpc-js servers, one unary
 * call per new channel (so each call connects).
 *
 * - raw: a plain grpc-js client per call, the addresses given by a resolver registered for the
 *   `benchaddr:` scheme (grpc-js has no `lookup` option: a resolver is its way to answer a name),
 *   pick_first with grpc-js's own happy eyeballs (250 ms per address), a local subchannel pool so
 *   no call rides another's connection.
 * - dialguard: a `GrpcGuard` per call (all sharing one default HostBreaker), the name resolved by
 *   its `lookup`, each address guarded apart.
 */
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import type { HostBreaker } from '../../src/index.js';

const passthrough = (b: Buffer): Buffer => b;
const echo = {
  Echo: {
    path: '/bench.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: passthrough,
    requestDeserialize: passthrough,
    responseSerialize: passthrough,
    responseDeserialize: passthrough,
  },
} satisfies grpc.ServiceDefinition;

type Unary = (request: Buffer, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null) => void) => void;
const EchoClient = grpc.makeGenericClientConstructor(echo, 'Echo') as unknown as new (
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => grpc.Client & { Echo: Unary };

/** grpc-js echo servers on `hosts`, one port (the first free one). */
export async function grpcServers(hosts: readonly string[]): Promise<{ port: number; close: () => void }> {
  let port = 0;
  const servers: grpc.Server[] = [];
  for (const host of hosts) {
    const server = new grpc.Server();
    server.addService(echo, { Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    servers.push(server);
  }
  return { port, close: () => servers.forEach((s) => s.forceShutdown()) };
}

/** One call on `client`, closed after; rejects with the call's error. */
function callOnce(client: grpc.Client & { Echo: Unary }, deadlineMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    client.Echo(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err) => (err ? reject(err) : resolve()));
  }).finally(() => client.close());
}

let scheme: { addresses: () => string[] } | undefined;

/**
 * A raw grpc-js call per invocation to `name:port` through the `benchaddr:` resolver, which
 * answers with `addresses()` (asked once per channel, as a DNS lookup would be).
 */
export function rawGrpcCall(name: string, port: number, addresses: () => string[], deadlineMs: number): () => Promise<void> {
  if (scheme === undefined) {
    scheme = { addresses };
    const current = scheme;
    class BenchResolver implements grpc.experimental.Resolver {
      readonly #listener: grpc.experimental.ResolverListener;
      readonly #port: number;
      constructor(target: grpc.experimental.GrpcUri, listener: grpc.experimental.ResolverListener) {
        this.#listener = listener;
        this.#port = Number(target.path.split(':')[1]);
      }
      updateResolution(): void {
        const endpoints = current.addresses().map((host) => ({ addresses: [{ host, port: this.#port }] }));
        process.nextTick(() => this.#listener({ ok: true, value: endpoints }, {}, null, ''));
      }
      destroy(): void {}
      static getDefaultAuthority(target: grpc.experimental.GrpcUri): string {
        return target.path;
      }
    }
    grpc.experimental.registerResolver('benchaddr', BenchResolver);
  }
  scheme.addresses = addresses;
  return () => callOnce(new EchoClient(`benchaddr:${name}:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }), deadlineMs);
}

/** A guarded call per invocation to `name:port`: a fresh GrpcGuard (so it connects) on `breaker`. */
export function guardedGrpcCall(name: string, port: number, lookup: net.LookupFunction, breaker: HostBreaker, connectTimeout: number, deadlineMs: number): () => Promise<void> {
  return async () => {
    const guard = new GrpcGuard({ breaker, lookup, connectTimeout, keepAliveInterval: 0 });
    try {
      await callOnce(new EchoClient(`${name}:${port}`, grpc.credentials.createInsecure(), guard.clientOptions()), deadlineMs);
    } catch (err) {
      // The breaker's refusal, as the HTTP lanes count it.
      throw (err as { cause?: unknown }).cause ?? err;
    } finally {
      await guard.close();
    }
  };
}
