/**
 * The guarded agents against a packet-drop blackhole, in a network namespace of the test's own
 * (the veth blackhole needs CAP_NET_ADMIN there): the peer counts every SYN, so the dials are exact. Each
 * test re-runs itself under unshare, and the parent insists on hearing that the child ran.
 */
import http from 'node:http';
import axios from 'axios';
import got from 'got';
import { describe, expect } from 'vitest';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { netnsTest } from '../../helpers/netns.js';
import { failure, guardedHttp, leakChecked, manualBreaker, plain } from './helpers.js';

leakChecked();

describe('GuardedHttpAgent: a blackholed origin, in a network namespace of its own (the namespace’s ActiveOpens counts every dial)', () => {
  netnsTest(import.meta.url, 'axios giving up after 100 ms: 100 requests cost 3 dials through the guarded agent; 10 cost 10 through Node\'s agent', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const url = `http://${peer.address}/`;
    const raw = plain(new http.Agent());
    for (let i = 0; i < 10; i++) await failure(axios.get(url, { httpAgent: raw, signal: AbortSignal.timeout(100) }));
    const rawDials = peer.attempts;
    expect(rawDials).toBe(10);
    const { breaker } = manualBreaker(3);
    const agent = guardedHttp({ breaker, connectTimeout: 300 });
    let refused = 0;
    for (let i = 0; i < 100; i++) {
      const { error } = await failure(axios.get(url, { httpAgent: agent, signal: AbortSignal.timeout(100) }));
      if ((error as { cause?: unknown }).cause instanceof HostUnavailableError) refused++;
    }
    // Each dial ran to its own 300 ms bound although its request left at 100 ms: the breaker heard
    // three failed dials in a row, opened, and refused the rest without a packet.
    expect(peer.attempts - rawDials).toBe(3);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1, abandoned: 0 });
    expect(refused).toBeGreaterThanOrEqual(80);
  });

  netnsTest(import.meta.url, 'got with its default retry and a 100 ms request timeout: 30 requests cost 3 dials through the guarded agent', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const url = `http://${peer.address}/`;
    const { breaker } = manualBreaker(3);
    const agent = guardedHttp({ breaker, connectTimeout: 300 });
    const client = got.extend({ agent: { http: agent }, timeout: { request: 100 }, retry: { limit: 2, calculateDelay: ({ computedValue }) => (computedValue === 0 ? 0 : 10) } });
    const codes = new Set<string>();
    for (let i = 0; i < 30; i++) codes.add(String(((await failure(client(url))).error as { code?: string }).code));
    expect(peer.attempts).toBe(3);
    expect(codes).toContain('DIALGUARD_HOST_UNAVAILABLE');
  });
});
