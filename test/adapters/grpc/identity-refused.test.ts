/**
 * A client whose own `checkServerIdentity` refuses the certificate (a pin that does not match:
 * grpc's `verifyOptions`, the usual way to pin) fails the same way on every connect. grpc-js
 * words it UNAVAILABLE with no code, so the guard read it as a dial that may pass: each call was
 * retried with backoff (3 handshakes and ~1.5 s a call), and each new call dialled again (an
 * outside review, r138: 20 calls took 31 s and 60 TLS handshakes; plain grpc-js 6 ms a call and 2
 * connections). It is now the client's own mistake, as a wrong CA is: not retried, and during
 * grpc's reconnect backoff a call fails at once with it, dialling nothing. Counted at a TCP relay.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { ChannelConnectError, GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

async function tlsEchoServer(): Promise<number> {
  const server = new grpc.Server();
  const unused = (_c: unknown, cb?: grpc.sendUnaryData<Buffer>): void => cb?.({ code: grpc.status.UNIMPLEMENTED });
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request),
    Hold: unused,
    Fail: unused,
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => c.end(),
    Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
  });
  const credentials = grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(TEST_KEY), cert_chain: Buffer.from(TEST_CERT) }], false);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return port;
}

describe("GrpcGuard: a client's own identity check that refuses the certificate", () => {
  it.each([
    ['returns an Error (a pin mismatch)', () => new Error('certificate pin mismatch')],
    [
      'throws',
      () => {
        throw new Error('certificate pin mismatch');
      },
    ],
  ])('%s: 10 calls with retries on fail at once, one connection during the reconnect backoff (was 3 handshakes and ~1.5 s a call)', async (_name, checkServerIdentity) => {
    const relay = await countingRelay({ host: '127.0.0.1', port: await tlsEchoServer() });
    cleanup.push(() => relay.close());
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker, connectTimeout: 2_000, closeTimeout: 100, idempotent: () => true });
    cleanup.push(() => guard.close());
    const pinned = grpc.credentials.createSsl(Buffer.from(TEST_CERT), null, null, { checkServerIdentity: checkServerIdentity as never });
    const client = new EchoClient(relay.address, pinned, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.initial_reconnect_backoff_ms': 5_000, ...guard.clientOptions() });
    cleanup.push(() => client.close());
    const started = performance.now();
    for (let i = 0; i < 10; i++) {
      const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 5_000 }));
      expect(err).toBeInstanceOf(ChannelConnectError);
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect((err.cause as Error).message).toBe('certificate pin mismatch');
    }
    expect(performance.now() - started).toBeLessThan(1_000); // one retry's backoff alone is 400-600 ms
    expect(relay.attempts).toBe(1);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
  });
});
