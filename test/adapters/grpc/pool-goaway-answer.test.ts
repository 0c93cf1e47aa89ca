/**
 * A status a stock grpc-js server chose is final, even when it sent GOAWAY first (issue 12,
 * defect 1): the pool must not send an idempotent call back for a fresh channel once the server
 * has answered. The server retires its connection by its own max-connection-age, so it keeps
 * serving: counting the calls it saw shows whether the call was sent again.
 */
import * as grpc from '@grpc/grpc-js';
import { expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

it('an idempotent method answered NOT_FOUND after the server sent GOAWAY gets NOT_FOUND, and is not sent again', async () => {
  let seen = 0;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  // GOAWAY 100 ms into the connection (grpc-js adds up to 10 % jitter), the answer at 400 ms.
  const server = new grpc.Server({ 'grpc.max_connection_age_ms': 100, 'grpc.max_connection_age_grace_ms': 5_000 });
  const unused = (_c: unknown, cb: grpc.sendUnaryData<Buffer>): void => cb({ code: grpc.status.UNIMPLEMENTED });
  server.addService(echoService, {
    Echo: unused,
    Hold: unused,
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => c.end(),
    Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
    Fail: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      seen++;
      const t = setTimeout(() => {
        timers.delete(t);
        cb({ code: grpc.status.NOT_FOUND, details: 'no such item' });
      }, 400);
      timers.add(t);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  cleanup.push(() => {
    for (const t of timers) clearTimeout(t);
    server.forceShutdown();
  });
  const guard = new GrpcGuard({ connectTimeout: 1_000, retry: false, closeTimeout: 100, breaker: new HostBreaker(), idempotent: () => true });
  const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => guard.close());
  cleanup.push(() => client.close());
  let retired = 0;
  guard.on('retired', () => retired++);

  const err = await failure(call(client, 'Fail', 'x', { deadline: Date.now() + 5_000 }));
  expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.NOT_FOUND, details: 'no such item' });
  expect(retired).toBeGreaterThanOrEqual(1); // the GOAWAY did reach the pool before the answer
  expect(seen).toBe(1);
});
