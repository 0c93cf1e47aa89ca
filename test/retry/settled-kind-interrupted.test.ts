/**
 * A call its caller ended (its signal: `AbortSignal.timeout`, or an abort) before any attempt
 * failed on its own was reported on `retry:settled` with no `kind` (and `dialguard.call.duration`
 * as `unknown`), where Http2Client's `http2:settled` said `timeout` for the same caller timeout
 * (an outside review: one dashboard split by kind could not see undici's or retry()'s caller
 * timeouts). The kind is now the failure the call ended with when no attempt's failure was
 * classified; an attempt's failure still wins (a dial that failed, then the deadline: `dial`).
 */
import net from 'node:net';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { type RetryEvents, onRetryEvent, retry } from '../../src/retry/retry.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

function settledKinds(): Array<RetryEvents['settled']> {
  const seen: Array<RetryEvents['settled']> = [];
  cleanups.push(onRetryEvent('settled', (e) => seen.push(e)));
  return seen;
}

const timedOut = (): DOMException => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

describe('retry:settled kind of a call its caller ended', () => {
  it('retry(): a caller timeout during the first attempt is kind timeout, an abort cancelled (were: none)', async () => {
    const seen = settledKinds();
    for (const reason of [timedOut(), undefined]) {
      const controller = new AbortController();
      const call = retry(({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })), { signal: controller.signal, maxAttempts: 3 });
      controller.abort(reason);
      await expect(call).rejects.toBeDefined();
    }
    expect(seen.map((e) => [e.ok, e.attempts, e.kind])).toEqual([
      [false, 1, 'timeout'],
      [false, 1, 'cancelled'],
    ]);
  });

  it("retry(): an attempt's own failure still names the kind when the caller ends the call in its backoff", async () => {
    const seen = settledKinds();
    const controller = new AbortController();
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', syscall: 'connect' });
    const call = retry(() => Promise.reject(refused), { signal: controller.signal, maxAttempts: 3, backoff: () => 10_000 });
    setTimeout(() => controller.abort(timedOut()), 20);
    await expect(call).rejects.toBeDefined();
    expect(seen.map((e) => e.kind)).toEqual(['dial']);
  });

  it('GuardedAgent: a request whose AbortSignal.timeout ends it while the server holds it is kind timeout, as on http2:settled', async () => {
    const held: net.Socket[] = [];
    const server = net.createServer((s) => void held.push(s)); // accepts, never answers
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      for (const s of held) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    });
    const { port } = server.address() as net.AddressInfo;
    const agent = new GuardedAgent({ breaker: new HostBreaker() });
    cleanups.push(() => agent.destroy());
    const seen = settledKinds();
    const error = await request(`http://127.0.0.1:${port}/`, { dispatcher: agent, signal: AbortSignal.timeout(50) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as Error).name).toBe('TimeoutError');
    expect(seen.map((e) => [e.ok, e.kind])).toEqual([[false, 'timeout']]);
    // The plain agent fails the same way (what the caller sees is unchanged).
    const plain = new Agent();
    cleanups.push(() => plain.destroy());
    const plainError = await request(`http://127.0.0.1:${port}/`, { dispatcher: plain, signal: AbortSignal.timeout(50) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((plainError as Error).name).toBe('TimeoutError');
  });
});
