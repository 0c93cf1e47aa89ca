/**
 * The packet-drop blackhole, in a network namespace of the test's own (nftables needs
 * CAP_NET_ADMIN there). The test re-runs itself under unshare; the parent insists the child ran.
 */
import net from 'node:net';
import { describe, expect } from 'vitest';
import { blackhole } from '../../src/testing/blackhole.js';
import { eventually } from '../helpers/eventually.js';
import { netnsTest } from '../helpers/netns.js';

type Outcome = { connected: boolean; data?: string };

/** Raw net.connect, bounded by `ms`, reporting what happened. */
function probe(host: string, port: number, ms: number, send?: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const out: Outcome = { connected: false };
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    };
    const timer = setTimeout(done, ms);
    socket.on('connect', () => {
      out.connected = true;
      if (send !== undefined) socket.write(send);
    });
    socket.on('data', (d) => {
      out.data = (out.data ?? '') + String(d);
      if (out.data === send) done();
    });
    socket.on('error', done);
  });
}

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
