/**
 * A backoff answer that is no wait in ms from 0 up (a negative number, a numeric string) is a bug
 * in the schedule: retry(), Http2Client and GrpcGuard use the default schedule's wait then (and
 * warn once). GuardedAgent and guardedRetry() took it as it was: the adapter raised it to the
 * response's Retry-After with `Math.max`, which turned -5 into 0 (back-to-back sends: 22, 88,
 * 90 ms) and '100' into 100, so retry() never saw the odd answer (an outside review). Counted at a
 * real server answering 503, maxAttempts 2, `random` 0: the default's first wait is 400 ms.
 */
import http from 'node:http';
import type net from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuardedAgent, guardedRetry } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

async function busyServer(): Promise<{ url: string; sends: number[] }> {
  const sends: number[] = [];
  const server = http.createServer((req, res) => {
    sends.push(performance.now());
    req.resume();
    res.statusCode = 503;
    res.end('busy');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`, sends };
}

describe("GuardedAgent and guardedRetry(): a backoff's odd answer takes the default schedule's wait", () => {
  const odd: Array<[string, () => unknown]> = [
    ['-5', () => -5],
    ["'100' (a string)", () => '100'],
  ];
  // The process is warned once, at the first odd answer (as retry() warns).
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.message);
  beforeAll(() => void process.on('warning', onWarning));
  afterAll(() => void process.off('warning', onWarning));
  it.each(odd)('backoff answering %s: the retry waits the default 400 ms, not the answer', async (_name, answer) => {
    const backoff = answer as unknown as () => number;
    const guarded = new GuardedAgent({ breaker: new HostBreaker(), backoff, budget: null, maxAttempts: 2, random: () => 0 });
    const composed = new Agent().compose(guardedRetry({ breaker: null, backoff, budget: null, maxAttempts: 2, random: () => 0 }));
    cleanups.push(() => guarded.destroy(), () => composed.destroy());
    for (const dispatcher of [guarded, composed]) {
      const { url, sends } = await busyServer();
      const res = await request(url, { dispatcher });
      await res.body.dump();
      expect(res.statusCode).toBe(503);
      expect(sends.length).toBe(2);
      expect(sends[1]! - sends[0]!).toBeGreaterThanOrEqual(380); // was: 0-70 ms for -5, ~100 for '100'
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.some((m) => m.includes("a backoff's answer is not a wait in ms from 0 up"))).toBe(true);
  });

  it("a valid answer still waits at least the response's Retry-After", async () => {
    const sends: number[] = [];
    const server = http.createServer((req, res) => {
      sends.push(performance.now());
      req.resume();
      res.writeHead(503, { 'retry-after': '1' });
      res.end('busy');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    });
    const agent = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 10, budget: null, maxAttempts: 2 });
    cleanups.push(() => agent.destroy());
    const res = await request(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`, { dispatcher: agent });
    await res.body.dump();
    expect(sends.length).toBe(2);
    expect(sends[1]! - sends[0]!).toBeGreaterThanOrEqual(980);
  });
});
