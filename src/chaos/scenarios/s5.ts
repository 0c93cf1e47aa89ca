/**
 * Chaos scenario S5 (seed 003): three HTTP/2 peers, 64 concurrent callers per lane, one peer
 * killed mid-run with its address gone dark, restarted later.
 *
 * Unguarded lane: raw node:http2 (one cached session per origin, no connect timeout), a call tries
 * up to 3 peers with a 10 s timeout per attempt (seed 003's connect_timeout). Guarded lane:
 * dialguard's Http2Client (1 s connect timeout) and a ServerSet per caller group sharing the
 * client's breaker, through retry() with the whole call bounded at 10 s.
 *
 * @module
 */
import { HostBreaker } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { Http2Client } from '../../http2/client.js';
import { subscribe } from '../../observe/channels.js';
import { RetryBudget } from '../../retry/budget.js';
import { ServerSet } from '../../retry/server-set.js';
import { type Http2Peer, http2Peer } from '../../testing/http2-peer.js';
import { NaiveHttp2Client } from '../../demo/naive-http2.js';
import { LaneRecorder } from '../recorder.js';
import { type Scenario, type ScenarioContext, type ScenarioResult, darkTimeline, driveCallers } from '../scenario.js';

const CALLERS = 64;

/** Whether the breaker is refusing `key` now (open or half-open). */
function isOpen(breaker: HostBreaker, key: string): boolean {
  const state = breaker.state(key)?.state;
  return state !== undefined && state !== 'closed';
}
const CONNECT_TIMEOUT = 1_000;

export const s5: Scenario = {
  name: 's5',
  title: 'S5: a peer killed under 64 concurrent callers (seed 003)',
  story:
    'Three HTTP/2 peers serve 64 concurrent callers per lane. One peer is killed mid-run and its address goes dark, ' +
    'then it comes back. Unguarded (raw node:http2, 10 s per attempt, as seed 003 had) every call routed to the dead ' +
    'peer waits out its attempt; guarded calls pay at most one bounded dial before the breaker steers them away.',
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const healthy = ctx.quick ? 2 : 5;
    const faultFor = ctx.quick ? 5 : 10;
    const after = ctx.quick ? 3 : 10;
    const attemptTimeout = ctx.quick ? 4_000 : 10_000;
    const total = healthy + faultFor + after;

    const peers: Http2Peer[] = [];
    for (let i = 0; i < 3; i++) peers.push(await http2Peer({ delay: 5 }));
    const origins = peers.map((p) => p.origin);
    const victim = peers[1]!;
    const victimKey = hostKey(victim.origin);

    const start = performance.now();
    const unguarded = new LaneRecorder(start);
    const guarded = new LaneRecorder(start);
    unguarded.fault = guarded.fault = [healthy, healthy + faultFor];

    const raw = new NaiveHttp2Client({
      onSession: (origin) => {
        unguarded.connectionsOpened++;
        if (origin === victim.origin) unguarded.dial();
      },
    });
    const breaker = new HostBreaker({ failureThreshold: 3, openDuration: 5_000 });
    const client = new Http2Client({ connectTimeout: CONNECT_TIMEOUT, breaker });
    const stops = [
      client.on('opened', () => guarded.connectionsOpened++),
      subscribe('dialguard:dial:settled', (e) => {
        if (e.host === victimKey) guarded.dial();
      }),
      breaker.on('opened', (e) => e.host === victimKey && guarded.breaker(true)),
      breaker.on('closed', (e) => e.host === victimKey && guarded.breaker(false)),
    ];
    const budget = new RetryBudget();
    // Each caller group prefers a different peer first, as shard affinity would.
    const sets = [0, 1, 2].map((r) => new ServerSet([...origins.slice(r), ...origins.slice(0, r)], { breaker, key: (o) => o }));

    let phase = 'healthy';
    let stopping = false;
    const stop = (): boolean => stopping;
    ctx.live({ total, elapsed: () => guarded.elapsed(), lanes: { unguarded, guarded }, openBreakers: () => (isOpen(breaker, victimKey) ? 1 : 0), phase: () => phase });

    const rawCall = async (caller: number, i: number): Promise<void> => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const origin = origins[(caller + i + attempt) % 3]!;
        try {
          await raw.request(`${origin}/work`, { timeout: attemptTimeout });
          return;
        } catch (err) {
          if (attempt === 2) throw err;
          unguarded.retries++;
        }
      }
    };
    const guardedCall = (caller: number): Promise<unknown> =>
      sets[caller % 3]!.run((server, attempt) => client.request(`${server}/work`, { signal: attempt.signal, timeout: attempt.remaining }), {
        timeout: attemptTimeout,
        maxAttempts: 3,
        idempotent: true,
        budget,
        onResult: (r) => {
          guarded.retries += Math.max(0, r.attempts - 1);
        },
      });

    const lanes = Promise.all([driveCallers(unguarded, CALLERS, stop, rawCall), driveCallers(guarded, CALLERS, stop, guardedCall)]);
    try {
      await darkTimeline(victim, { healthy, faultFor, after }, { phase: (p) => (phase = p), log: (l) => ctx.log(`s5: ${l}`) });
      stopping = true;
      phase = 'draining';
      await lanes;
    } finally {
      stopping = true;
      for (const s of stops) s();
      raw.close();
      await client.close();
      await Promise.all(peers.map((p) => p.close()));
    }
    const duration = guarded.elapsed();
    return {
      name: 's5',
      title: s5.title,
      duration,
      fault: [healthy, healthy + faultFor],
      faultLabel: `${victim.address} killed, address dark`,
      lanes: { unguarded: unguarded.result(duration), guarded: guarded.result(duration) },
      notes: [
        `${CALLERS} callers per lane over 3 HTTP/2 peers; a call tries up to 3 peers`,
        `unguarded: raw node:http2, ${attemptTimeout / 1_000} s per attempt, no connect timeout`,
        `guarded: Http2Client connect timeout ${CONNECT_TIMEOUT} ms, breaker 3 failures / 5 s, ServerSet, retry budget`,
      ],
    };
  },
};

