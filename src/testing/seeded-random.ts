/**
 * A seeded uniform [0, 1) source (mulberry32): jitter that is random, yet the same on every run,
 * for tests and simulations that inject `random` the way they inject a clock.
 *
 * @module
 */

/** Returns a function yielding the same pseudo-random sequence in [0, 1) for the same `seed`. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
