/**
 * A client's own TLS mistake (no CA for a self-signed server) on a name dialled per address is
 * not retried, as on a name of one address: every address presented the certificate this client
 * refused. Before, the failure of all three came back as an AggregateError the retry rule did not
 * open, and each call cost 9 handshakes (3 attempts of 3 addresses) and ~1.5 s of backoff.
 */
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { lookupBreaker } from '../../../src/guard/addresses.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();
const ADDRESSES = ['127.0.0.1', '127.0.0.2', '127.0.0.3'];

/** One stock TLS grpc-js server listening on the three addresses, on one port. */
async function tlsServer(): Promise<number> {
  const server = new grpc.Server();
  server.addService(echoService, { Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) } as grpc.UntypedServiceImplementation);
  const creds = grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(TEST_CERT), private_key: Buffer.from(TEST_KEY) }], false);
  const bind = (address: string): Promise<number> => new Promise((resolve, reject) => server.bindAsync(address, creds, (e, p) => (e ? reject(e) : resolve(p))));
  const port = await bind(`${ADDRESSES[0]}:0`);
  for (const a of ADDRESSES.slice(1)) await bind(`${a}:${port}`);
  cleanup.push(() => server.forceShutdown());
  return port;
}

describe('grpc guard: a TLS mistake of the client, per address', () => {
  it('fails at the first attempt: one handshake per address, no retry', async () => {
    const port = await tlsServer();
    const lookup = ((_host: string, options: unknown, cb: (...args: unknown[]) => void) => {
      const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
      process.nextTick(() => (all ? cb(null, ADDRESSES.map((address) => ({ address, family: 4 }))) : cb(null, ADDRESSES[0], 4)));
    }) as unknown as net.LookupFunction;
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker, lookup, connectTimeout: 2_000, closeTimeout: 100, retry: { backoff: () => 10, budget: null } });
    const client = new EchoClient(`svc.test:${port}`, grpc.credentials.createSsl(), guard.clientOptions());
    cleanup.push(() => guard.close());
    cleanup.push(() => client.close());
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 5_000 }));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.cause).toBeInstanceOf(AggregateError);
    // One attempt: each address answered once (a certificate: alive), and the name's own entry
    // with them: 4 successes recorded, where three attempts recorded 12.
    expect(breaker.stats()).toMatchObject({ hosts: 3, succeeded: 3, failed: 0 }); // the addresses
    expect(lookupBreaker(breaker, lookup as never).stats()).toMatchObject({ hosts: 1, succeeded: 1, failed: 0 }); // the name's lookup
  });
});
