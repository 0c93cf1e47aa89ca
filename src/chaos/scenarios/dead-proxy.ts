/**
 * Chaos scenario "dead proxy pod" (seed 000): workers serve requests that each name a host; one
 * of the hosts dies (its address goes dark) and a fifth of the requests keep naming it.
 *
 * Each request: up to 6 attempts (the seed's worker), each a TCP connect (500 ms timeout) plus an
 * echo round trip. Unguarded: Node's net.connect with the timeout by hand, no memory. Guarded:
 * dialguard's connect behind a HostBreaker, whose refusal is permanent for the request.
 *
 * @module
 */
import type net from 'node:net';
import { isPermanent } from '../../core/errors.js';
import { connect } from '../../guard/connect.js';
import { HostBreaker } from '../../guard/host-breaker.js';
import { subscribe } from '../../observe/channels.js';
import { type TcpPeer, echoPeer } from '../../testing/tcp-peers.js';
import { UnguardedDialer } from '../../demo/unguarded.js';
import { LaneRecorder } from '../recorder.js';
import { type Scenario, type ScenarioContext, type ScenarioResult, darkTimeline, driveCallers } from '../scenario.js';

const WORKERS = 16;
const ATTEMPTS = 6;
const CONNECT_TIMEOUT = 500;

/** Writes `ping`, waits for it to come back (bounded), closes the socket. */
function echoOnce(socket: net.Socket, timeout: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = '';
    const timer = setTimeout(() => done(new Error('echo timed out')), timeout);
    const done = (err?: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      if (err === undefined) resolve();
      else reject(err);
    };
    socket.on('data', (d) => {
      got += String(d);
      if (got === 'ping') done();
    });
    socket.on('error', (e) => done(e));
    socket.write('ping');
  });
}

export const deadProxy: Scenario = {
  name: 'dead-proxy',
  title: 'A proxy pod is gone (seed 000)',
  story:
    'Workers serve requests naming one of five hosts; one host dies and a fifth of the requests keep naming it. ' +
    'Unguarded, each of those holds a worker slot for six connect timeouts, and the next one pays again. Guarded, ' +
    'three failed dials open the host; later requests naming it are refused in microseconds, and one probe resumes it.',
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const healthy = ctx.quick ? 1 : 2;
    const faultFor = ctx.quick ? 5 : 10;
    const after = ctx.quick ? 2 : 4;
    const total = healthy + faultFor + after;
    const openDuration = ctx.quick ? 2_000 : 5_000;

    const peers: TcpPeer[] = [];
    for (let i = 0; i < 5; i++) peers.push(await echoPeer());
    const victim = peers[0]!;
    const start = performance.now();
    const unguarded = new LaneRecorder(start);
    const guarded = new LaneRecorder(start);
    unguarded.fault = guarded.fault = [healthy, healthy + faultFor];

    const raw = new UnguardedDialer(CONNECT_TIMEOUT);
    const breaker = new HostBreaker({ failureThreshold: 3, openDuration });
    const stops = [
      subscribe('dialguard:dial:settled', (e) => {
        if (e.host === victim.address) guarded.dial();
      }),
      breaker.on('opened', (e) => e.host === victim.address && guarded.breaker(true)),
      breaker.on('closed', (e) => e.host === victim.address && guarded.breaker(false)),
    ];
    // The same sequence of hosts for both lanes: every fifth request names the victim.
    const hostFor = (worker: number, i: number): TcpPeer => peers[(worker * 7 + i) % 5]!;

    let phase = 'healthy';
    let stopping = false;
    ctx.live({
      total,
      elapsed: () => guarded.elapsed(),
      lanes: { unguarded, guarded },
      openBreakers: () => (breaker.state(victim.address)?.state ?? 'closed') !== 'closed' ? 1 : 0,
      phase: () => phase,
    });

    const request = async (dialOnce: () => Promise<net.Socket>, recorder: LaneRecorder): Promise<void> => {
      let last: unknown;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        if (attempt > 1) recorder.retries++;
        try {
          return await echoOnce(await dialOnce(), 1_000);
        } catch (err) {
          last = err;
          if (isPermanent(err)) break;
        }
      }
      throw last;
    };
    const rawCall = (w: number, i: number): Promise<void> => {
      const peer = hostFor(w, i);
      return request(() => {
        unguarded.connectionsOpened++;
        if (peer === victim) unguarded.dial();
        return raw.connect(peer.host, peer.port);
      }, unguarded);
    };
    const guardedCall = (w: number, i: number): Promise<void> => {
      const peer = hostFor(w, i);
      return request(() => {
        const s = connect({ host: peer.host, port: peer.port }, { timeout: CONNECT_TIMEOUT, breaker });
        void s.then(() => guarded.connectionsOpened++, () => {});
        return s;
      }, guarded);
    };

    const lanes = Promise.all([
      driveCallers(unguarded, WORKERS, () => stopping, rawCall),
      driveCallers(guarded, WORKERS, () => stopping, guardedCall),
    ]);
    try {
      await darkTimeline(victim, { healthy, faultFor, after }, { phase: (p) => (phase = p), log: (l) => ctx.log(`dead-proxy: ${l}`) });
      stopping = true;
      phase = 'draining';
      await lanes;
    } finally {
      stopping = true;
      for (const s of stops) s();
      await Promise.all(peers.map((p) => p.close()));
    }
    const duration = guarded.elapsed();
    return {
      name: 'dead-proxy',
      title: deadProxy.title,
      duration,
      fault: [healthy, healthy + faultFor],
      faultLabel: `${victim.address} dead (address dark)`,
      lanes: { unguarded: unguarded.result(duration), guarded: guarded.result(duration) },
      notes: [
        `${WORKERS} workers per lane, 5 hosts, every fifth request names the dead one`,
        `${ATTEMPTS} attempts per request, connect timeout ${CONNECT_TIMEOUT} ms, then an echo round trip`,
        `guarded: breaker 3 failures / ${openDuration / 1_000} s open window`,
      ],
    };
  },
};
