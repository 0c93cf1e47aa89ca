/** The flags every bench reads: `--quick` (a short smoke run) and `--name value` numbers. */

const args = process.argv.slice(2);

/** Whether `--quick` was given. */
export const quick = args.includes('--quick');

/** The number after `name` (e.g. `--timeout 500`), or `fallback`. */
export function numberFlag(name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isFinite(n)) throw new RangeError(`${name} needs a number, got ${JSON.stringify(args[i + 1])}`);
  return n;
}
