/**
 * The packet-drop blackhole, in a network namespace of the test's own (nftables needs
 * CAP_NET_ADMIN there). The test re-runs itself under unshare; the parent insists the child ran.
 */
import { describe, expect } from 'vitest';
import { blackhole } from '../../src/testing/blackhole.js';
import { eventually } from '../helpers/eventually.js';
import { netnsTest } from '../helpers/netns.js';
import { probe } from '../helpers/sockets.js';


describe('blackhole (nftables), in a namespace of its own', () => {
  netnsTest(import.meta.url, 'blackhole (nftables): counts each attempt exactly, then heals', async () => {
    await using peer = await blackhole({ mode: 'nftables' });
    const outcomes = await Promise.all([1, 2, 3, 4].map(() => probe(peer.host, peer.port, 150)));
    expect(outcomes.every((o) => !o.connected)).toBe(true);
    expect(peer.attempts).toBe(4);
    await peer.heal();
    expect(await probe(peer.host, peer.port, 2_000, 'up')).toMatchObject({ connected: true, data: 'up' });
    expect(await eventually(() => peer.attempts, (n) => n >= 5)).toBe(5);
  });
});
