/**
 * A dial whose socket cannot bind as the client's own options ask (a `localAddress` of the other
 * family or not on this machine, a pinned `localPort` in use) fails the same way on every
 * attempt: GuardedAgent retried it with backoff, 3 sends' worth of waiting (~1.5 s) before the
 * error plain undici gives at once (an outside review, r134). Now it fails on the first attempt,
 * the host untouched.
 */
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { inNetns, netnsTest } from '../../helpers/netns.js';
import { answer, httpServer } from './helpers.js';

const cleanups = leakCheckEach();

describe('GuardedAgent: a socket that cannot bind as asked is not retried', () => {
  it('localAddress ::1 to 127.0.0.1 (EINVAL) and a pinned localPort in use (EADDRINUSE): one attempt each, as plain undici', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const held = net.connect({ port: server.port, host: '127.0.0.1' });
    await new Promise((resolve) => held.once('connect', resolve));
    cleanups.push(() => held.destroy());
    const breaker = new HostBreaker();
    let retries = 0;
    // undici's own connector overwrites `connect.localAddress` with the Agent's `localAddress`: the Agent's is the one to set.
    for (const undici of [{ localAddress: '::1' }, { localAddress: '127.0.0.1', connect: { localPort: held.localPort } }]) {
      const plain = new Agent(undici);
      const guarded = new GuardedAgent({ breaker, undici, backoff: () => (retries++, 5_000) });
      cleanups.push(() => plain.destroy(), () => guarded.destroy());
      const plainCode = await request(`${server.origin}/`, { dispatcher: plain }).then(() => 'served', (err: { code?: string }) => err.code);
      const started = performance.now();
      const guardedCode = await request(`${server.origin}/`, { dispatcher: guarded }).then(() => 'served', (err: { code?: string }) => err.code);
      // A retry would wait the 5 s backoff: the test's own timeout.
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(guardedCode).toBe(plainCode);
      expect(['EINVAL', 'EADDRINUSE']).toContain(guardedCode);
    }
    expect(retries).toBe(0);
    expect(breaker.state(server.address)?.failures ?? 0).toBe(0);
    expect(server.connections).toBe(1); // the held one: nothing else reached the server
  });

  netnsTest(import.meta.url, 'a localAddress not on this machine (EADDRNOTAVAIL from bind): one attempt, as plain undici (was 3, ~1.5 s)', async () => {
    // In this namespace only 127.0.0.1 itself is local: 127.0.0.2 cannot be bound.
    if (inNetns) execFileSync('sh', ['-c', 'ip addr del 127.0.0.1/8 dev lo && ip addr add 127.0.0.1/32 dev lo']);
    await using server = await httpServer(answer(200, 'ok'));
    const plain = new Agent({ localAddress: '127.0.0.2' });
    const breaker = new HostBreaker();
    let retries = 0;
    const guarded = new GuardedAgent({ breaker, undici: { localAddress: '127.0.0.2' }, backoff: () => (retries++, 5_000) });
    cleanups.push(() => plain.destroy(), () => guarded.destroy());
    const plainCode = await request(`${server.origin}/`, { dispatcher: plain }).then(() => 'served', (err: { code?: string }) => err.code);
    const guardedCode = await request(`${server.origin}/`, { dispatcher: guarded }).then(() => 'served', (err: { code?: string }) => err.code);
    expect(plainCode).toBe('EADDRNOTAVAIL');
    expect(guardedCode).toBe('EADDRNOTAVAIL');
    expect(retries).toBe(0);
    expect(breaker.state(server.address)?.failures ?? 0).toBe(0);
    expect(server.connections).toBe(0);
  });
});
