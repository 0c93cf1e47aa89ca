/**
 * A TLS name nginx knows no site for: its default server with `ssl_reject_handshake on` answers
 * the ClientHello with a fatal `unrecognized_name` alert (Node: ERR_SSL_TLSV1_UNRECOGNIZED_NAME).
 * The host answered, and the same handshake fails the same way again: each adapter fails the
 * call at once on its one dial, as a plain client does. It was retried as a failed dial: 3
 * handshakes and ~1.5 s a call through GuardedAgent, Http2Client and GrpcGuard (an outside review).
 */
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { freePort } from '../../src/testing/local-process.js';
import { subscribe } from '../../src/observe/channels.js';
import { EchoClient, call } from '../adapters/grpc/helpers.js';
import { Nginx } from './nginx-server.js';

const open: Array<{ close(): Promise<void> | void }> = [];
afterEach(async () => {
  for (const c of open.splice(0).reverse()) await c.close();
});

const CODE = 'ERR_SSL_TLSV1_UNRECOGNIZED_NAME';
const CALLS = 3;

/** An nginx whose TLS port rejects every handshake (no site by any name); the port. */
async function rejecting(): Promise<number> {
  const port = await freePort();
  const nginx = await Nginx.start(`server { listen 127.0.0.1:${port} ssl; ssl_reject_handshake on; }`);
  open.push(nginx);
  return port;
}

/** Runs `one` CALLS times in a row; the dials made to `port`, each call's failure code (through causes), and the time taken. */
async function calls(port: number, one: () => Promise<unknown>): Promise<{ dials: number; codes: string[]; ms: number }> {
  let dials = 0;
  const stop = subscribe('dialguard:dial:settled', (e) => {
    if (e.host === `127.0.0.1:${port}`) dials++;
  });
  const codes: string[] = [];
  const t0 = performance.now();
  try {
    for (let i = 0; i < CALLS; i++) {
      try {
        await one();
        codes.push('ok');
      } catch (err) {
        let e: unknown = err;
        while (e instanceof Error && (e as { code?: unknown }).code !== CODE && e.cause !== undefined) e = e.cause;
        codes.push(String((e as { code?: unknown }).code));
      }
    }
  } finally {
    stop();
  }
  return { dials, codes, ms: performance.now() - t0 };
}

describe('against nginx rejecting the TLS name sent (unrecognized_name)', () => {
  it('GuardedAgent, Http2Client and GrpcGuard: one dial a call, failed at once with the alert, never retried', async () => {
    const port = await rejecting();
    const breaker = new HostBreaker();
    const agent = new GuardedAgent({ breaker, undici: { connect: { servername: 'c.test', rejectUnauthorized: false } } });
    const h2 = new Http2Client({ breaker, tls: { servername: 'c.test', rejectUnauthorized: false } });
    const guard = new GrpcGuard({ breaker });
    open.push(agent, h2, guard);
    const grpcClient = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createSsl(), { ...guard.clientOptions(), 'grpc.ssl_target_name_override': 'c.test' });
    open.push(grpcClient);

    const undiciRun = await calls(port, async () => (await request(`https://127.0.0.1:${port}/`, { dispatcher: agent })).body.dump());
    const h2Run = await calls(port, () => h2.request(`https://127.0.0.1:${port}/`));
    const grpcRun = await calls(port, () => call(grpcClient, 'Echo', 'x', { deadline: Date.now() + 5_000 }));
    for (const [name, run] of Object.entries({ undici: undiciRun, h2: h2Run })) {
      expect(run.codes, name).toEqual(Array(CALLS).fill(CODE));
      expect(run.dials, name).toBe(CALLS); // was 3 a call: the alert retried as a failed dial
      expect(run.ms, name).toBeLessThan(1_000); // was ~1.5 s a call, in the retries' backoff
    }
    // gRPC: the first call's dial gets the alert; the calls after it fail at once during grpc's
    // reconnect backoff with that mistake (as a grpc-js channel in TRANSIENT_FAILURE does).
    expect(grpcRun.codes).toEqual(Array(CALLS).fill(CODE));
    expect(grpcRun.dials).toBeGreaterThanOrEqual(1);
    expect(grpcRun.dials).toBeLessThanOrEqual(CALLS);
    expect(grpcRun.ms).toBeLessThan(1_000);
    expect(breaker.stats()).toMatchObject({ opened: 0 });
  });
});
