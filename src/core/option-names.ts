/**
 * Option names checked at construction. A misspelt option (`conectTimeout: 500`) is otherwise
 * ignored without a word, and the default it was meant to change stays: a dead host then costs
 * the default connect timeout where the caller wrote 500 ms, and nothing says why. TypeScript
 * catches it only in an object literal written at the call; options read from a config file, or
 * spread from another client's, reach the constructor unchecked.
 *
 * An unknown name is a process warning (`DIALGUARD_UNKNOWN_OPTION`), once per constructor and
 * name, naming the closest known option when one is near. Not an error: code that hands one
 * options object to several clients (undici's and dialguard's, say), each taking the names it
 * knows, must keep working. Checked only where options are taken once (constructors and
 * factories), never per call: a per-call check would cost every request a walk of its options.
 *
 * @module
 */

/**
 * Every option name of `T`, as an object whose keys the compiler holds to exactly `T`'s: a name
 * added to the options type and not here, or one here that the type lacks, fails the build.
 *
 * @internal
 */
export type OptionNames<T> = { readonly [K in keyof Required<T>]: true };

/** The warning's code, for `process.on('warning')` filters: `warning.code === 'DIALGUARD_UNKNOWN_OPTION'`. */
export const UNKNOWN_OPTION = 'DIALGUARD_UNKNOWN_OPTION';

/** The names of `names` as a set, for {@link checkOptionNames}. @internal */
export function optionNames<T>(names: OptionNames<T>): ReadonlySet<string> {
  return new Set(Object.keys(names));
}

/** `where` + name pairs already warned about: a constructor called per request warns once. */
const warned = new Set<string>();

/** Most distinct pairs remembered: a stream of generated names cannot grow the set without bound. */
const MAX_WARNED = 1_024;

/**
 * Warns, once per `where` and name, about each own enumerable string key of `options` that
 * `known` lacks and whose value is not undefined.
 * `options` that is not an object is left to the constructor's own check.
 *
 * @param where - the constructor or factory, as the warning names it (`'HostBreaker'`).
 * @internal
 */
export function checkOptionNames(where: string, options: unknown, known: ReadonlySet<string>): void {
  if (typeof options !== 'object' || options === null) return;
  for (const [name, value] of Object.entries(options)) {
    // Undefined is unset, as for every option (a spread config): it changes nothing to warn of.
    if (known.has(name) || value === undefined) continue;
    const pair = `${where}\0${name}`;
    if (warned.has(pair) || warned.size >= MAX_WARNED) continue;
    warned.add(pair);
    const near = nearest(name, known);
    const hint = near === undefined ? '' : ` (did you mean '${near}'?)`;
    process.emitWarning(`dialguard: ${where}: unknown option '${name}' is ignored${hint}`, { type: 'DialguardWarning', code: UNKNOWN_OPTION });
  }
}

/**
 * The known name closest to `name`, case aside: within an edit distance of 2 (3 for names of 12
 * letters or more), the first of the nearest in `known`'s order; undefined when none is that near.
 */
function nearest(name: string, known: ReadonlySet<string>): string | undefined {
  const lower = name.toLowerCase();
  const limit = name.length >= 12 ? 3 : 2;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(lower, candidate.toLowerCase());
    if (d <= limit && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance of `a` and `b`: option names are short, and this runs once per unknown name. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}
