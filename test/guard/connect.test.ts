import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { acceptAndHold, echoPeer, refusing, resetOnAccept } from '../../src/testing/tcp-peers.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { breakerOnManualClock, elapsed } from '../helpers/sockets.js';

leakCheckEach();



describe('connect: bounded', () => {
  it('gives up on a blackholed host at the timeout, in the tcp phase (Node alone would wait ~130 s)', async () => {
    await using peer = await blackhole();
    const { breaker } = breakerOnManualClock();
    const { ms, error } = await elapsed(connect({ host: peer.host, port: peer.port }, { timeout: 250, breaker }));
    expect(error).toBeInstanceOf(ConnectTimeoutError);
    expect(error).toMatchObject({ phase: 'tcp', timeout: 250, host: peer.address });
    // Node arms timers from the loop's cached clock, which lags under load: a timer may fire a few
    // ms early by performance.now(). At the timeout, give or take that lag, never far before it.
    expect(ms).toBeGreaterThanOrEqual(200);
    expect(ms).toBeLessThan(250 + 1_000); // bounded, not an assertion of speed
  });

  it('bounds the TLS handshake under the same timeout (phase tls)', async () => {
    await using peer = await acceptAndHold();
    const { breaker } = breakerOnManualClock();
    const { error } = await elapsed(connect({ host: peer.host, port: peer.port }, { timeout: 200, breaker, tls: true }));
    expect(error).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tls' });
    expect(peer.attempts).toBe(1);
  });

  it('bounds a protocol handshake under the same timeout (phase handshake), and fails the dial when it rejects', async () => {
    await using peer = await echoPeer();
    const { breaker } = breakerOnManualClock();
    const stalls = await elapsed(
      connect({ host: peer.host, port: peer.port }, { timeout: 200, breaker, handshake: () => new Promise(() => {}) }),
    );
    expect(stalls.error).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'handshake' });
    const bad = new Error('bad preface');
    const rejects = await elapsed(
      connect({ host: peer.host, port: peer.port }, { timeout: 1_000, breaker, handshake: () => Promise.reject(bad) }),
    );
    expect(rejects.error).toBe(bad);
    expect(breaker.state(peer.address)?.failures).toBe(2);
  });

  it('keeps the original error for a refused connect and counts it as a failed dial', async () => {
    await using peer = await refusing();
    const { breaker } = breakerOnManualClock();
    const { error } = await elapsed(connect({ host: peer.host, port: peer.port }, { timeout: 1_000, breaker }));
    expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(breaker.state(peer.address)?.failures).toBe(1);
  });

  it('a reset during the TLS handshake is a failed dial', async () => {
    await using peer = await resetOnAccept();
    const { breaker } = breakerOnManualClock();
    const { error } = await elapsed(connect({ host: peer.host, port: peer.port }, { timeout: 1_000, breaker, tls: true }));
    expect(error).toMatchObject({ code: 'ECONNRESET' });
    expect(breaker.state(peer.address)?.failures).toBe(1);
  });
});

describe('connect: guarded', () => {
  it('after threshold failed dials, later requests are refused without dialling (counted at the peer)', async () => {
    await using peer = await acceptAndHold();
    const { clock, breaker } = breakerOnManualClock(3, 30_000);
    const target = { host: peer.host, port: peer.port };
    for (let i = 0; i < 3; i++) {
      const { error } = await elapsed(connect(target, { timeout: 100, breaker, tls: true }));
      expect(error).toBeInstanceOf(ConnectTimeoutError);
    }
    expect(peer.attempts).toBe(3);
    for (let i = 0; i < 100; i++) {
      const { error } = await elapsed(connect(target, { timeout: 100, breaker, tls: true }));
      expect(error).toBeInstanceOf(HostUnavailableError);
    }
    expect(peer.attempts).toBe(3);
    clock.advance(30_000);
    await elapsed(connect(target, { timeout: 100, breaker, tls: true })); // the probe
    expect(peer.attempts).toBe(4);
  });

  it('a TLS client at a plain port whose server waits in silence opens the host for TLS dials only: a plain connect is let through, and closes it', async () => {
    await using peer = await acceptAndHold(); // a plain server that waits for its own protocol (redis, memcached)
    const { breaker } = breakerOnManualClock(3, 30_000);
    const target = { host: peer.host, port: peer.port };
    for (let i = 0; i < 3; i++) expect((await elapsed(connect(target, { timeout: 100, breaker, tls: true }))).error).toBeInstanceOf(ConnectTimeoutError);
    expect((await elapsed(connect(target, { timeout: 100, breaker, tls: true }))).error).toBeInstanceOf(HostUnavailableError);
    const socket = await connect(target, { timeout: 1_000, breaker }); // it was refused
    socket.destroy();
    expect(peer.attempts).toBe(4);
    expect(breaker.state(peer.address)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('one probe resumes traffic once the host is back', async () => {
    await using peer = await blackhole();
    const { clock, breaker } = breakerOnManualClock(1, 5_000);
    const target = { host: peer.host, port: peer.port };
    await elapsed(connect(target, { timeout: 100, breaker }));
    expect(breaker.state(peer.address)?.state).toBe('open');
    await peer.heal();
    expect((await elapsed(connect(target, { breaker }))).error).toBeInstanceOf(HostUnavailableError);
    clock.advance(5_000);
    const socket = await connect(target, { timeout: 2_000, breaker });
    socket.destroy();
    expect(breaker.state(peer.address)?.state).toBe('closed');
    expect(breaker.stats()).toMatchObject({ opened: 1, closed: 1, probesGranted: 1 });
  });

  it('caller aborts never open the breaker on a healthy-but-slow host, and leave no socket behind', async () => {
    await using peer = await acceptAndHold();
    const { breaker } = breakerOnManualClock(3);
    for (let i = 0; i < 5; i++) {
      const controller = new AbortController();
      const p = connect({ host: peer.host, port: peer.port }, { timeout: 5_000, breaker, tls: true, signal: controller.signal });
      setTimeout(() => controller.abort(new Error('client went away')), 20);
      await expect(p).rejects.toThrow('client went away');
    }
    expect(breaker.state(peer.address)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats().abandoned).toBe(5);
  });

  it('a clean run against healthy peers never opens the breaker', async () => {
    await using v4 = await echoPeer();
    await using v6 = await echoPeer({ host: '::1' });
    const breaker = new HostBreaker({ failureThreshold: 1 });
    const events: string[] = [];
    breaker.on('opened', (e) => events.push(e.host));
    const sockets = await Promise.all(
      Array.from({ length: 100 }, (_, i) => connect(i % 2 ? { host: v4.host, port: v4.port } : { host: '::1', port: v6.port }, { breaker })),
    );
    for (const s of sockets) s.destroy();
    expect(events).toEqual([]);
    expect(breaker.stats()).toMatchObject({ succeeded: 100, failed: 0, opened: 0 });
    expect(await eventually(() => v4.attempts + v6.attempts, (n) => n >= 100)).toBe(100);
  });

  it('echoes over IPv6 and files it as [::1]:port', async () => {
    await using peer = await echoPeer({ host: '::1' });
    const breaker = new HostBreaker();
    const socket = await connect({ host: '::1', port: peer.port }, { breaker });
    socket.write('ping');
    const [data] = (await new Promise((resolve) => socket.once('data', (d) => resolve([d])))) as [Buffer];
    socket.destroy();
    expect(String(data)).toBe('ping');
    expect(breaker.state(`[::1]:${peer.port}`)?.state).toBe('closed');
  });
});
