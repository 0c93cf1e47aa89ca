/**
 * bench/addresses: one name, three addresses, one of them dead (issue 16).
 *
 *   node dist/bench/addresses.js [--quick] [--timeout MS]
 *
 * A custom lookup answers `svc.test` with 127.0.0.2, 127.0.0.3 and 127.0.0.4, rotated on every
 * call (DNS round robin: the dead address comes first one call in three). 127.0.0.2 and .4 serve
 * HTTP on one port; 127.0.0.3 is blackholed on it (the unprivileged accept-queue peer: every SYN
 * dropped). Lanes, each making one request per new connection (`Connection: close`), one at a
 * time:
 * - raw: Node's `net.connect` with `autoSelectFamily` (250 ms per address, Node's happy eyeballs);
 * - undici: an undici `Agent` whose connector has the lookup and `autoSelectFamily`, `reset: true`;
 * - dialguard: `connect()` with a default HostBreaker (per-address guarding, 250 ms attempt delay).
 * Each lane runs once against a healthy name (127.0.0.2 and .4 only) for its baseline, then
 * against the name with the dead address. Figures, after the first window (the first 1.5
 * connect timeouts, while the dead address's first dial is still out):
 * - dead_address_cost_ms: mean request time with the dead address minus without, per lane;
 * - refused_with_live_addresses: dialguard calls refused (HostUnavailableError) while 2 of 3
 *   addresses were alive (must be 0);
 * - dead_address_dials_per_min: dialguard's dials to 127.0.0.3 (its `dial:settled` events, by
 *   start time) once it has stayed dead: in the last minute of dialguard's 150 s phase (full
 *   run), else replayed for minutes 2-10 on a manual clock against the same default breaker
 *   (--quick; `dead_address_dials_per_min_source` says which). `dead_address_dials_measured` is
 *   the count in the measured phase.
 * - grpc: the same for gRPC (bench/lib/grpc-addresses), one unary call per new channel against
 *   grpc-js servers on 127.0.0.2 and .4 (127.0.0.3 blackholed on their port): raw grpc-js (a
 *   resolver answering the rotated list, pick_first's own happy eyeballs) against a `GrpcGuard`
 *   with the lookup; the cost, the calls refused and the dials to the dead address in the
 *   measured phase (as long as the raw lanes').
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import net from 'node:net';
import { Agent, request } from 'undici';
import { ConnectTimeoutError, HostBreaker, HostUnavailableError, connect } from '../src/index.js';
import { blackhole } from '../src/testing/index.js';
import { ManualClock } from '../src/testing/manual-clock.js';
import { numberFlag, quick } from './lib/args.js';
import { grpcServers, guardedGrpcCall, rawGrpcCall } from './lib/grpc-addresses.js';
import { printJson, printTable, progress, round } from './lib/report.js';

const TIMEOUT = numberFlag('--timeout', 1_000);
const WINDOW_MS = 1.5 * TIMEOUT;
const MEASURE_MS = quick ? 3_000 : 20_000;
/** dialguard's measured phase: long enough (full run) for the dead address to have stayed dead a minute and more. */
const DIALGUARD_MEASURE_MS = quick ? 3_000 : 150_000;
const HEALTHY_REQUESTS = quick ? 50 : 200;
const NAME = 'svc.test';
const LIVE = ['127.0.0.2', '127.0.0.4'];
const DEAD = '127.0.0.3';

/** `addresses`, rotated by one on each call. */
function rotating(addresses: readonly string[]): () => string[] {
  let turn = 0;
  return () => {
    const k = turn++ % addresses.length;
    return [...addresses.slice(k), ...addresses.slice(0, k)];
  };
}

/** A lookup answering every name with `addresses`, rotated by one on each call. */
function rotatingLookup(addresses: readonly string[]): net.LookupFunction {
  const next = rotating(addresses);
  return ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    const list = next().map((address) => ({ address, family: 4 }));
    process.nextTick(() => (options.all ? callback(null, list) : callback(null, list[0]!.address, 4)));
  }) as unknown as net.LookupFunction;
}

/** One HTTP/1.1 request on `socket` (connected), resolved when the server closes it. */
function exchange(socket: net.Socket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let got = 0;
    socket.on('data', (chunk: Buffer) => (got += chunk.length));
    socket.once('error', reject);
    socket.once('close', () => (got > 0 ? resolve() : reject(new Error('closed without an answer'))));
    socket.end(`GET / HTTP/1.1\r\nHost: ${NAME}\r\nConnection: close\r\n\r\n`);
  });
}

type Lane = 'raw' | 'undici' | 'dialguard';
type Call = () => Promise<void>;

function rawCall(port: number, lookup: net.LookupFunction): Call {
  return () =>
    new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect({ host: NAME, port, lookup, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 250 });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timed out'));
      }, TIMEOUT);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(socket);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    }).then(exchange);
}

function undiciCall(port: number, lookup: net.LookupFunction): { call: Call; close: () => Promise<void> } {
  const agent = new Agent({ connect: { lookup, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 250, timeout: TIMEOUT } as object });
  return {
    call: async () => {
      const res = await request(`http://${NAME}:${port}/`, { dispatcher: agent, reset: true });
      await res.body.dump();
    },
    close: () => agent.close(),
  };
}

function dialguardCall(port: number, lookup: net.LookupFunction, breaker: HostBreaker): Call {
  return async () => exchange(await connect({ host: NAME, port }, { breaker, timeout: TIMEOUT, socket: { lookup } }));
}

/**
 * The dead address's dials per minute once it has stayed dead (minutes 2 to 10), replayed on a
 * manual clock against the same default breaker: one call every 100 ms reaches it one time in
 * three (rotated order), is admitted or skipped, and an admitted dial fails a connect timeout
 * later. For runs too short to have reached the open window's cap.
 */
async function replayDeadMinutes(): Promise<number> {
  const clock = new ManualClock();
  const breaker = new HostBreaker({ clock });
  const err = new ConnectTimeoutError(DEAD, TIMEOUT, 'tcp');
  let after = 0;
  for (let call = 0; clock.now() < 10 * 60_000; call++) {
    if (call % 3 === 0) {
      const answer = breaker.tryAdmit(DEAD, 1);
      if (!(answer instanceof HostUnavailableError)) {
        if (clock.now() >= 60_000) after++;
        clock.setTimeout(() => answer.failed(err), TIMEOUT);
      }
    }
    await clock.tick(100);
  }
  return after / 9;
}

interface Run {
  meanMs: number;
  requests: number;
  failed: number;
  refused: number;
  deadDials: number;
  measuredMs: number;
  /** When the measured phase ended (performance.now()). */
  end: number;
}

/** Calls one at a time: `count` calls, or for `ms` after a window of `skipMs` (not measured). */
async function drive(call: Call, plan: { count?: number; skipMs?: number; ms?: number }, deadDials: (from: number, to: number) => number): Promise<Run> {
  const t0 = performance.now();
  const times: number[] = [];
  let failed = 0;
  let refused = 0;
  let measureStart = -1;
  for (let i = 0; ; i++) {
    const now = performance.now();
    if (plan.count !== undefined && i >= plan.count) break;
    if (plan.ms !== undefined && now - t0 >= (plan.skipMs ?? 0) + plan.ms) break;
    const measuring = now - t0 >= (plan.skipMs ?? 0);
    if (measuring && measureStart < 0) measureStart = now;
    const s = performance.now();
    try {
      await call();
    } catch (err) {
      failed++;
      if (err instanceof HostUnavailableError) refused++;
    }
    if (measuring) times.push(performance.now() - s);
  }
  const end = performance.now();
  if (measureStart < 0) measureStart = end;
  // Dials started in the measured phase settle up to a connect timeout later.
  await new Promise((resolve) => setTimeout(resolve, TIMEOUT + 100));
  const measuredMs = end - measureStart;
  return {
    meanMs: times.reduce((a, b) => a + b, 0) / Math.max(1, times.length),
    requests: times.length,
    failed,
    refused,
    deadDials: deadDials(measureStart, end),
    measuredMs,
    end,
  };
}

async function main(): Promise<void> {
  const servers: http.Server[] = [];
  let port = 0;
  for (const host of LIVE) {
    const server = http.createServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    port = (server.address() as net.AddressInfo).port;
    servers.push(server);
  }
  const hole = await blackhole({ host: DEAD, port });
  const deadKey = `${DEAD}:${port}`;
  const grpcLive = await grpcServers(LIVE);
  const grpcHole = await blackhole({ host: DEAD, port: grpcLive.port });
  const grpcDeadKey = `${DEAD}:${grpcLive.port}`;
  const grpcDeadDialStarts: number[] = [];
  /** When each dial to the dead address started (a dial is counted in the phase it started in). */
  const deadDialStarts: number[] = [];
  const onSettled = (m: unknown): void => {
    const { host, duration } = m as { host: string; duration: number };
    if (host === deadKey) deadDialStarts.push(performance.now() - duration);
    if (host === grpcDeadKey) grpcDeadDialStarts.push(performance.now() - duration);
  };
  diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);

  const countDials = (from: number, to: number): number => deadDialStarts.filter((t) => t >= from && t < to).length;
  const results = new Map<Lane, { healthy: Run; dead: Run }>();
  const grpcResults = new Map<'raw' | 'dialguard', { healthy: Run; dead: Run }>();
  try {
    for (const lane of ['raw', 'undici', 'dialguard'] as const) {
      const runs: Run[] = [];
      for (const addresses of [LIVE, [LIVE[0]!, DEAD, LIVE[1]!]]) {
        const withDead = addresses.length === 3;
        progress(`${lane}: ${withDead ? `with ${DEAD} blackholed, ${(lane === 'dialguard' ? DIALGUARD_MEASURE_MS : MEASURE_MS) / 1_000} s after a ${WINDOW_MS} ms window` : 'healthy baseline'}`);
        const lookup = rotatingLookup(addresses);
        const plan = withDead ? { skipMs: WINDOW_MS, ms: lane === 'dialguard' ? DIALGUARD_MEASURE_MS : MEASURE_MS } : { count: HEALTHY_REQUESTS };
        if (lane === 'undici') {
          const u = undiciCall(port, lookup);
          runs.push(await drive(u.call, plan, countDials));
          await u.close();
        } else {
          const call = lane === 'raw' ? rawCall(port, lookup) : dialguardCall(port, lookup, new HostBreaker());
          runs.push(await drive(call, plan, countDials));
        }
      }
      results.set(lane, { healthy: runs[0]!, dead: runs[1]! });
    }
    const countGrpcDials = (from: number, to: number): number => grpcDeadDialStarts.filter((t) => t >= from && t < to).length;
    for (const lane of ['raw', 'dialguard'] as const) {
      const runs: Run[] = [];
      const breaker = new HostBreaker();
      for (const addresses of [LIVE, [LIVE[0]!, DEAD, LIVE[1]!]]) {
        const withDead = addresses.length === 3;
        progress(`grpc ${lane}: ${withDead ? `with ${DEAD} blackholed, ${MEASURE_MS / 1_000} s after a ${WINDOW_MS} ms window` : 'healthy baseline'}`);
        const plan = withDead ? { skipMs: WINDOW_MS, ms: MEASURE_MS } : { count: HEALTHY_REQUESTS };
        const call =
          lane === 'raw'
            ? rawGrpcCall(NAME, grpcLive.port, rotating(addresses), 5 * TIMEOUT)
            : guardedGrpcCall(NAME, grpcLive.port, rotatingLookup(addresses), breaker, TIMEOUT, 5 * TIMEOUT);
        runs.push(await drive(call, plan, countGrpcDials));
      }
      grpcResults.set(lane, { healthy: runs[0]!, dead: runs[1]! });
    }
  } finally {
    diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled);
    await hole.close();
    await grpcHole.close();
    grpcLive.close();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  const cost = (lane: Lane): number => {
    const r = results.get(lane)!;
    return Math.max(0, r.dead.meanMs - r.healthy.meanMs);
  };
  const g = results.get('dialguard')!.dead;
  const grpcCost = (lane: 'raw' | 'dialguard'): number => {
    const r = grpcResults.get(lane)!;
    return Math.max(0, r.dead.meanMs - r.healthy.meanMs);
  };
  const gg = grpcResults.get('dialguard')!.dead;
  // Once it has stayed dead: the last minute of a run that long, else a replay.
  const lastMinute = g.measuredMs >= 120_000 ? countDials(g.end - 60_000, g.end) : undefined;
  const stayedDead = round(lastMinute ?? (await replayDeadMinutes()));
  printTable(
    `bench/addresses: ${NAME} -> ${LIVE[0]}, ${DEAD} (blackholed), ${LIVE[1]}; rotated per lookup; ${TIMEOUT} ms connect timeout`,
    (['raw', 'undici', 'dialguard'] as const).map((lane) => {
      const r = results.get(lane)!;
      return {
        lane,
        'healthy ms/req': round(r.healthy.meanMs),
        'with dead ms/req': round(r.dead.meanMs),
        'dead address cost ms': round(cost(lane)),
        requests: r.dead.requests,
        'dials to dead': lane === 'dialguard' ? r.dead.deadDials : 'n/a',
        failed: r.dead.failed,
        refused: r.dead.refused,
      };
    }),
  );
  printTable(
    `bench/addresses, gRPC: one unary call per new channel, the same name and addresses (grpc-js servers, ${DEAD} blackholed)`,
    (['raw', 'dialguard'] as const).map((lane) => {
      const r = grpcResults.get(lane)!;
      return {
        lane: `grpc ${lane}`,
        'healthy ms/call': round(r.healthy.meanMs),
        'with dead ms/call': round(r.dead.meanMs),
        'dead address cost ms': round(grpcCost(lane)),
        calls: r.dead.requests,
        'dials to dead': lane === 'dialguard' ? r.dead.deadDials : 'n/a',
        failed: r.dead.failed,
        refused: r.dead.refused,
      };
    }),
  );
  printJson('addresses', {
    dead_address_cost_ms: { raw: round(cost('raw')), undici: round(cost('undici')), dialguard: round(cost('dialguard')) },
    refused_with_live_addresses: g.refused,
    dead_address_dials_per_min: stayedDead,
    dead_address_dials_per_min_source: lastMinute === undefined ? 'manual-clock replay, minutes 2-10' : 'measured, last minute',
    dead_address_dials_measured: g.deadDials,
    measured_ms: round(g.measuredMs),
    grpc: {
      dead_address_cost_ms: { raw: round(grpcCost('raw')), dialguard: round(grpcCost('dialguard')) },
      refused_with_live_addresses: gg.refused,
      failed_with_live_addresses: gg.failed,
      dead_address_dials_measured: gg.deadDials,
      measured_ms: round(gg.measuredMs),
    },
    quick,
  });
}

await main();
