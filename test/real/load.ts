/**
 * Load for the tests against real servers: `callers` loops, each making calls until `done()`
 * (at most 100 000), counted by outcome.
 */

/**
 * Outcomes of the calls: `one()`'s answer, or `failed(err)` for a call that threw.
 */
export async function load(callers: number, one: () => Promise<string>, failed: (err: unknown) => string, done: () => boolean): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < 100_000 && !done(); i++) {
        let k: string;
        try {
          k = await one();
        } catch (err) {
          k = failed(err);
        }
        seen[k] = (seen[k] ?? 0) + 1;
      }
    }),
  );
  return seen;
}
