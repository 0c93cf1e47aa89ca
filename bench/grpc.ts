/**
 * bench/grpc: dialguard's GrpcGuard against raw @grpc/grpc-js, in one run, same generic client.
 *
 *   node dist/bench/grpc.js [--quick] [--healthy-only] [--calibrate] [--versus channel,pass,calls] [--rounds N] [--lane-pairs N] [--round-ms MS] [--wrapper-rounds N]
 *
 * The raw client is how most code uses grpc-js: `new Client(target, credentials)`, its own
 * channel, no connect timeout (grpc-js has none), no keep-alive. The guarded one is the same
 * client constructor given `guard.clientOptions()`.
 *
 * - healthy_ratio: 64 concurrent callers of a unary echo against a grpc-js server in a child
 *   process (so it does not share the clients' event loop), guarded / raw calls per second: short
 *   rounds taking turns, the median of the ratios of adjacent pairs. Each client runs in a process
 *   of its own (lib/lane-process.ts), and both processes are replaced every `--lane-pairs` pairs
 *   (default 25): a process keeps for life whatever placed it a little ahead of its twin.
 *   `--calibrate` adds raw against raw by the same method. `--rounds` pairs (default 500 of 100 ms
 *   rounds, `--round-ms`); the spread of the pair ratios is printed.
 * - healthy_cpu_total_us_per_call: each lane's CPU over all its rounds over all its calls, and
 *   `extra`, guarded minus raw: the figure to read. healthy_cpu_us_per_call and healthy_cpu_ratio
 *   are medians over the pairs (one 100 ms round's CPU per call moves by ±100 µs with the GC and
 *   the neighbours, so those resolve only several µs).
 * - `--versus channel,pass,calls`: diagnostic lanes, each raw against one step from the raw client
 *   to the guarded one (see VERSUS_LABEL): the guard's channel alone, any pass-through wrapper, and
 *   GuardedCall with the pool over a plain channel.
 * - wrapper_cpu_us_per_call: the guarded layer alone, the same 64 callers and client over an
 *   in-process stand-in for a grpc-js channel that answers every call on the next tick: raw (the
 *   client on the stand-in) against guarded (each call a GuardedCall riding the ConnectionPool over
 *   it), in a child process of its own. No I/O and no server process, so the load of other
 *   processes moves it far less than the healthy lane: what the wrapping itself costs per call
 *   (`extra`, median of the pairs, with its spread). `--wrapper-rounds` pairs (default 40).
 * - killed_peer_release_ms: 64 calls in flight when the server process is killed (SIGKILL): time
 *   until all 64 are released. Each client runs against a server process of its own, alone, so
 *   neither's release waits behind the other's on the event loop.
 * - dead_queued_ms: 64 calls issued right after that, with the address gone dark (a blackhole on
 *   the same port). Guarded calls share bounded dials (three attempts each by default, one with
 *   `retry: false`: `dead_queued_one_attempt_ms`); raw grpc-js waits on a connect with no timeout
 *   until each call's deadline (the cap, reported as such).
 * - dead_target_call_ms: one call to a blackholed target once the breaker has opened (median of
 *   batches), against raw grpc-js waiting out the call's deadline on the same target.
 */
import { setMaxListeners } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type { PooledChannel } from '../src/adapters/grpc/channel-connector.js';
import { type CallHost, GuardedCall, type GrpcCall } from '../src/adapters/grpc/guarded-call.js';
import { GrpcGuard } from '../src/adapters/grpc/index.js';
import { type ChannelSpec, SpecTable } from '../src/adapters/grpc/target.js';
import { ConnectTracker, trackCredentials } from '../src/adapters/grpc/tracked-credentials.js';
import { grpcSettings } from '../src/adapters/grpc/options.js';
import { systemClock } from '../src/core/clock.js';
import { HostBreaker } from '../src/index.js';
import { ConnectionPool } from '../src/pool/connection-pool.js';
import { RetryBudget } from '../src/retry/budget.js';
import { blackhole } from '../src/testing/index.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import { numberFlag, quick } from './lib/args.js';
import { childServer } from './lib/child-server.js';
import { inChild, pairedLanes, serveLane } from './lib/lane-process.js';
import { type Paired, cpuNote, cpuTotals, pairedRounds, roundsFlag } from './lib/paired.js';
import { capped, median, throughput } from './lib/timing.js';

const CONNECT_TIMEOUT = 1_000;
const CALLERS = 64;
const HEALTHY_MS = numberFlag('--round-ms', 100); // short pairs follow the bursts of a shared machine's load
// 500 pairs: two full runs then agree within ±1 % on this noisy 2-core machine (150 did not).
const HEALTHY_ROUNDS = roundsFlag(quick ? 15 : 500);
const WRAPPER_ROUNDS = numberFlag('--wrapper-rounds', quick ? 10 : 40);
const healthyOnly = process.argv.includes('--healthy-only'); // the two healthy lanes, nothing else
const WRAPPER_CHILD = '--wrapper-child'; // set on the child process that runs the wrapper lane
const LANE_CHILD = '--lane-child'; // then 'raw' or 'guarded' and the target: a healthy lane's process
const calibrate = process.argv.includes('--calibrate'); // also raw against raw, each in its process
const RAW_CAP = 5_000; // above three connect timeouts, so the guarded retries always fit under it
const WARM_UP_MS = quick ? 600 : 1_000;
/** Pairs run by one pair of lane processes before both are replaced (see LaneRun.generation). */
const LANE_GENERATION = Math.max(1, numberFlag('--lane-pairs', 25));
const DEADLINE = 10_000;

const passthrough = (b: Buffer): Buffer => b;
const unary = (name: string) => ({
  path: `/dialguard.bench.Echo/${name}`,
  requestStream: false,
  responseStream: false,
  requestSerialize: passthrough,
  requestDeserialize: passthrough,
  responseSerialize: passthrough,
  responseDeserialize: passthrough,
});
const service = { Echo: unary('Echo'), Hold: unary('Hold') } satisfies grpc.ServiceDefinition;
type Unary = (req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Buffer) => void) => grpc.ClientUnaryCall;
interface BenchClient extends grpc.Client {
  Echo: Unary;
  Hold: Unary;
}
const BenchClient = grpc.makeGenericClientConstructor(service, 'Echo') as unknown as new (
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => BenchClient;

const payload = Buffer.from('ping');

function invoke(client: BenchClient, method: 'Echo' | 'Hold', deadline = Date.now() + DEADLINE): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    client[method](payload, new grpc.Metadata(), { deadline }, (err, res) => (err ? reject(err) : resolve(res!)));
  });
}

/** A grpc-js server in a child process: Echo answers, Hold never does. */
async function serverProcess(port = 0): Promise<{ target: string; port: number; kill: () => Promise<void> }> {
  const server = await childServer(`
    const grpc = require('@grpc/grpc-js');
    const p = (b) => b;
    const m = (n) => ({ path: '/dialguard.bench.Echo/' + n, requestStream: false, responseStream: false,
      requestSerialize: p, requestDeserialize: p, responseSerialize: p, responseDeserialize: p });
    const s = new grpc.Server();
    s.addService({ Echo: m('Echo'), Hold: m('Hold') }, { Echo: (c, cb) => cb(null, c.request), Hold: () => {} });
    s.bindAsync('127.0.0.1:${port}', grpc.ServerCredentials.createInsecure(), (e, port) => {
      if (e) { console.error(e.message); process.exit(1); }
      process.stdout.write(port + '\\n');
    });
  `);
  return { target: `127.0.0.1:${server.port}`, port: server.port, kill: () => server.stop('SIGKILL') };
}

function newGuard(breaker = new HostBreaker()): GrpcGuard {
  return new GrpcGuard({ connectTimeout: CONNECT_TIMEOUT, breaker, closeTimeout: 100 });
}

interface Healthy extends Paired {
  /** Channels the guarded client opened. */
  channels: number;
}

/**
 * Raw and guarded take turns in short rounds (which goes first alternates) and each pair of
 * adjacent rounds gives one ratio: other processes' load drifts between rounds far more than
 * within a pair, so the median of pair ratios is steadier than a ratio of medians. Each client
 * runs in a process of its own (see lib/lane-process.ts: an A/A run of two clients in one process
 * read 3 % off), as a user's process runs one kind of client. `--calibrate` also runs raw
 * against raw that way and prints it: what the method reads when there is nothing to find.
 */
async function healthy(): Promise<Healthy & { calibration: Paired | undefined; versus: Array<{ kind: LaneKind; paired: Paired }> }> {
  progress(
    `healthy: ${CALLERS} concurrent callers, ${HEALTHY_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds, each client in a process of its own, fresh processes every ${LANE_GENERATION} pairs`,
  );
  const server = await serverProcess();
  const lanes = async (a: LaneKind, b: LaneKind): Promise<{ paired: Paired; channels: number }> => {
    const { paired, reports } = await pairedLanes({
      a: [LANE_CHILD, a, server.target],
      b: [LANE_CHILD, b, server.target],
      rounds: HEALTHY_ROUNDS,
      ms: HEALTHY_MS,
      generation: LANE_GENERATION,
      warmUpMs: WARM_UP_MS, // the JIT has more of the guarded path to compile
    });
    return { paired, channels: reports.reduce((sum, r) => sum + Number(r.channels), 0) / reports.length };
  };
  const main = await lanes('raw', 'guarded');
  let calibration: Paired | undefined;
  if (calibrate) {
    progress(`calibration: raw against raw, ${HEALTHY_ROUNDS} pairs, each in a process of its own`);
    calibration = (await lanes('raw', 'raw')).paired;
  }
  const versusLanes: Array<{ kind: LaneKind; paired: Paired }> = [];
  for (const kind of versus) {
    progress(`versus: raw against ${kind} (${VERSUS_LABEL[kind]}), ${HEALTHY_ROUNDS} pairs`);
    versusLanes.push({ kind, paired: (await lanes('raw', kind)).paired });
  }
  await server.kill();
  return { ...main.paired, channels: main.channels, calibration, versus: versusLanes };
}

/** What a healthy lane's process runs (`--versus` names the last three). */
type LaneKind = 'raw' | 'guarded' | 'channel' | 'pass' | 'calls';

/** The diagnostic lanes `--versus` runs against raw, each a step from the raw client to the guarded one. */
const VERSUS_LABEL: Record<Exclude<LaneKind, 'raw' | 'guarded'>, string> = {
  channel: "the raw client over a channel made as the guard makes its own (tracked credentials, keep-alive, a local subchannel pool)",
  pass: 'the raw client through a pass-through call wrapper over a plain channel (what any layer between a client and its channel costs)',
  calls: "GuardedCall and the ConnectionPool over a plain READY channel, without GrpcGuard's channel, specs or connector",
};

const versus: Array<Exclude<LaneKind, 'raw' | 'guarded'>> = (() => {
  const i = process.argv.indexOf('--versus');
  if (i < 0) return [];
  const kinds = (process.argv[i + 1] ?? '').split(',');
  for (const k of kinds) if (!(k in VERSUS_LABEL)) throw new RangeError(`--versus takes ${Object.keys(VERSUS_LABEL).join(', ')}; got ${k}`);
  return kinds as Array<Exclude<LaneKind, 'raw' | 'guarded'>>;
})();

/** A plain grpc-js channel to `target`, READY (or rejected after 5 s). */
async function readyChannel(target: string, credentials: grpc.ChannelCredentials): Promise<grpc.Channel> {
  const channel = new grpc.Channel(target, credentials, {});
  await new Promise<void>((resolve, reject) => {
    const check = (error?: Error): void => {
      if (error !== undefined) return reject(error);
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) resolve();
      else channel.watchConnectivityState(state, Date.now() + 5_000, check);
    };
    check();
  });
  return channel;
}

/** A call that relays everything to `inner` and its answers back: the least any wrapper does. */
function passThrough(inner: GrpcCall): GrpcCall {
  let outer: grpc.InterceptingListener;
  const relay: grpc.InterceptingListener = {
    onReceiveMetadata: (m) => outer.onReceiveMetadata(m),
    onReceiveMessage: (m) => outer.onReceiveMessage(m),
    onReceiveStatus: (st) => outer.onReceiveStatus(st),
  };
  return {
    start: (metadata, listener) => {
      outer = listener;
      inner.start(metadata, relay);
    },
    sendMessageWithContext: (context, message) => inner.sendMessageWithContext(context, message),
    halfClose: () => inner.halfClose(),
    startRead: () => inner.startRead(),
    cancelWithStatus: (code, details) => inner.cancelWithStatus(code, details),
    getPeer: () => inner.getPeer(),
    getCallNumber: () => inner.getCallNumber(),
    setCredentials: (credentials) => inner.setCredentials(credentials),
    getAuthContext: () => inner.getAuthContext(),
  };
}

/** The client options of a lane of `kind` (undefined: the raw client's own channel). */
async function laneOptions(kind: LaneKind, target: string, credentials: grpc.ChannelCredentials, guard: GrpcGuard | undefined): Promise<grpc.ClientOptions | undefined> {
  switch (kind) {
    case 'raw':
      return undefined;
    case 'guarded':
      return guard!.clientOptions();
    case 'channel': {
      const options = new SpecTable(grpcSettings({}).channelOptions).acquire(target, credentials, undefined).options;
      return { channelOverride: new grpc.Channel(target, trackCredentials(credentials, new ConnectTracker('tcp')), options) };
    }
    case 'pass': {
      const real = await readyChannel(target, credentials);
      return { channelOverride: standInChannel((...args) => passThrough(real.createCall(...args))) };
    }
    case 'calls': {
      const { host, spec } = callHost(await readyChannel(target, credentials), target);
      return { channelOverride: standInChannel((method, deadline, authority, parent, flags) => new GuardedCall(host, spec, method, deadline, authority, parent, flags)) };
    }
  }
}

/** A healthy lane's process: one client of `kind` to `target`, running the rounds it is asked for. */
async function laneChild(): Promise<void> {
  const i = process.argv.indexOf(LANE_CHILD);
  const kind = process.argv[i + 1] as LaneKind;
  const target = process.argv[i + 2]!;
  const guard = kind === 'guarded' ? newGuard() : undefined;
  const credentials = grpc.credentials.createInsecure();
  const client = new BenchClient(target, credentials, await laneOptions(kind, target, credentials, guard));
  serveLane(CALLERS, () => invoke(client, 'Echo'), async () => {
    const channels = guard?.stats().opened ?? 0;
    client.close();
    await guard?.close();
    return { channels };
  });
}

/** A grpc-js call stand-in: answers (headers, the request back, OK) on the tick after half-close. */
class EchoCall {
  #listener: grpc.InterceptingListener | undefined;
  #message: unknown;
  start(_metadata: grpc.Metadata, listener: grpc.InterceptingListener): void {
    this.#listener = listener;
  }
  sendMessageWithContext(_context: unknown, message: unknown): void {
    this.#message = message;
  }
  halfClose(): void {
    process.nextTick(() => {
      const l = this.#listener!;
      l.onReceiveMetadata(new grpc.Metadata());
      l.onReceiveMessage(this.#message);
      l.onReceiveStatus({ code: grpc.status.OK, details: 'OK', metadata: new grpc.Metadata() });
    });
  }
  startRead(): void {}
  cancelWithStatus(): void {}
  getPeer(): string {
    return 'stand-in';
  }
  getCallNumber(): number {
    return 0;
  }
  setCredentials(): void {}
  getAuthContext(): null {
    return null;
  }
}

/** A grpc-js channel stand-in, always READY, whose calls are {@link EchoCall}s; `call` makes them. */
function standInChannel(call: (...args: Parameters<grpc.ChannelInterface['createCall']>) => GrpcCall): grpc.ChannelInterface {
  return {
    close: () => {},
    getTarget: () => 'stand-in:1',
    getConnectivityState: () => grpc.connectivityState.READY,
    watchConnectivityState: () => {},
    getChannelzRef: () => ({ kind: 'channel', id: -1, name: 'stand-in:1' }) as unknown as ReturnType<grpc.ChannelInterface['getChannelzRef']>,
    createCall: call,
  };
}

/**
 * The wrapper lane, in a process of its own: grpc-js and GuardedCall then see only the stand-in's
 * calls, as a client sees only real ones (after the healthy lane, every call site in both would
 * also have seen real calls, and pay for the mix).
 */
async function wrapperInChild(): Promise<Paired> {
  progress(`wrapper (a child process): ${CALLERS} callers on an in-process channel stand-in, ${WRAPPER_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds`);
  return inChild<Paired>(WRAPPER_CHILD);
}

/**
 * A CallHost as GrpcGuard builds it with its defaults (retries on, a budget) over one channel that
 * is READY: the pool's connector hands out `channel` as the connection to `target`.
 */
function callHost(channel: grpc.ChannelInterface, target: string): { host: CallHost; spec: ChannelSpec; pool: ConnectionPool<PooledChannel> } {
  const clock = systemClock;
  const pool = new ConnectionPool<PooledChannel>({
    breaker: null,
    hostOf: () => target,
    clock,
    connector: {
      connect: async (key) => ({ channel: channel as grpc.Channel, key, tracker: new ConnectTracker('tcp'), closed: false, retireIfNotReady: undefined }),
      close: () => {},
    },
  });
  const specs = new SpecTable({});
  const spec = specs.acquire(target, grpc.credentials.createInsecure(), {});
  const host: CallHost = {
    pool,
    ready: () => true,
    mistake: () => undefined,
    specs,
    clock,
    replayBufferSize: 262_144,
    idempotent: () => false,
    idempotentUse: { idempotent: true, resends: 2 },
    retry: { maxAttempts: 3, backoff: undefined, budget: new RetryBudget(), clock, statuses: new Set(), shutdown: new AbortController().signal },
    reconnect: () => {},
    onChange: () => () => {},
    closed: false,
    refused: () => false,
  };
  return { host, spec, pool };
}

/** The guarded layer alone against the same client on the stand-in channel (see the module docs). */
async function wrapper(): Promise<Paired> {
  const inner = standInChannel(() => new EchoCall() as unknown as GrpcCall);
  const { host, spec, pool } = callHost(inner, 'stand-in:1');
  const outer = standInChannel((method, deadline, authority, parent, flags) => new GuardedCall(host, spec, method, deadline, authority, parent, flags));
  const raw = new BenchClient('stand-in:1', grpc.credentials.createInsecure(), { channelOverride: inner });
  const guarded = new BenchClient('stand-in:1', grpc.credentials.createInsecure(), { channelOverride: outer });
  await throughput(CALLERS, WARM_UP_MS, () => invoke(raw, 'Echo'));
  await throughput(CALLERS, WARM_UP_MS, () => invoke(guarded, 'Echo'));
  const paired = await pairedRounds(WRAPPER_ROUNDS, HEALTHY_MS, CALLERS, () => invoke(raw, 'Echo'), () => invoke(guarded, 'Echo'));
  await pool.close();
  return paired;
}

type Settled = { ms: number; capped: boolean; failed: number };

/** `p` handled at once: resolves true when it failed. */
function quiet(p: Promise<unknown>): Promise<boolean> {
  return p.then(
    () => false,
    () => true,
  );
}

/** Waits for `calls` (made with {@link quiet}) to settle, timing from `t0`; gives up at `cap` ms and says so. */
async function settleAll(calls: Array<Promise<boolean>>, t0: number, cap = Number.POSITIVE_INFINITY): Promise<Settled> {
  let failed = 0;
  const all = Promise.all(calls.map((c) => c.then((f) => void (f && failed++))));
  const hit = await capped(all, cap);
  return { ms: performance.now() - t0, capped: hit, failed };
}

type Kind = 'raw' | 'guarded' | 'guarded, one attempt';

/**
 * One client of `kind` against its own server process: CALLERS calls in flight when the process
 * is killed (time until all are released), then CALLERS more once the address has gone dark.
 * Each kind runs alone, so no client's release waits behind another's on the event loop.
 */
async function killedPeer(kind: Kind): Promise<{ inFlight: Settled; queued: Settled; dials: number }> {
  progress(`killed peer, ${kind}: ${CALLERS} calls in flight when the server process is killed, then ${CALLERS} more with the address dark`);
  const server = await serverProcess();
  const breaker = new HostBreaker();
  const guard = new GrpcGuard({ connectTimeout: CONNECT_TIMEOUT, breaker, closeTimeout: 100, ...(kind === 'guarded, one attempt' ? { retry: false } : {}) });
  const client =
    kind === 'raw'
      ? new BenchClient(server.target, grpc.credentials.createInsecure())
      : new BenchClient(server.target, grpc.credentials.createInsecure(), guard.clientOptions());
  await invoke(client, 'Echo');
  const held = Array.from({ length: CALLERS }, () => quiet(invoke(client, 'Hold')));
  await new Promise((r) => setTimeout(r, 200)); // let every call reach the server
  const t0 = performance.now();
  await server.kill();
  const inFlight = await settleAll(held, t0, RAW_CAP);

  const dark = await blackhole({ port: server.port });
  const failedBefore = breaker.stats().failed;
  const t1 = performance.now();
  // Raw calls get the cap as their deadline: without one they would wait for the kernel (~130 s).
  const deadline = kind === 'raw' ? Date.now() + RAW_CAP : Date.now() + DEADLINE;
  const queued = await settleAll(
    Array.from({ length: CALLERS }, () => quiet(invoke(client, 'Echo', deadline))),
    t1,
    RAW_CAP + 1_000,
  );
  const dials = breaker.stats().failed - failedBefore;
  client.close();
  await guard.close();
  await dark.close();
  return { inFlight, queued: { ...queued, capped: queued.capped || (kind === 'raw' && queued.ms >= RAW_CAP) }, dials };
}

async function deadTarget(): Promise<{ guardedMs: number; rawMs: number; tripMs: number; refused: number }> {
  progress('dead target: calls to a blackholed target once the breaker has opened');
  const peer = await blackhole();
  const breaker = new HostBreaker({ failureThreshold: 3, openDuration: 60_000 });
  const guard = newGuard(breaker);
  const guarded = new BenchClient(peer.address, grpc.credentials.createInsecure(), guard.clientOptions());
  const t0 = performance.now();
  await invoke(guarded, 'Echo').catch(() => {}); // 3 attempts, 3 bounded dials: the breaker opens
  while (breaker.state(peer.address)?.state !== 'open' && performance.now() - t0 < 10 * CONNECT_TIMEOUT) {
    await invoke(guarded, 'Echo').catch(() => {});
  }
  const tripMs = performance.now() - t0;
  const samples: number[] = [];
  for (let batch = 0; batch < (quick ? 20 : 100); batch++) {
    const s = performance.now();
    for (let i = 0; i < 100; i++) await invoke(guarded, 'Echo').catch(() => {});
    samples.push((performance.now() - s) / 100);
  }
  const refused = breaker.stats().refused;

  const raw = new BenchClient(peer.address, grpc.credentials.createInsecure());
  const rawDeadline = quick ? 1_000 : 2_000;
  const r0 = performance.now();
  await settleAll(
    Array.from({ length: 8 }, () => quiet(invoke(raw, 'Echo', Date.now() + rawDeadline))),
    r0,
  );
  const rawMs = performance.now() - r0;
  guarded.close();
  raw.close();
  await guard.close();
  await peer.close();
  return { guardedMs: median(samples), rawMs, tripMs, refused };
}

async function main(): Promise<void> {
  setMaxListeners(0);
  if (process.argv.includes(WRAPPER_CHILD)) {
    process.stdout.write(`${JSON.stringify(await wrapper())}\n`);
    return;
  }
  if (process.argv.includes(LANE_CHILD)) {
    await laneChild();
    return;
  }
  const health = await healthy();
  const cal = health.calibration;
  const wrap = await wrapperInChild();
  const healthyRows = [
    {
      measure: `healthy, ${CALLERS} callers (calls/s, median of ${HEALTHY_ROUNDS} rounds)`,
      raw: health.raw,
      guarded: health.guarded,
      'guarded/raw': health.ratio,
      note: `median of pair ratios, spread ${health.ratioMin.toFixed(3)}-${health.ratioMax.toFixed(3)}; channels each guarded process opened: ${health.channels}`,
    },
    {
      measure: '  client CPU per call (µs, median)',
      raw: health.cpuUsPerCall.raw,
      guarded: health.cpuUsPerCall.guarded,
      'guarded/raw': health.cpuUsPerCall.guarded / health.cpuUsPerCall.raw,
      note: `${cpuNote(health)}; raw/guarded CPU, median of pairs: ${round(health.cpuRatio)}`,
    },
    {
      measure: `  the wrapping alone, on a channel stand-in (µs CPU per call)`,
      raw: wrap.cpuUsPerCall.raw,
      guarded: wrap.cpuUsPerCall.guarded,
      'guarded/raw': wrap.cpuUsPerCall.guarded / wrap.cpuUsPerCall.raw,
      note: `${cpuNote(wrap)}, ${wrap.rounds} pairs; no I/O`,
    },
    ...(cal === undefined
      ? []
      : [
          {
            measure: '  calibration: raw against raw, same method (calls/s)',
            raw: cal.raw,
            guarded: cal.guarded,
            'guarded/raw': cal.ratio,
            note: `what the method reads with nothing to find: spread ${cal.ratioMin.toFixed(3)}-${cal.ratioMax.toFixed(3)}, CPU extra ${cal.cpuExtraUs.toFixed(2)} µs, all rounds ${cal.cpuTotalUsPerCall.extra.toFixed(2)} µs`,
          },
        ]),
    ...health.versus.map(({ kind, paired }) => ({
      measure: `  versus: raw against ${kind} (calls/s)`,
      raw: paired.raw,
      guarded: paired.guarded,
      'guarded/raw': paired.ratio,
      note: `${VERSUS_LABEL[kind as keyof typeof VERSUS_LABEL]}; spread ${paired.ratioMin.toFixed(3)}-${paired.ratioMax.toFixed(3)}; CPU ${cpuNote(paired)}`,
    })),
  ];
  const healthyFields = {
    connect_timeout_ms: CONNECT_TIMEOUT,
    callers: CALLERS,
    healthy_rounds: health.rounds,
    healthy_ratio: round(health.ratio),
    healthy_ratio_spread: [round(health.ratioMin), round(health.ratioMax)],
    healthy_calls_per_s: { guarded: round(health.guarded), raw: round(health.raw) },
    healthy_cpu_ratio: round(health.cpuRatio),
    healthy_cpu_us_per_call: { guarded: round(health.cpuUsPerCall.guarded), raw: round(health.cpuUsPerCall.raw), extra: round(health.cpuExtraUs) },
    healthy_cpu_total_us_per_call: cpuTotals(health),
    healthy_cpu_extra_spread: [round(health.cpuExtraMin), round(health.cpuExtraMax)],
    healthy_channels_opened: health.channels,
    wrapper_rounds: wrap.rounds,
    wrapper_cpu_us_per_call: { guarded: round(wrap.cpuUsPerCall.guarded), raw: round(wrap.cpuUsPerCall.raw), extra: round(wrap.cpuExtraUs) },
    wrapper_cpu_total_us_per_call: cpuTotals(wrap),
    wrapper_extra_spread: [round(wrap.cpuExtraMin), round(wrap.cpuExtraMax)],
    ...Object.fromEntries(health.versus.map(({ kind, paired }) => [`versus_${kind}`, { ratio: round(paired.ratio), cpu_total_us_per_call: cpuTotals(paired) }])),
    ...(cal === undefined ? {} : { calibration_ratio: round(cal.ratio), calibration_cpu_extra_us: round(cal.cpuExtraUs), calibration_cpu_total_extra_us: round(cal.cpuTotalUsPerCall.extra) }),
  };
  const title = `grpc: GrpcGuard vs raw @grpc/grpc-js (connect timeout ${CONNECT_TIMEOUT} ms, ${CALLERS} callers)`;
  if (healthyOnly) {
    printTable(title, healthyRows);
    printJson('grpc', healthyFields);
    return;
  }
  const killed = {
    raw: await killedPeer('raw'),
    guarded: await killedPeer('guarded'),
    once: await killedPeer('guarded, one attempt'),
  };
  const dead = await deadTarget();

  const show = (s: Settled): string => (s.capped ? `>${Math.round(s.ms)} (capped)` : String(Math.round(s.ms)));
  printTable(title, [
    ...healthyRows,
    {
      measure: `killed peer, ${CALLERS} in flight released (ms)`,
      raw: show(killed.raw.inFlight),
      guarded: show(killed.guarded.inFlight),
      'guarded/raw': killed.guarded.inFlight.ms / killed.raw.inFlight.ms,
      note: `released with an error: raw ${killed.raw.inFlight.failed}, guarded ${killed.guarded.inFlight.failed}`,
    },
    {
      measure: `address dark, ${CALLERS} queued after the kill (ms)`,
      raw: show(killed.raw.queued),
      guarded: show(killed.guarded.queued),
      'guarded/raw': killed.guarded.queued.ms / killed.raw.queued.ms,
      note: `3 attempts each, ${killed.guarded.dials} shared dials; raw waits out its deadline`,
    },
    {
      measure: `  the same, one attempt per call (ms)`,
      raw: show(killed.raw.queued),
      guarded: show(killed.once.queued),
      'guarded/raw': killed.once.queued.ms / killed.raw.queued.ms,
      note: `retry: false; ${killed.once.dials} shared dial(s)`,
    },
    {
      measure: 'dead target, breaker open: one call (ms)',
      raw: dead.rawMs,
      guarded: dead.guardedMs,
      'guarded/raw': dead.guardedMs / dead.rawMs,
      note: `breaker opened after ${Math.round(dead.tripMs)} ms; ${dead.refused} refusals`,
    },
  ]);
  printJson('grpc', {
    ...healthyFields,
    killed_peer_release_ms: round(killed.guarded.inFlight.ms),
    raw_killed_peer_release_ms: round(killed.raw.inFlight.ms),
    raw_killed_peer_capped: killed.raw.inFlight.capped,
    dead_queued_ms: round(killed.guarded.queued.ms),
    dead_queued_dials: killed.guarded.dials,
    dead_queued_one_attempt_ms: round(killed.once.queued.ms),
    raw_dead_queued_ms: round(killed.raw.queued.ms),
    raw_dead_queued_capped: killed.raw.queued.capped,
    dead_target_call_ms: round(dead.guardedMs),
    raw_dead_target_call_ms: round(dead.rawMs),
    dead_target_trip_ms: round(dead.tripMs),
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`grpc bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
