/**
 * Bench output: a readable table, then exactly one machine-readable JSON line, always last.
 */
import { type Row, renderTable } from '../../src/cli/table.js';

/** Prints `rows` as an aligned text table under `title`. */
export function printTable(title: string, rows: readonly Row[]): void {
  process.stdout.write(renderTable(title, rows));
}

/** Rounds a figure for the JSON line (keeps 4 significant digits). */
export function round(n: number): number {
  return Number.isFinite(n) ? Number(n.toPrecision(4)) : n;
}

/** Prints the one JSON line a bench ends with. */
export function printJson(bench: string, fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ bench, ...fields })}\n`);
}

/** Progress on stderr, so stdout stays table + JSON. */
export function progress(message: string): void {
  process.stderr.write(`… ${message}\n`);
}
