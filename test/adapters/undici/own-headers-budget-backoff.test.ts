/**
 * A request's own `headersTimeout` is the whole call's wait for headers (seed 004): a retry gets
 * what is left of it, and none is made once it is spent. A retry whose backoff would end past it
 * was still slept, and the call failed after the wait with nothing more sent: 400-600 ms (up to
 * ~1.1 s) after its budget ran out, where plain undici failed at once (an outside review: a
 * server holding each attempt 900 ms then hanging up, `headersTimeout: 1000`: plain 904 ms,
 * guarded 1306-1490 ms, one send each). As with the call's own `timeout`, the call now fails at
 * once with the last attempt's error. Sends counted at the server.
 */
import http from 'node:http';
import type net from 'node:net';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent, guardedRetry } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

/** Holds each request 300 ms, then hangs up with no answer. */
async function hangingUp(): Promise<{ url: string; readonly sends: number }> {
  let sends = 0;
  const server = http.createServer((req) => {
    sends++;
    req.resume();
    setTimeout(() => req.socket.destroy(), 300);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`,
    get sends() {
      return sends;
    },
  };
}

describe("a retry that cannot begin within the request's own headersTimeout is not slept for", () => {
  const dispatchers: Array<[string, () => { dispatcher: GuardedAgent | Agent; close: () => Promise<void> }]> = [
    ['GuardedAgent', () => {
      const a = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 500 });
      return { dispatcher: a, close: () => a.destroy() };
    }],
    ['Agent.compose(guardedRetry())', () => {
      const base = new Agent();
      return { dispatcher: base.compose(guardedRetry({ breaker: null, backoff: () => 500 })) as Agent, close: () => base.destroy() };
    }],
  ];
  it.each(dispatchers)('%s: headersTimeout 400, each attempt cut at 300 ms, a 500 ms backoff: fails at ~300 ms, one send (was: after the backoff)', async (_name, make) => {
    const server = await hangingUp();
    const { dispatcher, close } = make();
    cleanups.push(close);
    const t0 = performance.now();
    const error = await request(server.url, { dispatcher, headersTimeout: 400 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const took = performance.now() - t0;
    expect((error as { code?: string }).code).toBe('UND_ERR_SOCKET'); // the attempt's own, as plain undici fails
    expect(server.sends).toBe(1);
    expect(took).toBeLessThan(700); // was: 300 + the 500 ms backoff
  });

  it('a backoff that fits still retries, within what is left', async () => {
    const server = await hangingUp();
    const agent = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 50 });
    cleanups.push(() => agent.destroy());
    const error = await request(server.url, { dispatcher: agent, headersTimeout: 2_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeDefined();
    expect(server.sends).toBe(3);
  });
});
