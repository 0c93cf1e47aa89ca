/**
 * Replaying a failing property: fast-check prints `seed` and `path` when a property fails; run
 * the test again with FC_SEED=<seed> FC_PATH=<path> to replay exactly that case.
 */
export function replay(): { seed?: number; path?: string; endOnFailure?: boolean } {
  const seed = process.env.FC_SEED;
  if (seed === undefined) return {};
  return { seed: Number(seed), ...(process.env.FC_PATH === undefined ? {} : { path: process.env.FC_PATH, endOnFailure: true }) };
}

/**
 * How many runs a property gets: `n`, or fewer when DIALGUARD_FC_RUNS says so (mutation testing
 * runs every covering test once per mutant and needs them short; CI's own run keeps `n`).
 */
export function runs(n: number): number {
  const cap = Number(process.env.DIALGUARD_FC_RUNS);
  return Number.isFinite(cap) && cap > 0 ? Math.min(n, cap) : n;
}
