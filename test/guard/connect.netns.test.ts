/**
 * connect() against a packet-drop blackhole, in a network namespace of the test's own (the veth
 * blackhole needs CAP_NET_ADMIN there): the peer counts every attempt exactly. Each test re-runs itself
 * under unshare, and the parent insists on hearing that the child ran.
 */
import { describe, expect } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { netnsTest } from '../helpers/netns.js';
import { breakerOnManualClock, elapsed } from '../helpers/sockets.js';



describe('connect: in a network namespace of its own (a veth pair drops SYNs, ActiveOpens counts each attempt)', () => {
  netnsTest(import.meta.url, 'the second request for a known dead host is refused without dialling', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const { clock, breaker } = breakerOnManualClock(3, 30_000);
    const target = { host: peer.host, port: peer.port };
    // Request 1 spends its retries on dials; the breaker trips on the third.
    for (let i = 0; i < 6; i++) await elapsed(connect(target, { timeout: 150, breaker }));
    expect(peer.attempts).toBe(3);
    // Requests 2..100 are refused in-process: the peer sees nothing more.
    for (let i = 0; i < 99; i++) {
      expect((await elapsed(connect(target, { timeout: 150, breaker }))).error).toBeInstanceOf(HostUnavailableError);
    }
    expect(peer.attempts).toBe(3);
    // The host returns; after the window exactly one probe dials, and traffic resumes.
    await peer.heal();
    clock.advance(30_000);
    const socket = await connect(target, { timeout: 2_000, breaker });
    socket.destroy();
    expect(peer.attempts).toBe(4);
    expect(breaker.state(peer.address)?.state).toBe('closed');
  });

  netnsTest(import.meta.url, 'a blackholed dial gives up at the timeout, and the packet-drop peer counts it once', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const { ms, error } = await elapsed(connect({ host: peer.host, port: peer.port }, { timeout: 300, breaker: null }));
    expect(error).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tcp' });
    // Not before the timeout: libuv arms a timer from the loop's cached time, which a busy loop
    // leaves a few ms stale, so the wait measured here may read a little short (293.6 on a loaded
    // 2-core machine); a dial that ended at once would read ~0.
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(peer.attempts).toBe(1);
  });
});
