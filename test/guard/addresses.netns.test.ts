/**
 * Per-address guarding against a packet-drop blackhole, in a network namespace of the test's own
 * (the veth blackhole needs CAP_NET_ADMIN there), with the dials counted by the kernel: the
 * namespace's `Tcp: ActiveOpens` (the blackhole's `attempts`) counts every connect, and the live
 * peers count the ones they accepted, so the dead address's dials are the difference. The test
 * re-runs itself under unshare, and the parent insists on hearing that the child ran.
 */
import net from 'node:net';
import { describe, expect } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { eventually } from '../helpers/eventually.js';
import { netnsTest } from '../helpers/netns.js';
import { breakerOnManualClock } from '../helpers/sockets.js';

describe('connect per address: in a network namespace of its own (a veth pair drops SYNs, ActiveOpens counts each connect)', () => {
  netnsTest(import.meta.url, 'a dual-stack name with one address blackholed: both live families serve 30 calls, the dead address is dialled once, then skipped', async () => {
    await using v4 = await echoPeer({ host: '127.0.0.1' });
    await using v6 = await echoPeer({ host: '::1', port: v4.port });
    await using dead = await blackhole({ mode: 'veth', port: v4.port });
    const { breaker } = breakerOnManualClock(1);
    const answer = [
      { address: dead.host, family: 4 },
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ];
    const lookup = ((_h: string, _o: unknown, cb: (err: null, a: typeof answer) => void) => queueMicrotask(() => cb(null, answer))) as unknown as net.LookupFunction;
    const opts = { breaker, timeout: 200, attemptDelay: 30, socket: { lookup } };
    const first = await connect({ host: 'svc.test', port: v4.port }, opts);
    // Families interleaved: the dead IPv4 address, then ::1 after the attempt delay.
    expect(first.remoteAddress).toBe('::1');
    first.destroy();
    expect(await eventually(() => breaker.state(dead.address)?.state, (s) => s === 'open')).toBe('open');
    for (let i = 0; i < 29; i++) (await connect({ host: 'svc.test', port: v4.port }, opts)).destroy();
    const live = await eventually(() => v4.attempts + v6.attempts, (n) => n === 30);
    expect(live).toBe(30);
    expect(dead.attempts - live).toBe(1);
  });
});
