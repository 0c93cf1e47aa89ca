/**
 * An idempotent call the server ran, whose connection then died, is resent by the guard; when
 * that resend's connect is refused (the server is gone), the call failed with the refused
 * connect's status, which says "never sent" (`No connection established`, classify: a dial, not
 * sent). Yet the server had run it: a caller's own retry of a non-idempotent wrapper, logs and a
 * ServerSet failing over were told it never arrived (an outside review, r138: wrapped in
 * `retry({ idempotent: false })` the handler ran twice). A call sent once never ends as unsent.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { retry } from '../../../src/retry/retry.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();

describe('GrpcGuard: a call the server ran, resent to a server gone', () => {
  it('fails with a status that never says "not sent", so an outer non-idempotent retry does not send it again', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay({ host: '127.0.0.1', port: server.port });
    cleanup.push(() => relay.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100, connectTimeout: 1_000, idempotent: () => true });
    cleanup.push(() => guard.close());
    const client = new EchoClient(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());
    let sends = 0;
    const outer = retry(
      () => {
        sends++;
        return call(client, 'Hold', 'x', { deadline: Date.now() + 5_000 });
      },
      { idempotent: false, maxAttempts: 3, backoff: () => 1 },
    );
    const failed = failure(outer);
    await eventually(() => server.calls.Hold, (n) => n === 1);
    await relay.kill(); // every connection reset, the port closed: the resend's connect is refused
    const err = await failed;
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(classify(err).notSent).toBe(false);
    expect(sends).toBe(1);
    expect(server.calls.Hold).toBe(1);
  });
});
