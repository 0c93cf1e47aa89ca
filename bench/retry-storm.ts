/**
 * bench/retry-storm: what a fleet of clients does to a sick server, simulated on a ManualClock
 * (no sockets, no real time), guarded against unguarded in the same run.
 *
 *   node dist/bench/retry-storm.js [--quick]
 *
 * 1. Dead server (seed 002): 200 clients, each sending 8 requests/s (1 600 dials/s fleet-wide
 *    when every request redials, the rate seed 002 observed), a dial failing after seed 002's 3 s
 *    DialTimeout. Guarded, each client has its own HostBreaker: 3 failed dials open it, the open
 *    window grows by proportionalJitter from 1 s to a 60 s cap (±50 %), one probe per window.
 *    Measured over the first minute (the trip) and over a minute once the window is at its cap.
 * 2. A server failing 50 % of calls: 200 clients × 5 calls/s for 60 s through the real retry()
 *    (3 attempts, idempotent, default jittered backoff), without a budget, with one process-wide
 *    RetryBudget (the default), and with a budget per client. Amplification = attempts / calls.
 * 3. Jitter: 200 clients failing at the same instant, and when each retries, with the default
 *    backoff and with an unjittered exponential one.
 *
 * Ends with one JSON line: {"bench":"retry-storm",...}.
 *
 * @module
 */
import { fileURLToPath } from 'node:url';
import { exponential, proportionalJitter, type Schedule } from '../src/core/backoff.js';
import { type DialPermit, HostBreaker } from '../src/guard/host-breaker.js';
import { RetryBudget } from '../src/retry/budget.js';
import { retry } from '../src/retry/retry.js';
import { ManualClock } from '../src/testing/manual-clock.js';
import { seededRandom as seeded } from '../src/testing/seeded-random.js';
import { quick } from './lib/args.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import { percentile } from './lib/timing.js';

const CLIENTS = quick ? 50 : 200;
const MINUTE = 60_000;
const HOST = 'sick-node:11211';


// ---------------------------------------------------------------------------------------------
// 1. Dead server: dials per client per minute, guarded by a HostBreaker vs unguarded.

interface Event {
  at: number;
  seq: number;
  client: number;
  permit?: DialPermit;
}

/** A binary min-heap of events by time (then insertion order). */
class Events {
  readonly #heap: Event[] = [];
  #seq = 0;
  push(at: number, client: number, permit?: DialPermit): void {
    const h = this.#heap;
    h.push({ at, seq: this.#seq++, client, ...(permit === undefined ? {} : { permit }) });
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!before(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }
  pop(): Event | undefined {
    const h = this.#heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    h[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
    return top;
  }
  peek(): Event | undefined {
    return this.#heap[0];
  }
}

function before(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

interface DeadServerResult {
  /** Dials in [from, from + 60 s), per client. */
  dialsInMinute: (from: number) => number[];
  refused: number;
}

const REQUESTS_PER_SEC = 8; // per client: 200 clients redialling per request = seed 002's ~1 600 dials/s
const DIAL_TIMEOUT = 3_000; // seed 002: vaccel's DialTimeout against an unresponsive node
const WARMUP = 3 * MINUTE; // the open window reaches its 60 s cap within ~90 s

function deadServer(guarded: boolean, duration: number): DeadServerResult {
  const clock = new ManualClock(0);
  const interval = 1_000 / REQUESTS_PER_SEC;
  const phase = seeded(1);
  const breakers = Array.from(
    { length: CLIENTS },
    (_, i) =>
      new HostBreaker({
        clock,
        failureThreshold: 3,
        openDuration: proportionalJitter({ base: 1_000, max: MINUTE }),
        probeTimeout: 10_000,
        random: seeded(1_000 + i),
      }),
  );
  const dialTimes: number[][] = Array.from({ length: CLIENTS }, () => []);
  let refused = 0;
  const events = new Events();
  for (let c = 0; c < CLIENTS; c++) events.push(phase() * interval, c);
  for (let ev = events.pop(); ev !== undefined && ev.at < duration; ev = events.pop()) {
    clock.advance(ev.at - clock.now());
    if (ev.permit !== undefined) {
      ev.permit.failed(); // the dial timed out: the server is dead
      continue;
    }
    events.push(ev.at + interval, ev.client); // the client's next request
    if (!guarded) {
      dialTimes[ev.client]!.push(ev.at);
      continue;
    }
    try {
      const permit = breakers[ev.client]!.admit(HOST);
      dialTimes[ev.client]!.push(ev.at);
      events.push(ev.at + DIAL_TIMEOUT, ev.client, permit);
    } catch {
      refused++; // HostUnavailableError: failed fast, no dial
    }
  }
  return {
    refused,
    dialsInMinute: (from) => dialTimes.map((ts) => ts.filter((t) => t >= from && t < from + MINUTE).length),
  };
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
}

// ---------------------------------------------------------------------------------------------
// 2. A server failing half its calls: retry amplification through retry().

type BudgetMode = 'none' | 'shared' | 'per-client';

interface AmplificationResult {
  calls: number;
  attempts: number;
  succeeded: number;
  budgetRefusals: number;
}

const CALLS_PER_SEC = 5; // per client
const SERVICE_MS = 20; // each attempt's time on the (failing) server
const FAILURE_RATE = 0.5;

async function halfFailing(mode: BudgetMode, duration: number): Promise<AmplificationResult> {
  const clock = new ManualClock(0);
  const serverRandom = seeded(7);
  const retryRandom = seeded(99);
  const phase = seeded(3);
  const shared = new RetryBudget({ clock });
  const perClient = mode === 'per-client' ? Array.from({ length: CLIENTS }, () => new RetryBudget({ clock })) : [];
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' });
  const r: AmplificationResult = { calls: 0, attempts: 0, succeeded: 0, budgetRefusals: 0 };
  const server = (): Promise<string> => {
    r.attempts++;
    return new Promise((resolve, reject) => {
      clock.setTimeout(() => (serverRandom() < FAILURE_RATE ? reject(reset) : resolve('ok')), SERVICE_MS);
    });
  };
  const interval = 1_000 / CALLS_PER_SEC;
  const call = (client: number): void => {
    if (clock.now() >= duration) return;
    r.calls++;
    const budget = mode === 'none' ? null : mode === 'shared' ? shared : perClient[client]!;
    retry(server, { clock, budget, idempotent: true, maxAttempts: 3, random: retryRandom }).then(
      () => r.succeeded++,
      (err: unknown) => {
        if ((err as { code?: unknown }).code === 'DIALGUARD_RETRY_BUDGET_EXHAUSTED') r.budgetRefusals++;
      },
    );
    clock.setTimeout(() => call(client), interval);
  };
  for (let c = 0; c < CLIENTS; c++) clock.setTimeout(() => call(c), phase() * interval);
  await clock.tick(duration + 30_000); // every call started before the end finishes its retries
  return r;
}

// ---------------------------------------------------------------------------------------------
// 3. Jitter: when do clients that failed at the same instant retry?

async function retryTimes(backoff: Schedule | undefined): Promise<number[]> {
  const clock = new ManualClock(0);
  const random = seeded(11);
  const times: number[] = [];
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
  for (let c = 0; c < CLIENTS; c++) {
    void retry(
      (a) => {
        if (a.number === 1) return Promise.reject(refused);
        times.push(clock.now());
        return 'ok';
      },
      { clock, budget: null, random, ...(backoff === undefined ? {} : { backoff }) },
    );
  }
  await clock.tick(MINUTE);
  return times.sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  progress(`dead server: ${CLIENTS} clients × ${REQUESTS_PER_SEC} requests/s, ${WARMUP / 1_000 + 60} s simulated`);
  const unguarded = deadServer(false, WARMUP + MINUTE);
  const guarded = deadServer(true, WARMUP + MINUTE);
  const rawFirst = mean(unguarded.dialsInMinute(0));
  const guardedFirst = mean(guarded.dialsInMinute(0));
  const rawSteady = mean(unguarded.dialsInMinute(WARMUP));
  const steadyPerClient = guarded.dialsInMinute(WARMUP);
  const guardedSteady = mean(steadyPerClient);

  progress(`server failing ${FAILURE_RATE * 100} % of calls: ${CLIENTS} clients × ${CALLS_PER_SEC} calls/s for 60 s, three budget modes`);
  const none = await halfFailing('none', MINUTE);
  const shared = await halfFailing('shared', MINUTE);
  const perClient = await halfFailing('per-client', MINUTE);
  const amp = (x: AmplificationResult): number => x.attempts / x.calls;

  progress(`jitter: ${CLIENTS} clients failing at the same instant`);
  const jittered = await retryTimes(undefined);
  const plain = await retryTimes(exponential({ base: 400, max: 10_000 })); // the default's base, unjittered
  const spread = (ts: readonly number[]): number => percentile(ts, 95) - percentile(ts, 5);
  const busiestMs = (ts: readonly number[]): number => {
    const buckets = new Map<number, number>();
    for (const t of ts) buckets.set(Math.floor(t), (buckets.get(Math.floor(t)) ?? 0) + 1);
    return Math.max(0, ...buckets.values());
  };

  printTable(`dead server, ${CLIENTS} clients, ${REQUESTS_PER_SEC} req/s each, dial timeout ${DIAL_TIMEOUT} ms (simulated)`, [
    {
      measure: 'dials per client, first minute',
      unguarded: rawFirst,
      guarded: guardedFirst,
      'guarded/unguarded': guardedFirst / rawFirst,
    },
    {
      measure: 'dials per client per minute, window at its 60 s cap',
      unguarded: rawSteady,
      guarded: guardedSteady,
      'guarded/unguarded': guardedSteady / rawSteady,
    },
    {
      measure: 'fleet-wide dials per second, at the cap',
      unguarded: (rawSteady * CLIENTS) / 60,
      guarded: (guardedSteady * CLIENTS) / 60,
      'guarded/unguarded': guardedSteady / rawSteady,
    },
    {
      measure: 'clients dialling 0 / 1 / 2+ times in that minute',
      unguarded: `0 / 0 / ${CLIENTS}`,
      guarded: `${steadyPerClient.filter((n) => n === 0).length} / ${steadyPerClient.filter((n) => n === 1).length} / ${steadyPerClient.filter((n) => n >= 2).length}`,
      'guarded/unguarded': '',
    },
  ]);
  printTable(`server failing ${FAILURE_RATE * 100} % of calls, ${CLIENTS} clients × ${CALLS_PER_SEC} calls/s, retry() with 3 attempts (simulated 60 s)`, [
    { budget: 'none', calls: none.calls, attempts: none.attempts, 'attempts/call': amp(none), 'calls succeeded': `${((100 * none.succeeded) / none.calls).toFixed(1)} %`, 'refused by budget': none.budgetRefusals },
    { budget: 'one per process (default)', calls: shared.calls, attempts: shared.attempts, 'attempts/call': amp(shared), 'calls succeeded': `${((100 * shared.succeeded) / shared.calls).toFixed(1)} %`, 'refused by budget': shared.budgetRefusals },
    { budget: 'one per client (its 10/s floor dominates)', calls: perClient.calls, attempts: perClient.attempts, 'attempts/call': amp(perClient), 'calls succeeded': `${((100 * perClient.succeeded) / perClient.calls).toFixed(1)} %`, 'refused by budget': perClient.budgetRefusals },
  ]);
  printTable(`first retry of ${CLIENTS} clients that failed at the same instant`, [
    { backoff: 'default: restartSpanningBackoff (400-600 ms)', 'p5 (ms)': percentile(jittered, 5), 'p95 (ms)': percentile(jittered, 95), 'spread p5-p95 (ms)': spread(jittered), 'most in one ms': busiestMs(jittered) },
    { backoff: 'exponential(base 400 ms), no jitter', 'p5 (ms)': percentile(plain, 5), 'p95 (ms)': percentile(plain, 95), 'spread p5-p95 (ms)': spread(plain), 'most in one ms': busiestMs(plain) },
  ]);
  process.stdout.write(
    '\n(the per-client row is the floor at work: a client making 5 calls/s may retry 10/s on its own, so a fleet of\n' +
      ' quiet processes is capped per process, not as a fleet; busy processes, or one budget shared by many callers,\n' +
      ' stay at 20 %.)\n',
  );
  printJson('retry-storm', {
    clients: CLIENTS,
    sim_seconds: 60,
    dials_per_client_per_min: round(guardedSteady),
    dials_per_client_first_min: round(guardedFirst),
    unguarded_dials_per_client_per_min: round(rawSteady),
    fleet_dials_per_s: { guarded: round((guardedSteady * CLIENTS) / 60), unguarded: round((rawSteady * CLIENTS) / 60) },
    retry_amplification: { with_budget: round(amp(shared)), without_budget: round(amp(none)), per_client_budget: round(amp(perClient)) },
    calls_succeeded: { with_budget: round(shared.succeeded / shared.calls), without_budget: round(none.succeeded / none.calls) },
    jitter_spread_ms: round(spread(jittered)),
    no_jitter_spread_ms: round(spread(plain)),
  });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`retry-storm bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
