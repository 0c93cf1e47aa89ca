/**
 * bench/connections: seed 003's figures, dialguard's Http2Client against raw `node:http2` in one
 * run.
 *
 *   node dist/bench/connections.js [--quick] [--rounds N] [--round-ms MS] [--lane-pairs N] [--calibrate] [--one-process] [--healthy-only]
 *
 * The raw client is how most code uses node:http2: one cached session per origin, replaced on
 * `close`/`error`; Node gives it no connect timeout and no keep-alive. Where raw never settles
 * on its own, its wait is capped and reported as the cap (`*_capped: true`).
 *
 * - unreachable_concurrent_ms: N concurrent requests to a blackholed origin, 1 s connect timeout.
 *   The raw client gets a 1 s request timeout by hand, the best it can do without a connect one.
 * - dead_cached_ms: a warm session's peer is killed and its address goes dark (a blackhole on the
 *   same port); N requests then queue on the client. Guarded: one shared dial, all released at
 *   one connect timeout. Raw: queued behind a connect with no timeout (the kernel's ~130 s).
 * - silent_peer_ms: a request in flight when the peer goes silent (TCP open, nothing flows).
 * - healthy_ratio: 64 concurrent callers against an h2c server in another process, guarded / raw,
 *   the median of `--rounds` alternating pairs (default 500 of 100 ms, `--round-ms`: two runs of 150 read 0.963 and 1.003, two of 500 0.991 and 0.993) and its spread; healthy_cpu_us_per_call:
 *   each lane's median CPU per call, µs, and `extra`, the median over the pairs of guarded minus
 *   raw. Each client runs in a process of its own, both replaced every `--lane-pairs` pairs
 *   (default 25; lib/lane-process says why): in one process the client made second read ~3 %
 *   ahead in A/A runs, and this bench made the raw client second. `--one-process` keeps the old
 *   method, `--calibrate` adds raw against raw. `--healthy-only` runs only this measure.
 * - connections_per_call under churn: 5 % of calls get a failure a naive client takes for a dead
 *   connection (a 503, RST_STREAM ENHANCE_YOUR_CALM or REFUSED_STREAM), and every 500 ms the peer
 *   resets its connections outright. The raw client here drops its session on any failure.
 */
import http2 from 'node:http2';
import { spawnSync } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { fileURLToPath } from 'node:url';
import { NaiveHttp2Client } from '../src/demo/naive-http2.js';
import { Http2Client } from '../src/http2/index.js';
import { HostBreaker } from '../src/index.js';
import { blackhole, http2Peer } from '../src/testing/index.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import type { Row } from '../src/cli/table.js';
import { numberFlag, quick } from './lib/args.js';
import { childServer } from './lib/child-server.js';
import { healthyLanes, serveLane } from './lib/lane-process.js';
import { type Paired, cpuNote, cpuTotals, pairedRounds, roundsFlag } from './lib/paired.js';
import { capped, throughput } from './lib/timing.js';


const CONNECT_TIMEOUT = 1_000;
const KEEPALIVE = 1_000; // interval and timeout, for the silent-peer measure
const RAW_CAP = quick ? 3_000 : 5_000;
const HEALTHY_MS = numberFlag('--round-ms', 100); // short pairs follow the bursts of a shared machine's load
const HEALTHY_ROUNDS = roundsFlag(quick ? 12 : 500);
const LANE_GENERATION = Math.max(1, numberFlag('--lane-pairs', 25)); // see LaneRun.generation
const ONE_PROCESS = process.argv.includes('--one-process');
const CALIBRATE = process.argv.includes('--calibrate');
const LANE_CHILD = '--lane-child'; // then 'raw' or 'guarded' and the URL: a healthy lane's process
const CALLERS = 64;
const CHURN_MS = quick ? 1_000 : 3_000;
const SIZES = [8, 1000];

type Settled = { ms: number; capped: boolean; errors: number };

/** Runs `n` requests at once; resolves when all settled or at `cap` ms, whichever is first. */
async function wave(n: number, send: (signal: AbortSignal) => Promise<unknown>, cap = Number.POSITIVE_INFINITY): Promise<Settled> {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const t0 = performance.now();
  let errors = 0;
  const all = Promise.all(
    Array.from({ length: n }, () =>
      send(controller.signal).catch(() => {
        errors++;
      }),
    ),
  );
  const hit = await capped(all, cap);
  const ms = performance.now() - t0;
  controller.abort(new Error('capped'));
  await all;
  return { ms, capped: hit, errors };
}

function guarded(options: ConstructorParameters<typeof Http2Client>[0] = {}): { client: Http2Client; breaker: HostBreaker } {
  const breaker = new HostBreaker();
  return { client: new Http2Client({ connectTimeout: CONNECT_TIMEOUT, breaker, ...options }), breaker };
}

async function unreachable(): Promise<Record<string, { guarded: Settled; raw: Settled; dials: number; rawSessions: number }>> {
  const out: Record<string, { guarded: Settled; raw: Settled; dials: number; rawSessions: number }> = {};
  for (const n of SIZES) {
    progress(`unreachable: ${n} concurrent requests to a blackholed origin`);
    await using peer = await blackhole();
    const url = `http://${peer.address}/`;
    const g = guarded();
    const gRes = await wave(n, () => g.client.request(url));
    const dials = g.breaker.stats().failed + g.breaker.stats().succeeded;
    await g.client.close();
    const raw = new NaiveHttp2Client();
    const rRes = await wave(n, () => raw.request(url, { timeout: CONNECT_TIMEOUT }));
    raw.close();
    out[`n${n}`] = { guarded: gRes, raw: rRes, dials, rawSessions: raw.sessionsOpened };
  }
  return out;
}

async function deadCached(): Promise<Record<string, { guarded: Settled; raw: Settled }>> {
  const out: Record<string, { guarded: Settled; raw: Settled }> = {};
  for (const n of SIZES) {
    progress(`dead cached session: ${n} requests queued after the peer died and its address went dark`);
    const peer = await http2Peer();
    const url = `${peer.origin}/`;
    const g = guarded();
    const raw = new NaiveHttp2Client();
    await g.client.request(url);
    await raw.request(url);
    const port = peer.port;
    await peer.kill();
    await using dark = await blackhole({ port });
    await new Promise((r) => setTimeout(r, 50)); // let both clients see the reset
    const [gRes, rRes] = await Promise.all([
      wave(n, () => g.client.request(url)),
      wave(n, (signal) => raw.request(url, { signal }), RAW_CAP),
    ]);
    await g.client.close();
    raw.close();
    await peer.close();
    void dark;
    out[`n${n}`] = { guarded: gRes, raw: rRes };
  }
  return out;
}

async function silentPeer(): Promise<{ guarded: Settled; raw: Settled; goneMs: number }> {
  progress('silent peer: a request in flight when the peer stops answering (TCP stays open)');
  await using peer = await http2Peer({
    handler: (stream, headers) => {
      if (headers[':path'] === '/hold') return;
      stream.respond({ ':status': 200 });
      stream.end('ok');
    },
  });
  const g = guarded({ keepAliveInterval: KEEPALIVE, keepAliveTimeout: KEEPALIVE });
  const raw = new NaiveHttp2Client();
  await g.client.request(`${peer.origin}/`);
  await raw.request(`${peer.origin}/`);
  let silencedAt = Number.NaN;
  let goneMs = Number.NaN;
  g.client.on('gone', () => {
    goneMs = performance.now() - silencedAt;
  });
  const cap = 3 * 2 * KEEPALIVE;
  const since = async (p: Promise<unknown>, capped: () => boolean): Promise<Settled> => {
    const error = await p.then(() => 0, () => 1);
    return { ms: performance.now() - silencedAt, capped: capped(), errors: error };
  };
  // POST: not idempotent, so the released request reports the loss instead of going back to a
  // peer that is still silent (a GET would, and then wait out a connect timeout on it).
  const holdG = g.client.request(`${peer.origin}/hold`, { method: 'POST', body: 'x' });
  const controller = new AbortController();
  let rawCapped = false;
  const holdR = raw.request(`${peer.origin}/hold`, { signal: controller.signal });
  while (peer.streams < 4) await new Promise((r) => setTimeout(r, 5));
  silencedAt = performance.now();
  peer.silence();
  const timer = setTimeout(() => {
    rawCapped = true;
    controller.abort(new Error('capped'));
  }, cap);
  const [gRes, rRes] = await Promise.all([since(holdG, () => false), since(holdR, () => rawCapped)]);
  clearTimeout(timer);
  await g.client.close();
  raw.close();
  return { guarded: gRes, raw: rRes, goneMs };
}

/** An h2c server in a child process, so the clients measured do not share its event loop. */
async function serverProcess(): Promise<{ origin: string; stop: () => Promise<void> }> {
  const { port, stop } = await childServer(`
    const http2 = require('node:http2');
    const s = http2.createServer();
    s.on('stream', (st) => { st.respond({ ':status': 200 }); st.end('ok'); });
    s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
  `);
  return { origin: `http://127.0.0.1:${port}`, stop: () => stop() };
}

/**
 * Many short alternating rounds, and the median of the adjacent raw/guarded pairs' ratios: on a
 * shared two-core machine the noise comes in bursts (±7 % between neighbouring rounds of the same
 * client), and pairs see through it better than a few long rounds.
 */
async function healthy(): Promise<Paired & { calibration: Paired | undefined }> {
  progress(
    `healthy: ${CALLERS} concurrent callers, ${HEALTHY_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds, ${ONE_PROCESS ? 'both clients in this process' : `each client in a process of its own, fresh processes every ${LANE_GENERATION} pairs`}`,
  );
  const server = await serverProcess();
  const url = `${server.origin}/`;
  try {
    if (ONE_PROCESS) return { ...(await oneProcess(url)), calibration: undefined };
    return await healthyLanes({ flag: LANE_CHILD, url, rounds: HEALTHY_ROUNDS, ms: HEALTHY_MS, generation: LANE_GENERATION, warmUpMs: 600, calibrate: CALIBRATE });
  } finally {
    await server.stop();
  }
}

/** Both clients in this process, rounds alternating (the method before lane processes). */
async function oneProcess(url: string): Promise<Paired> {
  const g = guarded();
  const raw = new NaiveHttp2Client();
  try {
    await g.client.request(url);
    await raw.request(url);
    await throughput(CALLERS, 300, () => raw.request(url)); // warm-up both
    await throughput(CALLERS, 300, () => g.client.request(url));
    return await pairedRounds(HEALTHY_ROUNDS, HEALTHY_MS, CALLERS, () => raw.request(url), () => g.client.request(url), (i, r, gr) => {
      progress(`round ${i + 1}: raw ${Math.round(r.perSecond)}/s, guarded ${Math.round(gr.perSecond)}/s, ratio ${(gr.perSecond / r.perSecond).toFixed(3)}; CPU/call raw ${r.cpuUsPerCall.toFixed(1)} µs, guarded ${gr.cpuUsPerCall.toFixed(1)} µs`);
    });
  } finally {
    await g.client.close();
    raw.close();
  }
}

/** A healthy lane's process: one client of its kind, running the rounds it is asked for. */
function laneChild(): void {
  const i = process.argv.indexOf(LANE_CHILD);
  const url = process.argv[i + 2]!;
  if (process.argv[i + 1] === 'guarded') {
    const { client } = guarded();
    serveLane(CALLERS, () => client.request(url), async () => {
      await client.close();
      return {};
    });
  } else {
    const raw = new NaiveHttp2Client();
    serveLane(CALLERS, () => raw.request(url), async () => {
      raw.close();
      return {};
    });
  }
}

/** Answers 95 % of streams; the rest get a 503 or a reset that does not kill the connection. */
function churnHandler(): (stream: http2.ServerHttp2Stream) => void {
  let n = 0;
  return (stream) => {
    n++;
    if (n % 20 === 0) {
      const k = (n / 20) % 3;
      if (k === 0) {
        stream.respond({ ':status': 503 });
        stream.end('unavailable');
      } else stream.close(k === 1 ? http2.constants.NGHTTP2_ENHANCE_YOUR_CALM : http2.constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    stream.respond({ ':status': 200 });
    stream.end('ok');
  };
}

async function churnRun(send: (url: string) => Promise<unknown>, closeClient: () => Promise<void>, label: string) {
  await using peer = await http2Peer({ handler: churnHandler() });
  const url = `${peer.origin}/`;
  let calls = 0;
  let failed = 0;
  let resets = 0;
  const killer = setInterval(() => {
    resets++;
    void peer.resetConnections();
  }, 500);
  const until = performance.now() + CHURN_MS;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (performance.now() < until) {
        calls++;
        await send(url).catch(() => {
          failed++;
        });
      }
    }),
  );
  clearInterval(killer);
  await closeClient();
  const deadline = Date.now() + 2_000;
  while (peer.openSessions > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  progress(`${label}: ${calls} calls, ${failed} failed, ${peer.attempts} connections, ${resets} transport resets`);
  return { calls, failed, connections: peer.attempts, resets, leaked: peer.openSessions };
}

type ChurnResult = Awaited<ReturnType<typeof churnRun>> & { clientConnectionsLeft: number; crashed?: string };

/** One churn lane, in this process: prints its result as JSON (the child side of {@link churn}). */
async function churnLane(lane: 'guarded' | 'raw'): Promise<void> {
  let result: ChurnResult;
  if (lane === 'guarded') {
    const g = guarded();
    const r = await churnRun((url) => g.client.request(url), () => g.client.close(), 'guarded');
    result = { ...r, clientConnectionsLeft: g.client.stats().connections };
  } else {
    const raw = new NaiveHttp2Client({ dropOnError: true });
    result = { ...(await churnRun((url) => raw.request(url), async () => raw.close(), 'raw')), clientConnectionsLeft: 0 };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/**
 * Each lane runs in a child process of its own: Node 20's http2 has crashed here (heap corruption,
 * "malloc(): mismatching next->prev_size") under the raw client's churn, and one lane's crash must
 * not take the other's figures, or the bench, with it. A crash is reported as such.
 */
async function churn(): Promise<{ guarded: ChurnResult; raw: ChurnResult }> {
  progress(`churn: 64 callers for ${CHURN_MS} ms, 5 % of calls failed by the peer, transport reset every 500 ms`);
  const run = (lane: string): ChurnResult => {
    const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--churn-lane', lane, ...(quick ? ['--quick'] : [])], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: CHURN_MS + 60_000,
    });
    const line = r.stdout.trim().split('\n').pop() ?? '';
    if (r.status === 0 && line.startsWith('{')) return JSON.parse(line) as ChurnResult;
    const crashed = `exit ${r.status ?? r.signal}`;
    progress(`churn ${lane}: the process died (${crashed})`);
    return { calls: 0, failed: 0, connections: 0, resets: 0, leaked: 0, clientConnectionsLeft: 0, crashed };
  };
  return { guarded: run('guarded'), raw: run('raw') };
}

/** The healthy rows of the table. */
function healthyRows(health: Paired & { calibration?: Paired | undefined }): Row[] {
  return [
    {
      measure: 'healthy, 64 callers (calls/s)',
      raw: health.raw,
      guarded: health.guarded,
      'guarded/raw': health.ratio,
      note: `median of ${health.rounds} pair ratios, spread ${health.ratioMin.toFixed(3)}-${health.ratioMax.toFixed(3)}`,
    },
    {
      measure: 'healthy: client CPU per call (µs, median)',
      raw: health.cpuUsPerCall.raw,
      guarded: health.cpuUsPerCall.guarded,
      'guarded/raw': health.cpuUsPerCall.guarded / health.cpuUsPerCall.raw,
      note: cpuNote(health),
    },
    ...(health.calibration === undefined
      ? []
      : [
          {
            measure: 'calibration: raw against raw, same method (calls/s)',
            raw: health.calibration.raw,
            guarded: health.calibration.guarded,
            'guarded/raw': health.calibration.ratio,
            note: `what the method reads when there is nothing to find; spread ${health.calibration.ratioMin.toFixed(3)}-${health.calibration.ratioMax.toFixed(3)}; ${cpuNote(health.calibration)}`,
          },
        ]),
  ];
}

/** The healthy fields of the JSON line. */
function healthyJson(health: Paired & { calibration?: Paired | undefined }): Record<string, unknown> {
  const c = health.calibration;
  return {
    healthy_method: ONE_PROCESS ? 'one process' : `a process per client, replaced every ${LANE_GENERATION} pairs`,
    ...(c === undefined ? {} : { calibration_ratio: round(c.ratio), calibration_cpu_extra_us: round(c.cpuExtraUs), calibration_cpu_total_extra_us: round(c.cpuTotalUsPerCall.extra) }),
    healthy_rounds: health.rounds,
    healthy_ratio: round(health.ratio),
    healthy_ratio_spread: [round(health.ratioMin), round(health.ratioMax)],
    healthy_cpu_ratio: round(health.cpuRatio),
    healthy_cpu_us_per_call: { guarded: round(health.cpuUsPerCall.guarded), raw: round(health.cpuUsPerCall.raw), extra: round(health.cpuExtraUs) },
    healthy_cpu_total_us_per_call: cpuTotals(health),
    healthy_calls_per_s: { guarded: round(health.guarded), raw: round(health.raw) },
  };
}

async function main(): Promise<void> {
  if (process.argv.includes('--healthy-only')) {
    const health = await healthy();
    printTable('connections: dialguard Http2Client vs raw node:http2, healthy path', healthyRows(health));
    printJson('connections', healthyJson(health));
    return;
  }
  const unr = await unreachable();
  const dead = await deadCached();
  const silent = await silentPeer();
  const health = await healthy();
  const ch = await churn();

  const cap = (s: Settled): string => (s.capped ? `>${Math.round(s.ms)} (capped)` : String(Math.round(s.ms)));
  printTable(`connections: dialguard Http2Client vs raw node:http2, connect timeout ${CONNECT_TIMEOUT} ms`, [
    ...SIZES.map((n) => ({
      measure: `unreachable, ${n} concurrent (ms to settle all)`,
      raw: cap(unr[`n${n}`]!.raw),
      guarded: cap(unr[`n${n}`]!.guarded),
      'guarded/raw': unr[`n${n}`]!.guarded.ms / unr[`n${n}`]!.raw.ms,
      note: `guarded dials: ${unr[`n${n}`]!.dials}`,
    })),
    ...SIZES.map((n) => ({
      measure: `dead cached session, ${n} queued (ms)`,
      raw: cap(dead[`n${n}`]!.raw),
      guarded: cap(dead[`n${n}`]!.guarded),
      'guarded/raw': dead[`n${n}`]!.guarded.ms / dead[`n${n}`]!.raw.ms,
      note: dead[`n${n}`]!.raw.capped ? 'raw still waiting on a connect with no timeout' : '',
    })),
    {
      measure: `silent peer, request released after (ms; session gone at ${Math.round(silent.goneMs)})`,
      raw: cap(silent.raw),
      guarded: cap(silent.guarded),
      'guarded/raw': silent.guarded.ms / silent.raw.ms,
      note: `keep-alive ${KEEPALIVE}+${KEEPALIVE} ms`,
    },
    ...healthyRows(health),
    {
      measure: 'churn: connections per call',
      raw: ch.raw.crashed ?? ch.raw.connections / ch.raw.calls,
      guarded: ch.guarded.crashed ?? ch.guarded.connections / ch.guarded.calls,
      'guarded/raw': ch.guarded.connections / ch.guarded.calls / (ch.raw.connections / ch.raw.calls),
      note: `${ch.guarded.resets} resets; leaked sessions ${ch.guarded.leaked}${ch.raw.crashed === undefined ? '' : '; raw client process crashed'}`,
    },
  ]);
  printJson('connections', {
    connect_timeout_ms: CONNECT_TIMEOUT,
    unreachable_concurrent_ms: Object.fromEntries(SIZES.map((n) => [`n${n}`, round(unr[`n${n}`]!.guarded.ms)])),
    unreachable_dials: Object.fromEntries(SIZES.map((n) => [`n${n}`, unr[`n${n}`]!.dials])),
    raw_unreachable_concurrent_ms: Object.fromEntries(SIZES.map((n) => [`n${n}`, round(unr[`n${n}`]!.raw.ms)])),
    dead_cached_ms: Object.fromEntries(SIZES.map((n) => [`n${n}`, round(dead[`n${n}`]!.guarded.ms)])),
    raw_dead_cached_ms: Object.fromEntries(SIZES.map((n) => [`n${n}`, round(dead[`n${n}`]!.raw.ms)])),
    raw_dead_cached_capped: SIZES.every((n) => dead[`n${n}`]!.raw.capped),
    silent_peer_ms: round(silent.goneMs),
    silent_peer_request_released_ms: round(silent.guarded.ms),
    silent_peer_bound_ms: 2 * KEEPALIVE * 1.1,
    raw_silent_peer_ms: round(silent.raw.ms),
    raw_silent_peer_capped: silent.raw.capped,
    ...healthyJson(health),
    connections_per_call: round(ch.guarded.connections / ch.guarded.calls),
    raw_connections_per_call: round(ch.raw.connections / ch.raw.calls),
    churn_calls: ch.guarded.calls,
    churn_resets: ch.guarded.resets,
    leaked_sessions: ch.guarded.leaked + ch.guarded.clientConnectionsLeft,
    churn_crashed: { guarded: ch.guarded.crashed ?? false, raw: ch.raw.crashed ?? false },
  });
}

const laneAt = process.argv.indexOf('--churn-lane');
if (process.argv.includes(LANE_CHILD)) laneChild();
else (laneAt >= 0 ? churnLane(process.argv[laneAt + 1] as 'guarded' | 'raw') : main()).catch((err: unknown) => {
  process.stderr.write(`connections bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
