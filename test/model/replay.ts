/**
 * Replaying a failing property: fast-check prints `seed` and `path` when a property fails; run
 * the test again with FC_SEED=<seed> FC_PATH=<path> to replay exactly that case.
 */
export function replay(): { seed?: number; path?: string; endOnFailure?: boolean } {
  const seed = process.env.FC_SEED;
  if (seed === undefined) return {};
  return { seed: Number(seed), ...(process.env.FC_PATH === undefined ? {} : { path: process.env.FC_PATH, endOnFailure: true }) };
}
