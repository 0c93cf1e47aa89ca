/**
 * Healthy-path comparison of a guarded client against the raw one: alternating paired rounds, so
 * the bursts of noise on a shared machine fall on both alike, and figures that are medians of the
 * pairs (with their spread), never of one long run.
 */
import { numberFlag } from './args.js';
import { round } from './report.js';
import { type Throughput, median, throughput } from './timing.js';

/** What {@link pairedRounds} measured. */
export interface Paired {
  /** Rounds run (pairs). */
  rounds: number;
  /** Median calls per second of each lane. */
  raw: number;
  guarded: number;
  /** Median of the pairs' guarded/raw throughput, and its spread (min and max over the pairs). */
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  /** Median of the pairs' raw/guarded CPU per call (1 = the guarded client costs nothing more). */
  cpuRatio: number;
  /** Median CPU per call of each lane, µs (this process, `process.cpuUsage`). */
  cpuUsPerCall: { guarded: number; raw: number };
  /** Median over the pairs of guarded minus raw CPU per call, µs, and its spread. */
  cpuExtraUs: number;
  cpuExtraMin: number;
  cpuExtraMax: number;
  /**
   * Each lane's CPU over all its rounds divided by all its calls, µs, and guarded minus raw. One
   * round's CPU per call moves by tens of µs with the GC and the neighbours, so a median of pair
   * differences resolves a few µs at best; totals over the same rounds resolve far finer.
   */
  cpuTotalUsPerCall: { guarded: number; raw: number; extra: number };
}

/** `--rounds N`, else `fallback`: how many paired rounds a healthy comparison runs. */
export function roundsFlag(fallback: number): number {
  const n = numberFlag('--rounds', fallback);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--rounds needs a positive integer, got ${n}`);
  return n;
}

/**
 * `rounds` pairs of `ms`-long rounds of `callers` concurrent loops, one lane of each pair raw and
 * one guarded, the order alternating so neither always runs on a warmer machine.
 */
export async function pairedRounds(
  rounds: number,
  ms: number,
  callers: number,
  raw: () => Promise<unknown>,
  guarded: () => Promise<unknown>,
  onRound?: (i: number, r: Throughput, g: Throughput) => void,
): Promise<Paired> {
  return pairedRuns(rounds, ms, (t) => throughput(callers, t, raw), (t) => throughput(callers, t, guarded), onRound);
}

/**
 * {@link pairedRounds} for lanes that run their own rounds (`run(ms)`), such as a lane in a
 * process of its own (see lane-process.ts). `onRound` runs after each pair and is awaited before
 * the next, so it may replace the processes behind `raw` and `guarded` (bench/grpc does).
 */
export async function pairedRuns(
  rounds: number,
  ms: number,
  raw: (ms: number) => Promise<Throughput>,
  guarded: (ms: number) => Promise<Throughput>,
  onRound?: (i: number, r: Throughput, g: Throughput) => void | Promise<void>,
): Promise<Paired> {
  const rs: number[] = [];
  const gs: number[] = [];
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  const rawCpu: number[] = [];
  const guardedCpu: number[] = [];
  const extra: number[] = [];
  const total = { raw: { calls: 0, cpuUs: 0 }, guarded: { calls: 0, cpuUs: 0 } };
  for (let i = 0; i < rounds; i++) {
    const first = i % 2 === 0 ? raw : guarded;
    const second = i % 2 === 0 ? guarded : raw;
    const a = await first(ms);
    const b = await second(ms);
    const [r, g] = i % 2 === 0 ? [a, b] : [b, a];
    rs.push(r.perSecond);
    gs.push(g.perSecond);
    ratios.push(g.perSecond / r.perSecond);
    rawCpu.push(r.cpuUsPerCall);
    guardedCpu.push(g.cpuUsPerCall);
    cpuRatios.push(r.cpuUsPerCall / g.cpuUsPerCall);
    extra.push(g.cpuUsPerCall - r.cpuUsPerCall);
    total.raw.calls += r.calls;
    total.raw.cpuUs += r.cpuUs;
    total.guarded.calls += g.calls;
    total.guarded.cpuUs += g.cpuUs;
    await onRound?.(i, r, g);
  }
  const guardedTotal = total.guarded.cpuUs / Math.max(1, total.guarded.calls);
  const rawTotal = total.raw.cpuUs / Math.max(1, total.raw.calls);
  return {
    rounds,
    raw: median(rs),
    guarded: median(gs),
    ratio: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
    cpuRatio: median(cpuRatios),
    cpuUsPerCall: { guarded: median(guardedCpu), raw: median(rawCpu) },
    cpuExtraUs: median(extra),
    cpuExtraMin: Math.min(...extra),
    cpuExtraMax: Math.max(...extra),
    cpuTotalUsPerCall: { guarded: guardedTotal, raw: rawTotal, extra: guardedTotal - rawTotal },
  };
}

/**
 * The note of a CPU-per-call row: the median of pair differences with its spread, then the
 * difference of the totals over the same rounds ({@link Paired.cpuTotalUsPerCall}).
 */
export function cpuNote(p: Paired): string {
  const t = p.cpuTotalUsPerCall;
  return `extra ${p.cpuExtraUs.toFixed(2)} µs (pairs ${p.cpuExtraMin.toFixed(2)} to ${p.cpuExtraMax.toFixed(2)}); all rounds: ${t.guarded.toFixed(1)} vs ${t.raw.toFixed(1)}, extra ${t.extra.toFixed(2)} µs`;
}

/** {@link Paired.cpuTotalUsPerCall}, rounded for a JSON line. */
export function cpuTotals(p: Paired): { guarded: number; raw: number; extra: number } {
  const t = p.cpuTotalUsPerCall;
  return { guarded: round(t.guarded), raw: round(t.raw), extra: round(t.extra) };
}
