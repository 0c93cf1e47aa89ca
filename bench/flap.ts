/**
 * bench/flap: one origin goes away and comes back, under 64 concurrent idempotent callers, with
 * four client policies side by side in one run (issue 11).
 *
 *   node dist/bench/flap.js [--quick]
 *
 * Outages: a restart (the port closed: every dial refused) of 0.3 s, 1 s and 3 s (long enough to
 * open the host, so its probes meet the closed port), and a blackhole
 * (every SYN dropped, the unprivileged accept-queue peer on the same port) of 5 s and of 120 s
 * (30 s under --quick). Lanes, each with a fresh server, client, breaker and retry budget:
 * - raw: undici's own `Agent` with its defaults (10 s connect timeout, no retries);
 * - seed 000: a GuardedAgent whose breaker opens on 3 consecutive failed dials for a fixed 30 s;
 * - seed 002: a GuardedAgent whose breaker opens on 3 consecutive failed dials for 1 s doubling
 *   to 60 s with +-50 % jitter;
 * - dialguard: a GuardedAgent with every default (3 failed rounds over >= 1.5 s, 1 s to 30 s
 *   adaptive window, 2.5 s dials, restart-spanning backoff).
 * The seed lanes keep dialguard's retry schedule and dial timeout, and, being HostBreakers, its
 * rule 3 (dials that overlap in time are one round): only the blip rule and the window differ.
 *
 * For each outage and lane: calls that failed, calls refused after the host was back, ms from
 * the host's return to the first call that succeeded, and dials started during the outage (at
 * the client: undici's `beforeConnect` for raw, dialguard's `dial:settled` events for the others;
 * a refusal is not a dial). The JSON line's `restart_*` figures are dialguard's default over both
 * restarts; `dead_dials` is its dials in the first minute of the long blackhole and per minute
 * after (measured when the outage is longer than a minute, else replayed for ten minutes on a
 * manual clock against the same default breaker, marked `per_minute_after_source`).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, type Dispatcher, request } from 'undici';
import { GuardedAgent } from '../src/adapters/undici/index.js';
import { HostBreaker, HostUnavailableError, proportionalJitter } from '../src/index.js';
import { RetryBudget } from '../src/retry/budget.js';
import { type Blackhole, blackhole } from '../src/testing/index.js';
import { ManualClock } from '../src/testing/manual-clock.js';
import { quick } from './lib/args.js';
import { printJson, printTable, progress, round } from './lib/report.js';

const CALLERS = 64;
const WARM_MS = 1_000;
/** How long callers keep calling after the host is back, at least, and at most. */
const AFTER_MIN_MS = 3_000;
const AFTER_MAX_MS = 65_000;

interface Outage {
  name: string;
  ms: number;
  kind: 'refuse' | 'blackhole';
}

const LONG_MS = quick ? 30_000 : 120_000;
const OUTAGES: readonly Outage[] = [
  { name: 'restart_0.3s', ms: 300, kind: 'refuse' },
  { name: 'restart_1s', ms: 1_000, kind: 'refuse' },
  // Long enough to open the host (minOutage 1.5 s), so its probes meet the refusing port.
  { name: 'restart_3s', ms: 3_000, kind: 'refuse' },
  { name: 'blackhole_5s', ms: 5_000, kind: 'blackhole' },
  { name: `blackhole_${LONG_MS / 1_000}s`, ms: LONG_MS, kind: 'blackhole' },
];

type LaneName = 'raw' | 'seed000' | 'seed002' | 'dialguard';
const LANES: readonly LaneName[] = ['raw', 'seed000', 'seed002', 'dialguard'];

function breakerFor(lane: LaneName): HostBreaker {
  if (lane === 'seed000') return new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 30_000 });
  if (lane === 'seed002') return new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: proportionalJitter({ base: 1_000, max: 60_000, jitter: 0.5 }) });
  return new HostBreaker();
}

function clientFor(lane: LaneName): Dispatcher {
  if (lane === 'raw') return new Agent();
  return new GuardedAgent({ breaker: breakerFor(lane), budget: new RetryBudget() });
}

/** An HTTP origin that can close its port, or blackhole it, and come back on the same port. */
class Origin {
  port = 0;
  #server: http.Server | undefined;
  #hole: Blackhole | undefined;

  async start(): Promise<void> {
    const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
      req.resume();
      res.end('ok');
    });
    for (let tries = 0; ; tries++) {
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(this.port, '127.0.0.1', () => {
            server.off('error', reject);
            resolve();
          });
        });
        break;
      } catch (err) {
        if (tries > 100) throw err;
        await sleep(10); // the blackhole's listener is still letting go of the port
      }
    }
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  async down(kind: Outage['kind']): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    }
    if (kind === 'blackhole') this.#hole = await blackhole({ port: this.port });
  }

  async up(): Promise<void> {
    const hole = this.#hole;
    this.#hole = undefined;
    if (hole !== undefined) await hole.close();
    await this.start();
  }

  async close(): Promise<void> {
    await this.#hole?.close();
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    }
  }
}

/** Ports of the raw lane's origins: only their undici connects are counted there. */
const rawPorts = new Set<number>();
/** Dial start times by port: undici's connects for raw, dialguard's admitted dials for the rest. */
const dialStarts = new Map<number, number[]>();
function noteDial(port: number, at: number): void {
  let list = dialStarts.get(port);
  if (list === undefined) dialStarts.set(port, (list = []));
  list.push(at);
}
diagnosticsChannel.subscribe('undici:client:beforeConnect', (message) => {
  const m = message as { connectParams: { port: string | number }; connector: { name?: string } };
  if (rawPorts.has(Number(m.connectParams.port))) noteDial(Number(m.connectParams.port), performance.now());
});
diagnosticsChannel.subscribe('dialguard:dial:settled', (message) => {
  const m = message as { host: string; duration: number };
  const port = Number(m.host.slice(m.host.lastIndexOf(':') + 1));
  noteDial(port, performance.now() - m.duration);
});
interface Result {
  calls: number;
  failed: number;
  refused_after_back: number;
  recovery_ms: number | null;
  dials_during_outage: number;
  /** Dials started in the first minute of the outage, and per minute after it (long outage only). */
  dials_first_minute: number;
  dials_per_minute_after: number | null;
}

async function play(lane: LaneName, outage: Outage): Promise<Result> {
  const origin = new Origin();
  await origin.start();
  if (lane === 'raw') rawPorts.add(origin.port);
  const client = clientFor(lane);
  const url = `http://127.0.0.1:${origin.port}/`;
  let backAt = Number.POSITIVE_INFINITY;
  let firstOkAfterBack = Number.POSITIVE_INFINITY;
  let stopped = false;
  const tally = { calls: 0, failed: 0, refusedAfterBack: 0 };

  const caller = async (): Promise<void> => {
    while (!stopped) {
      const startedBack = performance.now() >= backAt;
      tally.calls++;
      try {
        const res = await request(url, { dispatcher: client });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
        const now = performance.now();
        if (now >= backAt && now < firstOkAfterBack) firstOkAfterBack = now;
      } catch (err) {
        tally.failed++;
        if (startedBack && err instanceof HostUnavailableError) tally.refusedAfterBack++;
      }
      await sleep(10);
    }
  };
  const run = Promise.all(Array.from({ length: CALLERS }, caller));

  await sleep(WARM_MS);
  const downAt = performance.now();
  await origin.down(outage.kind);
  await sleep(Math.max(0, outage.ms - (performance.now() - downAt)));
  await origin.up();
  backAt = performance.now();
  const deadline = backAt + AFTER_MAX_MS;
  while (performance.now() < deadline && (performance.now() < backAt + AFTER_MIN_MS || firstOkAfterBack === Number.POSITIVE_INFINITY)) await sleep(50);
  stopped = true;
  await run;
  await (client as { close(): Promise<void> }).close();
  await origin.close();

  const starts = dialStarts.get(origin.port) ?? [];
  const during = starts.filter((t) => t >= downAt && t < backAt);
  const firstMinute = during.filter((t) => t < downAt + 60_000).length;
  const afterMinutes = (backAt - downAt - 60_000) / 60_000;
  return {
    calls: tally.calls,
    failed: tally.failed,
    refused_after_back: tally.refusedAfterBack,
    recovery_ms: Number.isFinite(firstOkAfterBack) ? Math.round(firstOkAfterBack - backAt) : null,
    dials_during_outage: during.length,
    dials_first_minute: firstMinute,
    dials_per_minute_after: afterMinutes > 0.5 ? round((during.length - firstMinute) / afterMinutes) : null,
  };
}

/**
 * Dials per minute against a host dead for ten minutes, after the first, with dialguard's
 * default breaker on a manual clock: eager callers asking every 10 ms, every dial refused.
 */
function replayDeadMinutes(): number {
  const clock = new ManualClock();
  const breaker = new HostBreaker({ clock });
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  let after = 0;
  for (let t = 0; t < 600_000; t += 10) {
    const answer = breaker.tryAdmit('dead:80');
    if (!(answer instanceof HostUnavailableError)) {
      if (t >= 60_000) after++;
      answer.failed(refused);
    }
    clock.advance(10);
  }
  return round(after / 9);
}

/** One request to a blackholed origin, raw undici and a default GuardedAgent side by side. */
async function firstFetchBlackholed(): Promise<{ raw: number; dialguard: number }> {
  const holes = await Promise.all([blackhole(), blackhole()]);
  const timedCall = async (dispatcher: Dispatcher, hole: Blackhole): Promise<number> => {
    const start = performance.now();
    await request(`http://127.0.0.1:${hole.port}/`, { dispatcher }).then(
      (res) => res.body.dump(),
      () => undefined,
    );
    const ms = Math.round(performance.now() - start);
    await (dispatcher as { destroy(): Promise<void> }).destroy();
    return ms;
  };
  const [raw, dialguard] = await Promise.all([timedCall(new Agent(), holes[0]), timedCall(new GuardedAgent({ breaker: new HostBreaker(), budget: new RetryBudget() }), holes[1])]);
  await Promise.all(holes.map((h) => h.close()));
  return { raw, dialguard };
}

async function main(): Promise<void> {
  progress('the first request to a blackholed origin: raw undici vs a default GuardedAgent');
  const firstFetch = await firstFetchBlackholed();
  const results = new Map<string, Map<LaneName, Result>>();
  for (const outage of OUTAGES) {
    const row = new Map<LaneName, Result>();
    results.set(outage.name, row);
    for (const lane of LANES) {
      progress(`${outage.name}: ${lane}`);
      row.set(lane, await play(lane, outage));
    }
  }

  const rows = OUTAGES.flatMap((o) =>
    LANES.map((lane) => {
      const r = results.get(o.name)!.get(lane)!;
      return {
        outage: o.name,
        lane,
        calls: r.calls,
        failed: r.failed,
        'refused after back': r.refused_after_back,
        'return to first success (ms)': r.recovery_ms ?? 'none',
        'dials during outage': r.dials_during_outage,
      };
    }),
  );
  printTable(`flap: one origin down and back, ${CALLERS} concurrent idempotent callers, four policies`, rows);
  printTable('flap: the first request to a blackholed origin, all defaults', [
    { client: 'raw undici Agent', ms: firstFetch.raw },
    { client: 'dialguard GuardedAgent', ms: firstFetch.dialguard, 'dialguard/raw': firstFetch.dialguard / firstFetch.raw },
  ]);

  const dg = (o: string): Result => results.get(o)!.get('dialguard')!;
  const long = dg(OUTAGES[OUTAGES.length - 1]!.name);
  const measuredAfter = long.dials_per_minute_after;
  const policies: Record<string, Record<string, Result>> = {};
  for (const lane of LANES) {
    policies[lane] = {};
    for (const o of OUTAGES) policies[lane][o.name] = results.get(o.name)!.get(lane)!;
  }
  printJson('flap', {
    restart_failed_calls: dg('restart_0.3s').failed + dg('restart_1s').failed,
    restart_refused_after_back: dg('restart_0.3s').refused_after_back + dg('restart_1s').refused_after_back,
    recovery_ms: { outage_1s: dg('restart_1s').recovery_ms, restart_3s: dg('restart_3s').recovery_ms, outage_5s: dg('blackhole_5s').recovery_ms },
    restart_3s_refused_after_back: dg('restart_3s').refused_after_back,
    dead_dials: {
      first_minute: long.dials_first_minute,
      per_minute_after: measuredAfter ?? replayDeadMinutes(),
      per_minute_after_source: measuredAfter === null ? 'manual-clock replay, 10 min' : 'measured',
    },
    first_request_blackholed_ms: firstFetch,
    policies,
    quick,
  });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
