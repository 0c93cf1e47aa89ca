/**
 * The packet-drop blackholes, in a network namespace of the test's own (they need CAP_NET_ADMIN
 * there). The test re-runs itself under unshare; the parent insists the child ran.
 */
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { describe, expect } from 'vitest';
import { blackhole } from '../../src/testing/blackhole.js';
import { NftUnavailableError } from '../../src/testing/nft.js';
import { eventually } from '../helpers/eventually.js';
import { netnsTest } from '../helpers/netns.js';
import { probe } from '../helpers/sockets.js';

const hasNft = spawnSync('sh', ['-c', 'command -v nft']).status === 0;

describe('blackhole (veth), in a namespace of its own', () => {
  netnsTest(import.meta.url, 'blackhole (veth): counts each attempt exactly, then heals', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    expect(peer.host).toMatch(/^127\.77\.\d+\.2$/);
    const outcomes = await Promise.all([1, 2, 3, 4].map(() => probe(peer.host, peer.port, 150)));
    expect(outcomes.every((o) => !o.connected)).toBe(true);
    expect(peer.attempts).toBe(4);
    await peer.heal();
    expect(await probe(peer.host, peer.port, 2_000, 'up')).toMatchObject({ connected: true, data: 'up' });
    expect(await eventually(() => peer.attempts, (n) => n >= 5)).toBe(5);
  });

  netnsTest(import.meta.url, 'blackhole (veth): a connect to it sends SYNs and gets no answer at all (no RST, no error)', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const socket = net.connect({ host: peer.host, port: peer.port });
    const events: string[] = [];
    for (const e of ['connect', 'error', 'close']) socket.once(e, () => events.push(e));
    // 1.2 s: past the first SYN retransmit (1 s), still silent; one connect counted, not two.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(events).toEqual([]);
    expect(peer.attempts).toBe(1);
    socket.destroy();
  });

  netnsTest(import.meta.url, 'blackhole (veth): two peers in one namespace, each closes its own link', async () => {
    const a = await blackhole({ mode: 'veth' });
    const b = await blackhole({ mode: 'veth' });
    expect(a.host).not.toBe(b.host);
    await a.close();
    expect((await probe(b.host, b.port, 150)).connected).toBe(false);
    await b.close();
    expect(spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).stdout).not.toMatch(/dgbh/);
  });

  netnsTest(import.meta.url, "a namespace whose loopback is down (a fresh `unshare --net`): the default blackhole fails (it resolved, its dials failing ENETUNREACH at once), veth brings it up itself", async () => {
    // As a fresh namespace has it: loopback down and no local routes at all.
    expect(spawnSync('ip', ['link', 'set', 'lo', 'down']).status).toBe(0);
    spawnSync('ip', ['route', 'flush', 'table', 'local']);
    try {
      await expect(blackhole()).rejects.toThrow(); // nothing hangs on a loopback that is down: it must not resolve
      await using peer = await blackhole({ mode: 'veth' }); // was: "FIB table does not exist"
      expect((await probe(peer.host, peer.port, 150)).connected).toBe(false);
      expect(peer.attempts).toBe(1);
    } finally {
      spawnSync('ip', ['link', 'set', 'lo', 'up']);
    }
  });

  // nftables is an extra: with nft present it counts per peer on 127.0.0.1; without, it says what to install.
  netnsTest(import.meta.url, `blackhole (nftables): ${hasNft ? 'counts each attempt exactly, then heals' : 'without nft, fails naming the package to install'}`, async () => {
    if (!hasNft) {
      await expect(blackhole({ mode: 'nftables' })).rejects.toThrow(NftUnavailableError);
      await expect(blackhole({ mode: 'nftables' })).rejects.toThrow(/Debian: nftables/);
      return;
    }
    await using peer = await blackhole({ mode: 'nftables' });
    const outcomes = await Promise.all([1, 2, 3, 4].map(() => probe(peer.host, peer.port, 150)));
    expect(outcomes.every((o) => !o.connected)).toBe(true);
    expect(peer.attempts).toBe(4);
    await peer.heal();
    expect(await probe(peer.host, peer.port, 2_000, 'up')).toMatchObject({ connected: true, data: 'up' });
    expect(await eventually(() => peer.attempts, (n) => n >= 5)).toBe(5);
  });
});

describe('blackhole (veth) outside a namespace of its own', () => {
  netnsTest(import.meta.url, 'blackhole (veth): refuses a namespace with links not its own', async () => {
    expect(spawnSync('ip', ['link', 'add', 'foreign0', 'type', 'veth', 'peer', 'name', 'foreign1']).status).toBe(0);
    try {
      await expect(blackhole({ mode: 'veth' })).rejects.toThrow(/namespace of the test's own \(this one has (foreign\d(, )?){2}\)/);
    } finally {
      spawnSync('ip', ['link', 'del', 'foreign0']);
    }
  });
});
