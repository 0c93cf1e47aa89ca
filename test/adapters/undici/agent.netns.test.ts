/**
 * GuardedAgent against a packet-drop blackhole, in a network namespace of the test's own
 * (the veth blackhole needs CAP_NET_ADMIN there): the peer counts every connect, so the dials are exact.
 * Each test re-runs itself under unshare, and the parent insists on hearing that the child ran.
 */
import { Agent, fetch as undiciFetch, request } from 'undici';
import { describe, expect } from 'vitest';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { netnsTest } from '../../helpers/netns.js';
import { failure, guarded, leakChecked, manualBreaker, unwrapFetch } from './helpers.js';

leakChecked();

describe('GuardedAgent: in a network namespace of its own (a veth pair drops SYNs, ActiveOpens counts each connect)', () => {
  netnsTest(import.meta.url, 'a blackholed origin: 3 dials for request 1, none for requests 2..100, one probe after the window', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const { clock, breaker } = manualBreaker(3, 30_000);
    const { agent } = guarded({ breaker, connectTimeout: 150 });
    const url = `http://${peer.address}/`;
    await failure(undiciFetch(url, { dispatcher: agent }));
    expect(peer.attempts).toBe(3);
    for (let i = 2; i <= 100; i++) {
      expect(unwrapFetch((await failure(undiciFetch(url, { dispatcher: agent }))).error)).toBeInstanceOf(HostUnavailableError);
    }
    expect(peer.attempts).toBe(3);
    await peer.heal(); // an echo server: not HTTP, but the probe only needs the dial to succeed
    clock.advance(30_000);
    const probe = await failure(request(url, { dispatcher: agent, method: 'POST', body: 'x', headersTimeout: 100 }));
    expect(probe.error).toBeDefined();
    expect(peer.attempts).toBe(4);
    expect(breaker.state(peer.address)?.state).toBe('closed');
  });

  netnsTest(import.meta.url, '20 concurrent fetches to a blackholed origin: raw undici dials 20 times, the guarded agent once', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const url = `http://${peer.address}/`;
    const raw = new Agent({ connectTimeout: 200 });
    try {
      await Promise.all(Array.from({ length: 20 }, () => failure(undiciFetch(url, { dispatcher: raw }))));
    } finally {
      await raw.destroy();
    }
    const rawDials = peer.attempts;
    expect(rawDials).toBe(20);
    const { agent } = guarded({ breaker: manualBreaker(3).breaker, connectTimeout: 200, maxAttempts: 1 });
    const results = await Promise.all(Array.from({ length: 20 }, () => failure(undiciFetch(url, { dispatcher: agent }))));
    for (const { error } of results) expect(unwrapFetch(error)).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT', cause: { code: 'DIALGUARD_CONNECT_TIMEOUT' } });
    expect(peer.attempts - rawDials).toBe(1);
  });
});
