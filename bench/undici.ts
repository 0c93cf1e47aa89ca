/**
 * bench/undici: dialguard's GuardedAgent against a raw undici Agent, in one run.
 *
 *   node dist/bench/undici.js [--quick] [--timeout MS] [--rounds N] [--round-ms MS] [--lane-pairs N] [--calibrate] [--floor] [--one-process] [--healthy-only] [--no-netns]
 *
 * - healthy_ratio: requests per second through a GuardedAgent / through a raw undici Agent, 64
 *   concurrent callers against a node:http server in a child process (so it does not share the
 *   clients' event loop). Raw and guarded rounds alternate; the median of the rounds' ratios.
 *   Each agent runs in a process of its own, both replaced every `--lane-pairs` pairs (25), as
 *   bench/grpc does: a user's process runs one kind of client, where two agents in one process
 *   share undici's JIT feedback and heap. (`--one-process` runs both in this process, the method
 *   before; on the same machine it read 0.956-0.965 in three runs, and this one 0.952.)
 *   `--calibrate` adds raw against raw by the same method. `--floor` adds raw against an Agent
 *   whose dispatch() wraps each request's handler in a bare forwarding handler and nothing else:
 *   what any layer that sees each request's events costs on undici (one object and one call more
 *   per event), the least the retrying layer could cost.
 * - hot_loop_ns: the retrying layer's own work per request in a synchronous loop on a stand-in
 *   (no I/O, no promise), against the caller's handler bare and behind a bare forwarding handler
 *   (see `hotLoop`): 196-240 ns over five runs here (one outlier at 372, the machine busy), 128
 *   after the budget's clock read, the event checks' lookups and the first attempt's own object
 *   went, so it shows a change of a few tens of ns, where the lanes do not resolve a tenth of a µs.
 * - wrapper_cpu_us_per_call: the retrying layer alone (GuardedAgent's dispatch path) over an
 *   in-process dispatcher stand-in that answers on the next microtask (no socket), against
 *   undici's `request()` on the same stand-in, in a child process of its own, `--wrapper-rounds`
 *   pairs (40). What the layer's own code costs per request, without what I/O adds.
 *   healthy_cpu_ratio is the same for this process's CPU time per request (raw / guarded), which
 *   a busy machine disturbs less than throughput. healthy_cpu_us_per_call: each lane's median CPU
 *   per request, µs, and `extra`, the median over the pairs of guarded minus raw. `--rounds`
 *   sets the number of pairs (default 500, of 100 ms rounds: `--round-ms`; two runs of 500 read 0.961 and 0.959, where runs of 150 moved by several %); the spread (min-max of the pair ratios) is printed.
 *   `--healthy-only` stops after the healthy lanes.
 * - dead_host_request_ms: the 2nd..100th request (undici's `request()`) to a blackholed origin,
 *   median. Raw undici pays one connect timeout for each; the guarded agent refuses once its
 *   breaker has opened (request 1 spends its retries tripping it). The same through `fetch()`
 *   is reported beside it.
 * - dials_per_100_requests: dials made for 100 requests to that origin, raw and guarded; counted
 *   at the peer (a veth blackhole, inside a network namespace of the bench's own) where possible, else at
 *   the client (undici's `connect` diagnostics channel, the breaker's counters).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { Agent, Dispatcher, fetch as undiciFetch, request } from 'undici';
import { GuardedAgent } from '../src/adapters/undici/index.js';
import { type RetrySettings, UNDICI_TIMEOUT, retrySettings } from '../src/adapters/undici/options.js';
import { dispatchGuarded } from '../src/adapters/undici/retry-interceptor.js';
import type { LegacyHandler, RawHeaders } from '../src/adapters/undici/handlers.js';
import { HostBreaker } from '../src/index.js';
import { type Blackhole, blackhole } from '../src/testing/index.js';
import { inBenchNetns, reexecInNetns } from './lib/netns.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import type { Row } from '../src/cli/table.js';
import { numberFlag, quick } from './lib/args.js';
import { childServer } from './lib/child-server.js';
import { type Paired, cpuNote, cpuTotals, pairedRounds, roundsFlag } from './lib/paired.js';
import { inChild, healthyLanes, serveLane } from './lib/lane-process.js';
import { median, percentile, throughput } from './lib/timing.js';

reexecInNetns();

const TIMEOUT = numberFlag('--timeout', quick ? 200 : 1_000);
const CALLERS = 64;
// Many short alternating rounds: on a shared machine the noise comes in bursts, and the median
// of many raw/guarded pairs sees through them better than a few long rounds.
const HEALTHY_MS = numberFlag('--round-ms', 100); // short pairs follow the bursts of a shared machine's load
const HEALTHY_ROUNDS = roundsFlag(quick ? 12 : 500);
const LANE_CHILD = '--lane-child'; // then 'raw' or 'guarded' and the URL: a healthy lane's process
const LANE_GENERATION = Math.max(1, numberFlag('--lane-pairs', 25)); // see LaneRun.generation
const ONE_PROCESS = process.argv.includes('--one-process');
const calibrate = process.argv.includes('--calibrate');
const FLOOR = process.argv.includes('--floor');
const WRAPPER_CHILD = '--wrapper-child'; // set on the child process that runs the wrapper lane
const WRAPPER_ROUNDS = numberFlag('--wrapper-rounds', quick ? 10 : 40);
const REQUESTS = 100;

/** A node:http server in a child process: its event loop is not the clients'. */
async function serverProcess(): Promise<{ origin: string; stop: () => Promise<void> }> {
  const { port, stop } = await childServer(`
    const http = require('node:http');
    const s = http.createServer({ keepAliveTimeout: 60000 }, (req, res) => { req.resume(); res.end('ok'); });
    s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
  `);
  return { origin: `http://127.0.0.1:${port}`, stop: () => stop() };
}

/** One request through `dispatcher`, its body read to the end. */
async function get(dispatcher: Dispatcher, url: string): Promise<void> {
  const res = await request(url, { dispatcher });
  await res.body.dump();
}

async function healthy(): Promise<Healthy> {
  progress(
    `healthy: ${CALLERS} concurrent callers, ${HEALTHY_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds, ${ONE_PROCESS ? 'both agents in this process' : `each agent in a process of its own, fresh processes every ${LANE_GENERATION} pairs`}`,
  );
  const server = await serverProcess();
  const url = `${server.origin}/`;
  try {
    if (ONE_PROCESS) return { ...(await oneProcess(url)), calibration: undefined, floor: undefined };
    return await healthyLanes({ flag: LANE_CHILD, url, rounds: HEALTHY_ROUNDS, ms: HEALTHY_MS, generation: LANE_GENERATION, warmUpMs: 1_000, calibrate, floor: FLOOR ? 'forward' : undefined });
  } finally {
    await server.stop();
  }
}

/** Both agents in this process, rounds alternating (the method before lane processes). */
async function oneProcess(url: string): Promise<Paired> {
  const raw = new Agent();
  const guarded = new GuardedAgent({ breaker: new HostBreaker() });
  try {
    await throughput(CALLERS, 1_000, () => get(raw, url)); // warm-up: connections open, code paths hot
    await throughput(CALLERS, 1_000, () => get(guarded, url));
    return await pairedRounds(HEALTHY_ROUNDS, HEALTHY_MS, CALLERS, () => get(raw, url), () => get(guarded, url), (i, r, g) => {
      progress(`round ${i + 1}: raw ${Math.round(r.perSecond)}/s, guarded ${Math.round(g.perSecond)}/s, ratio ${(g.perSecond / r.perSecond).toFixed(3)}; CPU/request raw ${r.cpuUsPerCall.toFixed(1)} µs, guarded ${g.cpuUsPerCall.toFixed(1)} µs`);
    });
  } finally {
    await Promise.all([raw.destroy(), guarded.destroy()]);
  }
}

/** The healthy lanes' figures: raw against guarded, and the calibration and the floor when asked. */
type Healthy = Paired & { calibration: Paired | undefined; floor: Paired | undefined };

/** The handler undici's events pass through on the floor lane: each forwarded, nothing else done. */
class Forward implements Dispatcher.DispatchHandler {
  readonly #h: LegacyHandler;
  constructor(handler: Dispatcher.DispatchHandler) {
    this.#h = handler as LegacyHandler;
  }
  onConnect(abort: (err?: Error) => void, context?: unknown): void {
    this.#h.onConnect?.(abort, context);
  }
  onRequestSent(): void {
    this.#h.onRequestSent?.();
  }
  onBodySent(chunk: unknown): void {
    this.#h.onBodySent?.(chunk);
  }
  onResponseStarted(): void {
    this.#h.onResponseStarted?.();
  }
  onHeaders(status: number, rawHeaders: RawHeaders, resume: () => void, statusText: string): boolean {
    return this.#h.onHeaders?.(status, rawHeaders, resume, statusText) ?? true;
  }
  onData(chunk: Buffer): boolean {
    return this.#h.onData?.(chunk) ?? true;
  }
  onComplete(trailers: RawHeaders | null): void {
    this.#h.onComplete?.(trailers);
  }
  onError(err: Error): void {
    this.#h.onError?.(err);
  }
}

/** The floor lane's agent: undici's own, each request's handler wrapped in a {@link Forward}. */
class ForwardingAgent extends Agent {
  override dispatch(options: Agent.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return super.dispatch(options, new Forward(handler));
  }
}

/** A healthy lane's process: one agent of its kind (raw, guarded, forward), running the rounds it is asked for. */
function laneChild(): void {
  const i = process.argv.indexOf(LANE_CHILD);
  const url = process.argv[i + 2]!;
  const kind = process.argv[i + 1];
  const agent = kind === 'guarded' ? new GuardedAgent({ breaker: new HostBreaker() }) : kind === 'forward' ? new ForwardingAgent() : new Agent();
  serveLane(CALLERS, () => get(agent, url), async () => {
    await agent.destroy();
    return {};
  });
}

/** The stand-ins' answer: 200, `ok`. */
const STAND_IN_HEADERS = [Buffer.from('content-length'), Buffer.from('2')];
const STAND_IN_BODY = Buffer.from('ok');

/** The retrying layer's settings as GuardedAgent builds them (its defaults, undici's own timeouts). */
function standInSettings(): RetrySettings {
  return Object.assign(retrySettings({}), { dispatcherTimeouts: { headers: UNDICI_TIMEOUT, body: UNDICI_TIMEOUT } });
}

/** A dispatcher that answers every request (200, `ok`) on the next microtask: no socket. */
class StandIn extends Dispatcher {
  override dispatch(_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const h = handler as Required<Pick<Dispatcher.DispatchHandler, 'onConnect' | 'onHeaders' | 'onData' | 'onComplete'>>;
    h.onConnect(() => {});
    queueMicrotask(() => {
      h.onHeaders(200, STAND_IN_HEADERS, () => {}, 'OK');
      h.onData(STAND_IN_BODY);
      h.onComplete([]);
    });
    return true;
  }
  override close(): Promise<void> {
    return Promise.resolve();
  }
  override destroy(): Promise<void> {
    return Promise.resolve();
  }
}

/** The stand-in behind the retrying layer as GuardedAgent dispatches (its defaults, undici's own timeouts). */
class GuardedStandIn extends StandIn {
  readonly #settings = standInSettings();
  readonly #inner: Dispatcher.Dispatch = (opts, handler) => super.dispatch(opts, handler);
  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return dispatchGuarded(this.#settings, this.#inner, opts, handler);
  }
}

/** The wrapper lane (in its own process, see the module docs), then the tight loop. */
async function wrapper(): Promise<Paired & { hot: HotLoop }> {
  const url = 'http://127.0.0.1:1/'; // never dialled: the stand-in answers
  const raw = new StandIn();
  const guarded = new GuardedStandIn();
  await throughput(CALLERS, 1_000, () => get(raw, url));
  await throughput(CALLERS, 1_000, () => get(guarded, url));
  const paired = await pairedRounds(WRAPPER_ROUNDS, HEALTHY_MS, CALLERS, () => get(raw, url), () => get(guarded, url));
  return { ...paired, hot: hotLoop() };
}

/** ns per request of each kind in {@link hotLoop}. */
interface HotLoop {
  raw: number;
  forward: number;
  guarded: number;
}

/** The least handler a caller brings: stores the abort, counts completions. */
class HotCaller {
  completed = 0;
  abort: ((err?: Error) => void) | undefined;
  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
  }
  onError(err: Error): void {
    throw err;
  }
  onHeaders(): boolean {
    return true;
  }
  onData(): boolean {
    return true;
  }
  onComplete(): void {
    this.completed++;
  }
}

/**
 * The layer's own work per request, with no I/O and no promise: a request is dispatched to a
 * stand-in that calls its handler's onConnect, onHeaders, onData and onComplete at once, in a
 * synchronous loop, the caller's handler bare (raw), behind a bare forwarding handler (forward,
 * the floor of any interception) or behind the retrying layer as GuardedAgent dispatches
 * (guarded). The lowest of 7 passes of each, in turn. Steadier than the lanes (which do not
 * resolve a tenth of a µs), but a hot loop: every object in cache, every branch predicted, so it
 * reads what a change adds or removes, not what a request pays among undici's own work. It runs
 * after the stand-in lanes, whose undici handlers leave the layer's call sites polymorphic, as a
 * real process's would be (alone, in a fresh process, the same loop read 167 ns).
 */
function hotLoop(): HotLoop {
  const noop = (): void => {};
  const inner = (_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
    const h = handler as LegacyHandler;
    h.onConnect?.(noop);
    h.onHeaders?.(200, STAND_IN_HEADERS, noop, 'OK');
    h.onData?.(STAND_IN_BODY);
    h.onComplete?.([]);
    return true;
  };
  const settings = standInSettings();
  const opts: Dispatcher.DispatchOptions = { origin: 'http://127.0.0.1:1', path: '/', method: 'GET' };
  const kinds: Record<keyof HotLoop, () => boolean> = {
    raw: () => inner(opts, new HotCaller() as Dispatcher.DispatchHandler),
    forward: () => inner(opts, new Forward(new HotCaller() as Dispatcher.DispatchHandler)),
    guarded: () => dispatchGuarded(settings, inner, opts, new HotCaller() as Dispatcher.DispatchHandler),
  };
  const n = quick ? 100_000 : 1_000_000;
  const best: HotLoop = { raw: Infinity, forward: Infinity, guarded: Infinity };
  for (let pass = 0; pass < 7; pass++) {
    for (const kind of Object.keys(kinds) as Array<keyof HotLoop>) {
      const run = kinds[kind];
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) run();
      best[kind] = Math.min(best[kind], Number(process.hrtime.bigint() - start) / n);
    }
  }
  return best;
}

/** Counts the connects undici starts (its own diagnostics channel), for the raw agent. */
function countUndiciConnects(): { readonly count: number; stop: () => void } {
  let count = 0;
  const onConnect = (): void => {
    count++;
  };
  diagnosticsChannel.subscribe('undici:client:beforeConnect', onConnect);
  return {
    get count() {
      return count;
    },
    stop: () => diagnosticsChannel.unsubscribe('undici:client:beforeConnect', onConnect),
  };
}

async function settle(p: Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  try {
    const res = await p;
    await (res as { body?: { dump?: () => Promise<void> } }).body?.dump?.();
  } catch {
    /* failing is the point */
  }
  return performance.now() - t0;
}

interface DeadResult {
  firstMs: number;
  laterMs: number[];
  laterFetchMs: number[];
  dials: number;
}

async function deadRaw(peer: Blackhole, exact: boolean): Promise<DeadResult> {
  progress(`dead origin, raw undici Agent (connectTimeout ${TIMEOUT} ms): ${REQUESTS} requests, concurrent to keep the wait at one timeout`);
  const url = `http://${peer.address}/`;
  const raw = new Agent({ connectTimeout: TIMEOUT });
  const counter = countUndiciConnects();
  const before = exact ? peer.attempts : 0;
  try {
    const firstMs = await settle(request(url, { dispatcher: raw }));
    const laterMs = await Promise.all(Array.from({ length: REQUESTS - 1 }, () => settle(request(url, { dispatcher: raw }))));
    const laterFetchMs = await Promise.all(Array.from({ length: 10 }, () => settle(undiciFetch(url, { dispatcher: raw }))));
    const dials = exact ? peer.attempts - before - 10 : counter.count - 10;
    return { firstMs, laterMs, laterFetchMs, dials };
  } finally {
    counter.stop();
    await raw.destroy();
  }
}

async function deadGuarded(peer: Blackhole, exact: boolean): Promise<DeadResult & { breaker: HostBreaker }> {
  progress(`dead origin, GuardedAgent (connectTimeout ${TIMEOUT} ms, 3 attempts, threshold 3): ${REQUESTS} requests, one after another`);
  const url = `http://${peer.address}/`;
  const breaker = new HostBreaker({ failureThreshold: 3, openDuration: 60_000 });
  const guarded = new GuardedAgent({ breaker, connectTimeout: TIMEOUT });
  const before = exact ? peer.attempts : 0;
  try {
    const firstMs = await settle(request(url, { dispatcher: guarded }));
    const laterMs: number[] = [];
    for (let i = 1; i < REQUESTS; i++) laterMs.push(await settle(request(url, { dispatcher: guarded })));
    const s = breaker.stats();
    const dials = exact ? peer.attempts - before : s.succeeded + s.failed + s.abandoned + s.stale;
    const laterFetchMs: number[] = [];
    for (let i = 0; i < REQUESTS; i++) laterFetchMs.push(await settle(undiciFetch(url, { dispatcher: guarded })));
    return { firstMs, laterMs, laterFetchMs, dials, breaker };
  } finally {
    await guarded.destroy();
  }
}

/** The healthy figures, for the table and the JSON line. */
function healthyRows(health: Healthy): { rows: Row[]; json: Record<string, unknown> } {
  const c = health.calibration;
  const f = health.floor;
  return {
    rows: [
      {
        measure: `healthy, ${CALLERS} callers (requests/s, median)`,
        raw: health.raw,
        guarded: health.guarded,
        'guarded/raw': health.ratio,
        note: `median of ${health.rounds} pair ratios, spread ${health.ratioMin.toFixed(3)}-${health.ratioMax.toFixed(3)}`,
      },
      {
        measure: 'healthy: client CPU per request (µs, median)',
        raw: health.cpuUsPerCall.raw,
        guarded: health.cpuUsPerCall.guarded,
        'guarded/raw': health.cpuUsPerCall.guarded / health.cpuUsPerCall.raw,
        note: cpuNote(health),
      },
      ...(c === undefined
        ? []
        : [
            {
              measure: 'calibration: raw against raw, same method (requests/s)',
              raw: c.raw,
              guarded: c.guarded,
              'guarded/raw': c.ratio,
              note: `what the method reads when there is nothing to find; spread ${c.ratioMin.toFixed(3)}-${c.ratioMax.toFixed(3)}; ${cpuNote(c)}`,
            },
          ]),
      ...(f === undefined
        ? []
        : [
            {
              measure: 'floor: raw against a bare forwarding handler (requests/s)',
              raw: f.raw,
              guarded: f.guarded,
              'guarded/raw': f.ratio,
              note: `what any layer that sees each request's events costs; spread ${f.ratioMin.toFixed(3)}-${f.ratioMax.toFixed(3)}; ${cpuNote(f)}`,
            },
          ]),
    ],
    json: {
      callers: CALLERS,
      healthy_method: ONE_PROCESS ? 'one process' : `a process per agent, replaced every ${LANE_GENERATION} pairs`,
      ...(c === undefined ? {} : { calibration_ratio: round(c.ratio), calibration_cpu_extra_us: round(c.cpuExtraUs), calibration_cpu_total_extra_us: round(c.cpuTotalUsPerCall.extra) }),
      ...(f === undefined ? {} : { floor_ratio: round(f.ratio), floor_cpu_extra_us: round(f.cpuExtraUs), floor_cpu_total_extra_us: round(f.cpuTotalUsPerCall.extra) }),
      healthy_rounds: health.rounds,
      healthy_ratio: round(health.ratio),
      healthy_ratio_spread: [round(health.ratioMin), round(health.ratioMax)],
      healthy_requests_per_s: { guarded: round(health.guarded), raw: round(health.raw) },
      healthy_cpu_ratio: round(health.cpuRatio),
      healthy_cpu_us_per_call: { guarded: round(health.cpuUsPerCall.guarded), raw: round(health.cpuUsPerCall.raw), extra: round(health.cpuExtraUs) },
      healthy_cpu_total_us_per_call: cpuTotals(health),
    },
  };
}

async function main(): Promise<void> {
  if (process.argv.includes(WRAPPER_CHILD)) {
    process.stdout.write(`${JSON.stringify(await wrapper())}\n`);
    return;
  }
  const health = await healthy();
  progress(`wrapper (a child process): ${CALLERS} callers on an in-process dispatcher stand-in, ${WRAPPER_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds`);
  const wrap = await inChild<Paired & { hot: HotLoop }>(WRAPPER_CHILD);
  const h = healthyRows(health);
  h.rows.push({
    measure: 'the retrying layer alone, on a dispatcher stand-in (µs CPU per request)',
    raw: wrap.cpuUsPerCall.raw,
    guarded: wrap.cpuUsPerCall.guarded,
    'guarded/raw': wrap.cpuUsPerCall.guarded / wrap.cpuUsPerCall.raw,
    note: `${cpuNote(wrap)}, ${wrap.rounds} pairs; no I/O`,
  });
  h.rows.push({
    measure: 'the retrying layer in a tight loop, synchronous stand-in (ns per request)',
    raw: wrap.hot.raw,
    guarded: wrap.hot.guarded,
    'guarded/raw': wrap.hot.guarded / wrap.hot.raw,
    note: `behind a bare forwarding handler: ${wrap.hot.forward.toFixed(1)} ns; all in cache, so what the layer's own code costs, not what a request pays`,
  });
  Object.assign(h.json, {
    hot_loop_ns: { raw: round(wrap.hot.raw), forward: round(wrap.hot.forward), guarded: round(wrap.hot.guarded) },
    wrapper_rounds: wrap.rounds,
    wrapper_cpu_us_per_call: { guarded: round(wrap.cpuUsPerCall.guarded), raw: round(wrap.cpuUsPerCall.raw), extra: round(wrap.cpuExtraUs) },
    wrapper_cpu_total_us_per_call: cpuTotals(wrap),
  });
  if (process.argv.includes('--healthy-only')) {
    printTable('undici: GuardedAgent vs raw undici Agent, healthy path', h.rows);
    printJson('undici', h.json);
    return;
  }

  const mode = inBenchNetns ? 'veth' : 'accept-queue';
  progress(`dead origin: a blackhole via ${mode}; dials counted ${inBenchNetns ? 'at the peer' : 'at the client'}`);
  const peer = await blackhole({ mode });
  let raw: DeadResult;
  let guarded: DeadResult;
  try {
    raw = await deadRaw(peer, inBenchNetns);
    guarded = await deadGuarded(peer, inBenchNetns);
  } finally {
    await peer.close();
  }

  const rawLater = median(raw.laterMs);
  const guardedLater = median(guarded.laterMs);
  printTable(`undici: GuardedAgent vs raw undici Agent, connect timeout ${TIMEOUT} ms, dials counted ${inBenchNetns ? 'at the peer (veth, ActiveOpens)' : 'at the client'}`, [
    ...h.rows,
    { measure: 'dead origin: request 1 (ms)', raw: raw.firstMs, guarded: guarded.firstMs, 'guarded/raw': guarded.firstMs / raw.firstMs },
    { measure: `dead origin: requests 2..${REQUESTS} (ms, median)`, raw: rawLater, guarded: guardedLater, 'guarded/raw': guardedLater / rawLater },
    { measure: `dead origin: requests 2..${REQUESTS} (ms, p99)`, raw: percentile(raw.laterMs, 99), guarded: percentile(guarded.laterMs, 99), 'guarded/raw': percentile(guarded.laterMs, 99) / percentile(raw.laterMs, 99) },
    { measure: 'dead origin: one fetch() (ms, median)', raw: median(raw.laterFetchMs), guarded: median(guarded.laterFetchMs), 'guarded/raw': median(guarded.laterFetchMs) / median(raw.laterFetchMs) },
    { measure: `dead origin: dials for ${REQUESTS} requests`, raw: raw.dials, guarded: guarded.dials, 'guarded/raw': guarded.dials / raw.dials },
  ]);
  printJson('undici', {
    connect_timeout_ms: TIMEOUT,
    dial_count: inBenchNetns ? 'peer' : 'client',
    ...h.json,
    dead_host_request_ms: round(guardedLater),
    raw_dead_host_request_ms: round(rawLater),
    dead_host_fetch_ms: round(median(guarded.laterFetchMs)),
    raw_dead_host_fetch_ms: round(median(raw.laterFetchMs)),
    dead_host_first_request_ms: round(guarded.firstMs),
    raw_dead_host_first_request_ms: round(raw.firstMs),
    dials_per_100_requests: guarded.dials,
    raw_dials_per_100_requests: raw.dials,
  });
}

if (process.argv.includes(LANE_CHILD)) laneChild();
else main().catch((err: unknown) => {
  process.stderr.write(`undici bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
