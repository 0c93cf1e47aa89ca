/**
 * bench/scale: how the cost grows with the number of hosts and targets, in one run (issue 17).
 *
 *   npm run bench -- scale [--quick]     (re-runs itself with --expose-gc)
 *
 * - refusal: every host of the breaker open, refusals cycling through all of them, at 1, 100,
 *   1 000 and 4 096 hosts (the default capacity) and at 65 536 (capacity raised to match):
 *   `tryAdmit(host, port)`, the awaited `connect({ host, port })`, and `tryAdmit` of a URL
 *   spelling (`https://Host-N.example`, the memoised path). Goal: at most 1.3× from 1 to capacity.
 *   Next to them, the floor: a bare `Map.get` of as many keys (built once), which shows what the memory
 *   hierarchy alone adds when that many entries are cycled.
 * - admit: the same sizes, every host closed: `tryAdmit` then `succeeded()`.
 * - pool: `ConnectionPool.use()` on a warm connection at 1, 100, 1 000 and 10 000 targets, and in
 *   the same rounds its floor, an awaited call doing a bare `Map.get` of as many targets.
 * - memory, heap after GC: bytes per breaker entry (closed and open) and per pool target; the heap
 *   a default breaker (and the key memo) holds after a hostile stream of 1 M distinct hosts.
 * - waiters: 10 000 concurrent `use()` calls on one unreachable target (a loopback blackhole),
 *   connect timeout 1 s: when the last is released, the event-loop delay while they wait and are
 *   released (p99 and max), and the dials made.
 * - sweeps: admits at capacity while the breaker's idle sweep and eviction run, timed one by one
 *   (steady traffic, and every admit a new host); a warm `use()` at 10 000 targets while the
 *   pool's idle sweep runs. p99.99 and max of the per-position minimum over a few identical runs,
 *   and the most hosts one admit forgot (a full-table scan would be 4 096).
 *
 * Cost per call: the lowest of alternating rounds, each a median of batches (see `interleaved`).
 * A `*_growth` figure is the cost at the largest size over the cost at 1 (`*_growth_4096`: at the
 * default capacity); `*_growth_from_100` the same from the 100 column (the table's own growth,
 * apart from what one always-hot entry makes of the 1 column; every size runs the same code, no
 * "same as last call" shortcut); `*_growth_vs_map` is that growth net of its floor's in the same run (the
 * ns a bare Map.get gained subtracted), so what our code adds shows apart from what the
 * machine's caches add to any lookup. Prints tables and one JSON line `{"bench":"scale",...}`; exits 1 only when a
 * counted goal fails (dials, settlements, hosts kept, hosts forgotten in one call), never on
 * timing alone: the figures move with the machine's load.
 */
import { spawnSync } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { openSocket } from '../src/guard/connect.js';
import { hostKeyMemoStats } from '../src/guard/host-key.js';
import { ConnectionPool, type Connector, HostBreaker, connect } from '../src/index.js';
import { ManualClock, blackhole } from '../src/testing/index.js';
import { quick } from './lib/args.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import { percentile, perCallMicros, perCallMicrosSync } from './lib/timing.js';

if (typeof globalThis.gc !== 'function') {
  // Bytes per entry are only meaningful after a full GC: re-run with it exposed.
  const r = spawnSync(process.execPath, ['--expose-gc', ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const gc = globalThis.gc as () => void;

const HOST_SIZES = [1, 100, 1_000, 4_096, 65_536] as const;
const TARGET_SIZES = [1, 100, 1_000, 10_000] as const;
const ROUNDS = quick ? 3 : 9;
const SYNC_BATCHES = quick ? 10 : 30;
const ASYNC_BATCHES = quick ? 5 : 20;
const HOSTILE = quick ? 200_000 : 1_000_000;
const WAITERS = 10_000;
const CONNECT_TIMEOUT = 1_000;
const PORT = 11_211;
const LONG = 2 ** 31 - 1; // an open window that outlasts the run

/**
 * The i-th host: a distinct IPv4 address, spelled as a client would (already its own key). In
 * 127.0.0.0/8 (distinct up to 2^24 hosts): the refusal lanes never dial, but should a host not be
 * open, a dial would stay on loopback.
 */
function ip(i: number): string {
  return `127.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

function heap(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

interface Sized {
  n: number;
  breaker: HostBreaker;
  hosts: string[];
}

/** A breaker holding `n` hosts (capacity max(n, 4096)), all open when `open`. */
function breakerOf(n: number, open: boolean): Sized {
  const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: LONG, probeTimeout: LONG, capacity: Math.max(n, 4_096) });
  const hosts = Array.from({ length: n }, (_, i) => ip(i));
  for (const h of hosts) {
    const permit = breaker.admit(h, PORT);
    if (open) permit.failed();
    else permit.succeeded();
  }
  if (open) for (const h of hosts) breaker.tryAdmit(h, PORT); // each makes its refusal now, not while timed
  return { n, breaker, hosts };
}

/**
 * `measure(size)` (a median of batches) in `ROUNDS` alternating rounds; per size, the lowest
 * round. On a machine shared with other work a neighbour only ever adds time, so the lowest round
 * is the steadiest estimate of the code's own cost, and the rounds alternate so that what drift
 * remains falls on every size alike.
 */
async function interleaved<S extends { n: number }>(sizes: readonly S[], measure: (s: S) => number | Promise<number>): Promise<Map<number, number>> {
  const samples = new Map<number, number[]>(sizes.map((s) => [s.n, []]));
  for (let r = 0; r < ROUNDS; r++) for (const s of sizes) samples.get(s.n)!.push(await measure(s));
  return new Map([...samples].map(([n, v]) => [n, Math.min(...v)]));
}

function cycling<T>(list: readonly T[]): () => T {
  let i = 0;
  return () => {
    const v = list[i]!;
    i = i + 1 === list.length ? 0 : i + 1;
    return v;
  };
}

/**
 * Refusal costs. Each measure builds its own tables and drops them before the next, so that one
 * measure's heap does not crowd another's caches (the sizes of one measure are alive together,
 * for the alternating rounds).
 */
async function refusals(): Promise<{ tryAdmit: Map<number, number>; connect: Map<number, number>; url: Map<number, number>; floor: Map<number, number> }> {
  progress(`refusal: ${HOST_SIZES.join(', ')} open hosts`);
  let sized: Sized[] | undefined = HOST_SIZES.map((n) => breakerOf(n, true));
  for (const s of sized) {
    const refused = s.breaker.tryAdmit(s.hosts[0]!, PORT);
    if (!(refused instanceof Error)) throw new Error('setup: a host was not open');
  }
  const tryAdmit = await interleaved(sized, (s) => {
    const next = cycling(s.hosts);
    return perCallMicrosSync(() => s.breaker.tryAdmit(next(), PORT), SYNC_BATCHES) * 1_000;
  });
  const connectNs = await interleaved(sized, async (s) => {
    const next = cycling(s.hosts.map((host) => ({ host, port: PORT })));
    const options = { breaker: s.breaker, timeout: 1_000 };
    return (await perCallMicros(() => connect(next(), options), ASYNC_BATCHES)) * 1_000;
  });
  sized = undefined;
  gc();
  // The floor: a bare Map of as many host:port keys and small objects, cycled through the same
  // way. The keys are built once, as hostKey now builds a warm host's key once: the floor is the
  // lookup alone, what the memory hierarchy charges for that many entries.
  let floorSized: Array<{ n: number; keys: string[]; map: Map<string, { h: string; hits: number }> }> | undefined = HOST_SIZES.map((n) => {
    const keys = Array.from({ length: n }, (_, i) => `${ip(i)}:${PORT}`);
    return { n, keys, map: new Map(keys.map((h) => [h, { h, hits: 0 }])) };
  });
  const floor = await interleaved(floorSized, (s) => {
    const next = cycling(s.keys);
    return perCallMicrosSync(() => s.map.get(next())!.hits++, SYNC_BATCHES) * 1_000;
  });
  floorSized = undefined;
  gc();
  // URL spellings (the memoised path): their own breakers, every host open.
  const urlSized = HOST_SIZES.map((n) => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: LONG, probeTimeout: LONG, capacity: Math.max(n, 4_096) });
    const urls = Array.from({ length: n }, (_, i) => `https://Host-${i}.example`);
    for (const u of urls) breaker.admit(u).failed();
    for (const u of urls) breaker.tryAdmit(u);
    return { n, breaker, urls };
  });
  const url = await interleaved(urlSized, (s) => {
    const next = cycling(s.urls);
    return perCallMicrosSync(() => s.breaker.tryAdmit(next()), SYNC_BATCHES) * 1_000;
  });
  return { tryAdmit, connect: connectNs, url, floor };
}

async function admits(): Promise<Map<number, number>> {
  progress(`healthy admit: ${HOST_SIZES.join(', ')} closed hosts`);
  const sized = HOST_SIZES.map((n) => breakerOf(n, false));
  return interleaved(sized, (s) => {
    const next = cycling(s.hosts);
    return (
      perCallMicrosSync(() => {
        const permit = s.breaker.tryAdmit(next(), PORT);
        if (permit instanceof Error) throw permit;
        permit.succeeded();
      }, SYNC_BATCHES) * 1_000
    );
  });
}

/** An in-memory connector: every connect succeeds at once with a small object. */
const memoryConnector: Connector<{ target: string }> = {
  connect: (target) => Promise.resolve({ target }),
  close: () => {},
};

async function warmPool(n: number): Promise<{ n: number; pool: ConnectionPool<{ target: string }>; targets: string[] }> {
  const pool = new ConnectionPool({ connector: memoryConnector, breaker: new HostBreaker({ capacity: Math.max(n, 4_096) }) });
  const targets = Array.from({ length: n }, (_, i) => `${ip(i)}:${PORT}`);
  for (const t of targets) await pool.use(t, async () => undefined);
  return { n, pool, targets };
}

/**
 * Warm `use()` at each target count, and beside it, in the same alternating rounds, the floor: an
 * awaited call that does a bare `Map.get` of as many `host:port` targets (and a write to what it
 * finds), timed by the same harness. It shows what the memory hierarchy alone adds when that many
 * targets are cycled by awaited calls, whose garbage streams through the caches between two
 * visits of a target (a synchronous loop keeps 10 000 small entries in cache and would hide that).
 */
async function poolUse(): Promise<{ use: Map<number, number>; floor: Map<number, number> }> {
  progress(`pool use() on a warm connection: ${TARGET_SIZES.join(', ')} targets`);
  const pools = await Promise.all(TARGET_SIZES.map((n) => warmPool(n)));
  const fn = async (): Promise<number> => 1;
  const floors = TARGET_SIZES.map((n) => {
    const targets = Array.from({ length: n }, (_, i) => `${ip(i)}:${PORT}`);
    return { n, targets, map: new Map(targets.map((t) => [t, { t, hits: 0 }])) };
  });
  const use = new Map<number, number[]>(TARGET_SIZES.map((n) => [n, []]));
  const floor = new Map<number, number[]>(TARGET_SIZES.map((n) => [n, []]));
  // One size's pool and its floor measured back to back, every size in each round: drift falls
  // on the pair alike. Per size, the lowest round of each (see `interleaved`).
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < TARGET_SIZES.length; k++) {
      const p = pools[k]!;
      const f = floors[k]!;
      const nextTarget = cycling(p.targets);
      use.get(p.n)!.push((await perCallMicros(() => p.pool.use(nextTarget(), fn), ASYNC_BATCHES)) * 1_000);
      const nextKey = cycling(f.targets);
      const lookup = async (): Promise<number> => f.map.get(nextKey())!.hits++;
      floor.get(f.n)!.push((await perCallMicros(lookup, ASYNC_BATCHES)) * 1_000);
    }
  }
  for (const p of pools) {
    if (p.pool.stats().opened !== p.n) throw new Error(`pool of ${p.n} targets opened ${p.pool.stats().opened} connections`);
    await p.pool.close();
  }
  const lowest = (m: Map<number, number[]>): Map<number, number> => new Map([...m].map(([n, v]) => [n, Math.min(...v)]));
  return { use: lowest(use), floor: lowest(floor) };
}

async function memory(): Promise<{ closed: number; open: number; target: number; hostileMb: number; hostileUrlMb: number; hostileHosts: number; memo: number; portKeys: number }> {
  const N = 65_536;
  progress(`memory: ${N} breaker hosts, 10 000 pool targets, ${HOSTILE} hostile hosts`);
  const hosts = Array.from({ length: N }, (_, i) => ip(i)); // the caller's strings: not counted
  let base = heap();
  const closed = new HostBreaker({ capacity: N });
  for (const h of hosts) closed.admit(h, PORT).succeeded();
  const closedBytes = (heap() - base) / N;
  base = heap();
  const open = new HostBreaker({ capacity: N, failureThreshold: 1, minOutage: 0, openDuration: LONG });
  for (const h of hosts) open.admit(h, PORT).failed();
  for (const h of hosts) open.tryAdmit(h, PORT); // each open host now holds its refusal
  const openBytes = (heap() - base) / N;

  const T = 10_000;
  const targets = hosts.slice(0, T).map((h) => `${h}:${PORT}`);
  base = heap();
  const pool = new ConnectionPool({ connector: memoryConnector, breaker: null });
  for (const t of targets) await pool.use(t, async () => undefined);
  const targetBytes = (heap() - base) / T;
  await pool.close();

  // The hostile stream: distinct hosts the caller builds and drops (their own strings are garbage).
  base = heap();
  const hostile = new HostBreaker();
  for (let i = 0; i < HOSTILE; i++) {
    const p = hostile.tryAdmit(`${ip(i)}`, PORT);
    if (!(p instanceof Error)) p.succeeded();
  }
  const hostileMb = (heap() - base) / 2 ** 20;
  const hostileHosts = hostile.stats().hosts;
  base = heap();
  const hostileUrl = new HostBreaker();
  for (let i = 0; i < HOSTILE; i++) {
    const p = hostileUrl.tryAdmit(`https://Hostile-${i}.example/`);
    if (!(p instanceof Error)) p.succeeded();
  }
  const hostileUrlMb = (heap() - base) / 2 ** 20;
  void [closed, open, hostile, hostileUrl]; // alive until measured
  const keys = hostKeyMemoStats();
  return { closed: closedBytes, open: openBytes, target: targetBytes, hostileMb, hostileUrlMb, hostileHosts, memo: keys.entries, portKeys: keys.portKeys };
}

async function waiters(): Promise<{ releaseMs: number; enqueueMs: number; burstMs: number; dials: number; p99: number; max: number; settled: number; typed: number }> {
  progress(`waiters: ${WAITERS} concurrent use() calls on one blackholed target, connect timeout ${CONNECT_TIMEOUT} ms`);
  await using peer = await blackhole();
  const breaker = new HostBreaker();
  const pool = new ConnectionPool<import('node:net').Socket>({
    connector: {
      connect: (target, ctx) => {
        const i = target.lastIndexOf(':');
        return openSocket({ host: target.slice(0, i), port: Number(target.slice(i + 1)) }, {}, ctx);
      },
      close: (s) => void s.destroy(),
    },
    breaker,
    connectTimeout: CONNECT_TIMEOUT,
  });
  const target = peer.address;
  const delay = monitorEventLoopDelay({ resolution: 1 });
  let settled = 0;
  let typed = 0;
  let first = 0;
  let last = 0;
  const t0 = performance.now();
  const calls = Array.from({ length: WAITERS }, () =>
    pool.use(target, async () => undefined).then(
      () => {
        settled++;
      },
      (err: unknown) => {
        settled++;
        if (err instanceof Error && (err as { code?: string }).code === 'DIALGUARD_CONNECT_TIMEOUT') typed++;
        last = performance.now();
        first ||= last;
      },
    ),
  );
  const enqueueMs = performance.now() - t0; // the caller's own loop, one tick: not the pool's release
  delay.enable();
  await Promise.all(calls);
  delay.disable();
  await pool.close();
  const s = breaker.stats();
  return {
    releaseMs: last - t0,
    enqueueMs,
    burstMs: last - first,
    dials: s.succeeded + s.failed + s.abandoned,
    p99: delay.percentile(99) / 1e6,
    max: delay.max / 1e6,
    settled,
    typed,
  };
}

/**
 * Per-call cost of the same deterministic sequence run `repeats` times: the minimum per position.
 * A slow path (a scan at call k) shows in every repeat at the same place; a preemption by a
 * neighbour's process or a GC lands at a random place and drops out.
 */
async function perPositionMin(repeats: number, run: (time: (i: number, ns: number) => void) => Promise<void> | void): Promise<number[]> {
  let best: number[] = [];
  for (let r = 0; r < repeats; r++) {
    gc();
    const ns: number[] = [];
    await run((i, t) => {
      ns[i] = t;
    });
    best = r === 0 ? ns : best.map((b, i) => Math.min(b, ns[i]!));
  }
  return best;
}

/**
 * Admits at capacity (4 096) while the idle sweep and capacity eviction run (manual clock, 1 ms per
 * 16 admits, idleRetention 1 s, sweepInterval 100 ms), timed one by one: p99.99 and max of the
 * per-position minimum over repeats, and the most hosts one admit forgot.
 * - `steady`: traffic over a window of 4 096 hosts that slides by one host every 64 admits, so
 *   hosts keep going idle and being swept, and one admit in 64 is a new host.
 * - `churn`: every admit a host the table has never seen (a hostile stream at capacity).
 */
async function sweep(kind: 'steady' | 'churn'): Promise<{ p9999: number; max: number; maxEvicted: number; admits: number }> {
  const CAP = 4_096;
  const ADMITS = quick ? 32_768 : 131_072;
  progress(`sweep (${kind}): capacity ${CAP}, ${ADMITS} admits`);
  const hostAt = kind === 'churn' ? (k: number) => ip(k) : (k: number) => ip((k >> 6) + ((k * 61) % CAP));
  let maxEvicted = 0;
  const best = await perPositionMin(quick ? 3 : 5, (time) => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ capacity: CAP, idleRetention: 1_000, sweepInterval: 100, clock });
    for (let k = 0; k < CAP; k++) breaker.admit(hostAt(k), PORT).succeeded(); // at capacity
    let evicted = 0;
    for (let k = 0; k < ADMITS; k++) {
      const host = hostAt(CAP + k);
      const t0 = process.hrtime.bigint();
      const p = breaker.tryAdmit(host, PORT);
      time(k, Number(process.hrtime.bigint() - t0));
      if (!(p instanceof Error)) p.succeeded();
      const { evictedIdle, evictedCapacity } = breaker.stats();
      maxEvicted = Math.max(maxEvicted, evictedIdle + evictedCapacity - evicted);
      evicted = evictedIdle + evictedCapacity;
      if ((k & 15) === 0) clock.advance(1);
    }
  });
  return { p9999: percentile(best, 99.99) / 1_000, max: best.reduce((a, b) => Math.max(a, b), 0) / 1_000, maxEvicted, admits: best.length };
}

/** The pool's idle sweep at 10 000 targets (none idle): p99.99 of one warm use() while sweeps run. */
async function poolSweep(): Promise<{ p9999: number; max: number; calls: number }> {
  const T = 10_000;
  const CYCLES = quick ? 2 : 6;
  progress(`pool sweep: ${T} targets, a sweep due every 1 000 calls`);
  const targets = Array.from({ length: T }, (_, i) => `${ip(i)}:${PORT}`);
  const fn = async (): Promise<number> => 1;
  const best = await perPositionMin(quick ? 3 : 5, async (time) => {
    const clock = new ManualClock();
    const pool = new ConnectionPool({ connector: memoryConnector, breaker: null, clock, sweepInterval: 100, idleTimeout: LONG });
    for (const t of targets) await pool.use(t, async () => undefined);
    let k = 0;
    for (let c = 0; c < CYCLES; c++) {
      for (let i = 0; i < T; i++) {
        if (i % 10 === 0) clock.advance(1);
        const t0 = process.hrtime.bigint();
        await pool.use(targets[i]!, fn);
        time(k++, Number(process.hrtime.bigint() - t0));
      }
    }
    await pool.close();
  });
  return { p9999: percentile(best, 99.99) / 1_000, max: best.reduce((a, b) => Math.max(a, b), 0) / 1_000, calls: best.length };
}

function growth(m: Map<number, number>, largest: number): number {
  return m.get(largest)! / m.get(1)!;
}

/**
 * The growth of `m` net of its floor's: the cost at `largest`, less the ns the bare Map.get itself
 * added from 1 to `largest` in the same run, over the cost at 1. What our own code adds as the
 * count grows: 1 = nothing beyond what the caches add to any lookup. (A ratio of the two growths
 * would mislead: the floor's few ns at 1 make its growth large whatever our code does.)
 */
/**
 * The cost at `largest` over the cost at 100: the growth of the table alone, for a reader who
 * wants it apart from whatever a single host's caches (one entry, one key, always hot) make of
 * the 1-host column. Every size runs the same code path: there is no "same as last call" shortcut.
 */
function growthFrom100(m: Map<number, number>, largest: number): number {
  return m.get(largest)! / m.get(100)!;
}

function netGrowth(m: Map<number, number>, floor: Map<number, number>, largest: number): number {
  return (m.get(largest)! - (floor.get(largest)! - floor.get(1)!)) / m.get(1)!;
}

async function main(): Promise<void> {
  const refusal = await refusals();
  gc();
  const admit = await admits();
  gc();
  const { use: pool, floor: targetFloor } = await poolUse();
  gc();
  const mem = await memory();
  const sw = await sweep('steady');
  const churn = await sweep('churn');
  const poolSw = await poolSweep();
  const wait = await waiters();

  const big = HOST_SIZES[HOST_SIZES.length - 1]!;
  const cell = (m: Map<number, number>, n: number): number | string => m.get(n) ?? '';
  const sizes = [...new Set<number>([...HOST_SIZES, ...TARGET_SIZES])].sort((x, y) => x - y);
  printTable('cost per call, ns (lowest of alternating rounds); growth = largest size / 1', [
    ...sizes.map((n) => ({
      'hosts or targets': n,
      'tryAdmit refusal': cell(refusal.tryAdmit, n),
      'floor: bare Map.get': cell(refusal.floor, n),
      'connect() refusal': cell(refusal.connect, n),
      'tryAdmit refusal, URL spelling': cell(refusal.url, n),
      'admit + succeeded': cell(admit, n),
      'pool use(), warm': cell(pool, n),
      'floor: awaited Map.get, targets': cell(targetFloor, n),
    })),
    {
      'hosts or targets': 'growth',
      'tryAdmit refusal': growth(refusal.tryAdmit, big),
      'floor: bare Map.get': growth(refusal.floor, big),
      'connect() refusal': growth(refusal.connect, big),
      'tryAdmit refusal, URL spelling': growth(refusal.url, big),
      'admit + succeeded': growth(admit, big),
      'pool use(), warm': growth(pool, 10_000),
      'floor: awaited Map.get, targets': growth(targetFloor, 10_000),
    },
    {
      'hosts or targets': 'growth from 100',
      'tryAdmit refusal': growthFrom100(refusal.tryAdmit, big),
      'floor: bare Map.get': growthFrom100(refusal.floor, big),
      'connect() refusal': growthFrom100(refusal.connect, big),
      'tryAdmit refusal, URL spelling': growthFrom100(refusal.url, big),
      'admit + succeeded': growthFrom100(admit, big),
      'pool use(), warm': growthFrom100(pool, 10_000),
      'floor: awaited Map.get, targets': growthFrom100(targetFloor, 10_000),
    },
    {
      'hosts or targets': 'growth net of floor',
      'tryAdmit refusal': netGrowth(refusal.tryAdmit, refusal.floor, big),
      'floor: bare Map.get': 1,
      'connect() refusal': netGrowth(refusal.connect, refusal.floor, big),
      'tryAdmit refusal, URL spelling': netGrowth(refusal.url, refusal.floor, big),
      'admit + succeeded': netGrowth(admit, refusal.floor, big),
      'pool use(), warm': netGrowth(pool, targetFloor, 10_000),
      'floor: awaited Map.get, targets': 1,
    },
  ]);
  printTable('memory (heap after GC)', [
    { measure: 'bytes per breaker host, closed', value: mem.closed },
    { measure: 'bytes per breaker host, open (holds its refusal)', value: mem.open },
    { measure: 'bytes per pool target (warm, in-memory connection)', value: mem.target },
    { measure: `MB after ${HOSTILE} distinct hosts (IPs; ${mem.hostileHosts} kept; ${mem.portKeys} host:port keys memoised)`, value: mem.hostileMb },
    { measure: `MB after ${HOSTILE} distinct hosts (URL spellings; key memo ${mem.memo} entries)`, value: mem.hostileUrlMb },
  ]);
  printTable('waiters and sweeps', [
    { measure: `${WAITERS} waiters on one blackholed target: last released (ms; timeout ${CONNECT_TIMEOUT})`, value: wait.releaseMs },
    { measure: '  dials', value: wait.dials },
    { measure: '  queuing the 10 000 calls, one tick (ms)', value: wait.enqueueMs },
    { measure: '  first to last release (ms)', value: wait.burstMs },
    { measure: '  settled / with ConnectTimeoutError', value: `${wait.settled} / ${wait.typed}` },
    { measure: '  event-loop delay p99 (ms)', value: wait.p99 },
    { measure: '  event-loop delay max (ms)', value: wait.max },
    { measure: `admit p99.99 while sweeps run, capacity 4 096, steady (µs; ${sw.admits} admits)`, value: sw.p9999 },
    { measure: '  max (µs)', value: sw.max },
    { measure: '  most hosts one admit forgot', value: sw.maxEvicted },
    { measure: `admit p99.99, every admit a new host at capacity (µs; ${churn.admits} admits)`, value: churn.p9999 },
    { measure: '  max (µs)', value: churn.max },
    { measure: '  most hosts one admit forgot', value: churn.maxEvicted },
    { measure: `pool use() p99.99 while sweeps run, 10 000 targets (µs; ${poolSw.calls} calls)`, value: poolSw.p9999 },
    { measure: '  max (µs)', value: poolSw.max },
  ]);

  const failures: string[] = [];
  if (wait.dials !== 1) failures.push(`waiters: ${wait.dials} dials, want 1`);
  if (wait.settled !== WAITERS || wait.typed !== WAITERS) failures.push(`waiters: ${wait.settled} settled, ${wait.typed} typed, want ${WAITERS}`);
  for (const [k, v] of [['steady', sw], ['churn', churn]] as const) {
    if (v.maxEvicted > 64) failures.push(`sweep (${k}): one admit forgot ${v.maxEvicted} hosts, want at most 64`);
  }
  if (mem.hostileHosts > 4_096) failures.push(`hostile: ${mem.hostileHosts} hosts kept, capacity 4096`);
  for (const f of failures) process.stderr.write(`scale: ${f}\n`);

  const byHosts = (m: Map<number, number>): Record<string, number> => Object.fromEntries([...m].map(([n, v]) => [`h${n}`, round(v)]));
  printJson('scale', {
    quick,
    refusal_ns: byHosts(refusal.tryAdmit),
    connect_refusal_ns: byHosts(refusal.connect),
    url_refusal_ns: byHosts(refusal.url),
    admit_ns: byHosts(admit),
    pool_use_ns: Object.fromEntries([...pool].map(([n, v]) => [`t${n}`, round(v)])),
    refusal_growth: round(growth(refusal.tryAdmit, big)),
    refusal_growth_4096: round(growth(refusal.tryAdmit, 4_096)),
    floor_map_get_ns: byHosts(refusal.floor),
    floor_growth: round(growth(refusal.floor, big)),
    connect_refusal_growth: round(growth(refusal.connect, big)),
    connect_refusal_growth_4096: round(growth(refusal.connect, 4_096)),
    url_refusal_growth: round(growth(refusal.url, big)),
    admit_growth: round(growth(admit, big)),
    admit_growth_4096: round(growth(admit, 4_096)),
    pool_use_growth: round(growth(pool, 10_000)),
    // The same growths from the 100-host (100-target) column: the table's own cost as it grows.
    refusal_growth_from_100: round(growthFrom100(refusal.tryAdmit, big)),
    connect_refusal_growth_from_100: round(growthFrom100(refusal.connect, big)),
    url_refusal_growth_from_100: round(growthFrom100(refusal.url, big)),
    admit_growth_from_100: round(growthFrom100(admit, big)),
    pool_use_growth_from_100: round(growthFrom100(pool, 10_000)),
    floor_growth_from_100: round(growthFrom100(refusal.floor, big)),
    floor_map_get_target_ns: Object.fromEntries([...targetFloor].map(([n, v]) => [`t${n}`, round(v)])),
    floor_target_growth: round(growth(targetFloor, 10_000)),
    // Each growth net of its floor's in this run (see netGrowth): what OUR code adds as the count
    // grows, 1 = no more than the caches add to a bare Map.get.
    refusal_growth_vs_map: round(netGrowth(refusal.tryAdmit, refusal.floor, big)),
    connect_refusal_growth_vs_map: round(netGrowth(refusal.connect, refusal.floor, big)),
    admit_growth_vs_map: round(netGrowth(admit, refusal.floor, big)),
    pool_use_growth_vs_map: round(netGrowth(pool, targetFloor, 10_000)),
    bytes_per_host: round(mem.open),
    bytes_per_host_closed: round(mem.closed),
    bytes_per_target: round(mem.target),
    hostile_hosts: HOSTILE,
    hostile_heap_mb: round(mem.hostileMb),
    hostile_url_heap_mb: round(mem.hostileUrlMb),
    key_memo_entries: mem.memo,
    key_memo_port_keys: mem.portKeys,
    waiters_10k_release_ms: round(wait.releaseMs),
    waiters_10k_dials: wait.dials,
    waiters_10k_enqueue_ms: round(wait.enqueueMs),
    waiters_10k_release_burst_ms: round(wait.burstMs),
    loop_delay_p99_ms: round(wait.p99),
    loop_delay_max_ms: round(wait.max),
    sweep_admit_p9999_us: round(sw.p9999),
    sweep_admit_max_us: round(sw.max),
    sweep_max_forgotten_per_call: sw.maxEvicted,
    churn_admit_p9999_us: round(churn.p9999),
    churn_admit_max_us: round(churn.max),
    churn_max_forgotten_per_call: churn.maxEvicted,
    pool_sweep_use_p9999_us: round(poolSw.p9999),
    pool_sweep_use_max_us: round(poolSw.max),
  });
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`scale bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
