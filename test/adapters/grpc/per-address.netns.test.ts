/**
 * The gRPC adapter's per-address guarding against a packet-drop blackhole, in a network namespace
 * of the test's own (the veth blackhole needs CAP_NET_ADMIN there): `svc.test` resolves, through
 * the guard's lookup, to the blackholed address and two live grpc-js servers (127.0.0.2 and
 * 127.0.0.4, one port). The kernel counts the dials: the namespace's `Tcp: ActiveOpens` (the
 * blackhole's `attempts`) counts every connect made in it, and the live servers' dials are
 * counted per breaker key, so the dead address's dials are the difference. The test re-runs
 * itself under unshare, and the parent insists on hearing that the child ran.
 */
import { spawnSync } from 'node:child_process';
import * as grpc from '@grpc/grpc-js';
import { describe, expect } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { freePort } from '../../../src/testing/local-process.js';
import { eventually } from '../../helpers/eventually.js';
import { netnsTest } from '../../helpers/netns.js';
import { dialsPerKey, lookupTo } from '../../helpers/per-address.js';
import { breakerOnManualClock } from '../../helpers/sockets.js';
import { EchoClient, EchoServer, call } from './helpers.js';

const dials = dialsPerKey();

describe('GrpcGuard per address: in a network namespace of its own (a veth pair drops SYNs, ActiveOpens counts each connect)', () => {
  netnsTest(import.meta.url, 'a name with one address blackholed: 30 calls on 30 fresh channels all served, none refused, the dead address dialled once, and only the first connect waited for it', async () => {
    const port = await freePort();
    await using dead = await blackhole({ mode: 'veth', port });
    // The veth blackhole narrows the namespace's local 127.0.0.0/8 to 127.0.0.1: the live
    // addresses are made local again, each on its own.
    for (const host of ['127.0.0.2', '127.0.0.4']) {
      const r = spawnSync('ip', ['addr', 'add', `${host}/32`, 'dev', 'lo'], { encoding: 'utf8', timeout: 5_000 });
      expect(r.status, r.stderr).toBe(0);
    }
    const a = await new EchoServer('127.0.0.2').listen(port);
    const b = await new EchoServer('127.0.0.4').listen(port);
    try {
      const { breaker } = breakerOnManualClock(1);
      const { lookup } = lookupTo([dead.host, '127.0.0.2', '127.0.0.4']); // the dead one first
      const times: number[] = [];
      const refused: unknown[] = [];
      for (let i = 0; i < 30; i++) {
        const guard = new GrpcGuard({ breaker, lookup, connectTimeout: 1_000, attemptDelay: 50, retry: false, keepAliveInterval: 0 });
        const client = new EchoClient(`svc.test:${a.port}`, grpc.credentials.createInsecure(), guard.clientOptions());
        const started = performance.now();
        try {
          await call(client, 'Echo', 'x', { deadline: Date.now() + 5_000 });
        } catch (err) {
          refused.push(err);
        } finally {
          times.push(performance.now() - started);
          client.close();
          await guard.close();
        }
        // The first dial to the dead address runs to its own timeout in the background: wait
        // for it to open, so the next connects skip it (rather than racing its first dial).
        if (i === 0) expect(await eventually(() => breaker.state(dead.address)?.state, (s) => s === 'open', 3_000)).toBe('open');
      }
      expect(refused).toEqual([]);
      expect(a.calls.Echo + b.calls.Echo).toBe(30);
      const live = (dials.get(`127.0.0.2:${a.port}`) ?? 0) + (dials.get(`127.0.0.4:${a.port}`) ?? 0);
      expect(live).toBe(30);
      expect(dials.get(dead.address)).toBe(1);
      expect(dead.attempts - live).toBe(1); // the kernel's count agrees
      // Only the first connect waited for the dead address (its attempt delay): no later one
      // dialled it, so none could.
      expect(times[0]).toBeGreaterThanOrEqual(45);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

