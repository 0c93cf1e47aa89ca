/** Timing helpers for benches: medians of per-call costs measured in batches. */

/** The median of `values` (NaN for none). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A percentile (0-100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Median cost of one awaited call of `op`, in microseconds: `batches` batches of `perBatch`
 * sequential calls each, after a warm-up. Batching keeps timer overhead out of the figure.
 */
export async function perCallMicros(op: () => Promise<unknown> | unknown, batches = 100, perBatch = 1_000): Promise<number> {
  for (let i = 0; i < perBatch * 5; i++) await settle(op);
  const samples: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < perBatch; i++) await settle(op);
    samples.push(Number(process.hrtime.bigint() - t0) / 1_000 / perBatch);
  }
  return median(samples);
}

/**
 * {@link perCallMicros} for several ops measured in alternating rounds, so that drift in the
 * machine (GC, a neighbour's load, a warming JIT) falls on all of them alike: the median per op
 * over `rounds` rounds of `batches` batches.
 */
export async function perCallMicrosInterleaved<K extends string>(
  ops: Record<K, () => Promise<unknown> | unknown>,
  rounds = 5,
  batches = 20,
): Promise<Record<K, number>> {
  const keys = Object.keys(ops) as K[];
  const samples = new Map<K, number[]>(keys.map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const k of keys) samples.get(k)!.push(await perCallMicros(ops[k], batches));
  return Object.fromEntries(keys.map((k) => [k, median(samples.get(k)!)])) as Record<K, number>;
}

async function settle(op: () => Promise<unknown> | unknown): Promise<void> {
  try {
    await op();
  } catch {
    /* refusals are the point */
  }
}

/** Milliseconds `p` took to settle, and how. */
export async function timed<T>(p: () => Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const t0 = performance.now();
  try {
    const value = await p();
    return { ms: performance.now() - t0, value };
  } catch (error) {
    return { ms: performance.now() - t0, error };
  }
}

/** Like {@link perCallMicros} for a synchronous `op` (a throw counts as a call). */
export function perCallMicrosSync(op: () => unknown, batches = 100, perBatch = 10_000): number {
  const call = (): void => {
    try {
      op();
    } catch {
      /* refusals are the point */
    }
  };
  for (let i = 0; i < perBatch; i++) call();
  const samples: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < perBatch; i++) call();
    samples.push(Number(process.hrtime.bigint() - t0) / 1_000 / perBatch);
  }
  return median(samples);
}

/**
 * Waits for `work`, but at most `cap` ms: resolves with whether the cap was hit (Infinity: no cap).
 * For raw clients that would otherwise wait for the kernel.
 */
export async function capped(work: Promise<unknown>, cap: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hit = await Promise.race([
    work.then(() => false),
    new Promise<boolean>((resolve) => {
      if (Number.isFinite(cap)) timer = setTimeout(() => resolve(true), cap);
    }),
  ]);
  clearTimeout(timer);
  return hit;
}

/** What {@link throughput} measured. */
export interface Throughput {
  /** Calls completed per second, over the time the loops really ran. */
  perSecond: number;
  /** This process's CPU (user + system) per completed call, µs: the client's own cost. */
  cpuUsPerCall: number;
  /** Calls completed, and this process's CPU over the run, µs (for totals over many runs). */
  calls: number;
  cpuUs: number;
}

/**
 * `callers` concurrent loops calling `call` back to back for `ms`: the calls per second and this
 * process's CPU per call. Each loop finishes the call it is in, so the run may end a little late;
 * the rate is over the real elapsed time.
 */
export async function throughput(callers: number, ms: number, call: () => Promise<unknown>): Promise<Throughput> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + ms;
  let done = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < until) {
        await call();
        done++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system;
  return { perSecond: (done / (performance.now() - t0)) * 1_000, cpuUsPerCall: cpuUs / Math.max(1, done), calls: done, cpuUs };
}

