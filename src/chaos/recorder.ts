/**
 * What a chaos lane records: every call (when it started, how long it took, how it ended, how
 * many times it settled), dials to the faulty host, and the breaker's state changes; and how that
 * becomes time series and a summary.
 *
 * @module
 */

/** One time bucket of a lane's series. */
export interface Bucket {
  /** Bucket start, seconds from the scenario's start. */
  t: number;
  /** Calls that ended in this bucket, per second. */
  callsPerS: number;
  /** Failed calls that ended in this bucket, per second. */
  errorsPerS: number;
  /** Latency percentiles of the calls that ended in this bucket, ms (NaN when none ended). */
  p50: number;
  p99: number;
  /** Dials to the faulty host in this bucket, per second. */
  dialsPerS: number;
}

/** A lane's summary, the figures the JSON line and the README carry. */
export interface LaneSummary {
  calls: number;
  failed_calls: number;
  retries: number;
  /** p50/p99 of calls that started while the fault was on, ms. */
  p50_ms_during_fault: number;
  p99_ms_during_fault: number;
  dials_to_dead_host_per_s: number;
  connections_opened: number;
  /** Calls that never settled, and calls that settled more than once: both must be 0. */
  lost_calls: number;
  double_settled: number;
}

/** A lane's full result. */
export interface LaneResult {
  series: Bucket[];
  /** Intervals (seconds) during which the breaker held the faulty host open. */
  breakerOpen: Array<[number, number]>;
  summary: LaneSummary;
}

/** A sampled latency reservoir: bounded memory however many calls a bucket sees. */
class Reservoir {
  readonly #values: number[] = [];
  #seen = 0;
  constructor(readonly size: number) {}
  add(v: number): void {
    this.#seen++;
    if (this.#values.length < this.size) this.#values.push(v);
    else {
      const i = Math.floor(Math.random() * this.#seen);
      if (i < this.size) this.#values[i] = v;
    }
  }
  values(): number[] {
    return this.#values;
  }
}

/** The p-th percentile (0-100) of `values`, nearest rank; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface BucketAcc {
  calls: number;
  errors: number;
  dials: number;
  latencies: Reservoir;
}

/** Records one lane. Time is `now()` in ms; `start` is the scenario's origin. */
export class LaneRecorder {
  readonly #bucketMs: number;
  readonly #start: number;
  readonly #now: () => number;
  readonly #buckets: BucketAcc[] = [];
  readonly #faultLatencies = new Reservoir(20_000);
  readonly #settles = new Map<number, number>();
  readonly #openSince: number[] = [];
  readonly #breakerOpen: Array<[number, number]> = [];
  #nextId = 0;
  #calls = 0;
  #failed = 0;
  retries = 0;
  connectionsOpened = 0;
  #faultDials = 0;
  #lostElsewhere = 0;
  #doubleElsewhere = 0;
  /** The fault window, seconds from start (set by the scenario). */
  fault: [number, number] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];

  constructor(start: number, bucketMs = 500, now: () => number = () => performance.now()) {
    this.#start = start;
    this.#bucketMs = bucketMs;
    this.#now = now;
  }

  #bucket(ms: number): BucketAcc {
    const i = Math.max(0, Math.floor((ms - this.#start) / this.#bucketMs));
    while (this.#buckets.length <= i) this.#buckets.push({ calls: 0, errors: 0, dials: 0, latencies: new Reservoir(500) });
    return this.#buckets[i]!;
  }

  /** Seconds since the scenario started. */
  elapsed(): number {
    return (this.#now() - this.#start) / 1_000;
  }

  /** Starts tracking one call; settle it with the returned function (every call to it is counted). */
  begin(): (ok: boolean) => void {
    const id = this.#nextId++;
    const started = this.#now();
    this.#settles.set(id, 0);
    return (ok) => {
      const n = (this.#settles.get(id) ?? 0) + 1;
      this.#settles.set(id, n);
      if (n === 1) this.record(started, this.#now(), ok);
    };
  }

  /** Records a call that ran elsewhere (another process), in this recorder's time base. */
  record(started: number, ended: number, ok: boolean): void {
    const latency = ended - started;
    const b = this.#bucket(ended);
    b.calls++;
    b.latencies.add(latency);
    this.#calls++;
    if (!ok) {
      b.errors++;
      this.#failed++;
    }
    const s = (started - this.#start) / 1_000;
    if (s >= this.fault[0] && s < this.fault[1]) this.#faultLatencies.add(latency);
  }

  /** Adds what another process counted as lost or double-settled calls. */
  settledElsewhere(lost: number, double: number): void {
    this.#lostElsewhere += lost;
    this.#doubleElsewhere += double;
  }

  /** Counts one dial to the faulty host, at `at` (default now). */
  dial(at: number = this.#now()): void {
    this.#bucket(at).dials++;
    const s = (at - this.#start) / 1_000;
    if (s >= this.fault[0] && s < this.fault[1]) this.#faultDials++;
  }

  /** The breaker opened (`open`) or closed for the faulty host, at `at` (default now). */
  breaker(open: boolean, at: number = this.#now()): void {
    const s = (at - this.#start) / 1_000;
    if (open) {
      if (this.#openSince.length === 0) this.#openSince.push(s);
    } else {
      const since = this.#openSince.pop();
      if (since !== undefined) this.#breakerOpen.push([since, s]);
    }
  }

  /** Calls started and not yet settled. */
  get inFlight(): number {
    let n = 0;
    for (const v of this.#settles.values()) if (v === 0) n++;
    return n;
  }

  /** Calls completed so far, and the p99 of the last `windowS` seconds (for the live view). */
  live(windowS = 2): { calls: number; callsPerS: number; p99: number } {
    const last = Math.floor((this.#now() - this.#start) / this.#bucketMs);
    const n = Math.max(1, Math.round((windowS * 1_000) / this.#bucketMs));
    const recent = this.#buckets.slice(Math.max(0, last - n), last);
    const calls = recent.reduce((a, b) => a + b.calls, 0);
    return {
      calls: this.#calls,
      callsPerS: calls / ((recent.length * this.#bucketMs) / 1_000 || 1),
      p99: percentile(recent.flatMap((b) => b.latencies.values()), 99),
    };
  }

  /** The series and summary; `until` (seconds) closes an open breaker band. */
  result(until: number): LaneResult {
    const per = 1_000 / this.#bucketMs;
    const series = this.#buckets.map((b, i) => ({
      t: (i * this.#bucketMs) / 1_000,
      callsPerS: b.calls * per,
      errorsPerS: b.errors * per,
      p50: percentile(b.latencies.values(), 50),
      p99: percentile(b.latencies.values(), 99),
      dialsPerS: b.dials * per,
    }));
    const bands = [...this.#breakerOpen];
    for (const since of this.#openSince) bands.push([since, until]);
    let lost = this.#lostElsewhere;
    let double = this.#doubleElsewhere;
    for (const v of this.#settles.values()) {
      if (v === 0) lost++;
      if (v > 1) double++;
    }
    const faultSeconds = Math.max(1e-9, Math.min(this.fault[1], until) - this.fault[0]);
    const faultLatencies = this.#faultLatencies.values();
    return {
      series,
      breakerOpen: bands,
      summary: {
        calls: this.#calls,
        failed_calls: this.#failed,
        retries: this.retries,
        p50_ms_during_fault: round(percentile(faultLatencies, 50)),
        p99_ms_during_fault: round(percentile(faultLatencies, 99)),
        dials_to_dead_host_per_s: round(this.#faultDials / faultSeconds),
        connections_opened: this.connectionsOpened,
        lost_calls: lost,
        double_settled: double,
      },
    };
  }
}

function round(n: number): number {
  return Number.isFinite(n) ? Number(n.toPrecision(4)) : n;
}
