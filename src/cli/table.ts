/**
 * Plain-text tables for the demo, the chaos run and the benches.
 *
 * @module
 */

/** A row: column name to value. */
export type Row = Record<string, string | number>;

/** Rounds for display: 3 significant digits below 100, integers from 100 up. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Math.abs(n) >= 100) return String(Math.round(n));
  return String(Number(n.toPrecision(3)));
}

/** Renders `rows` as an aligned table under `title` (columns in first-seen order). */
export function renderTable(title: string, rows: readonly Row[]): string {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: string | number | undefined): string => (v === undefined ? '' : typeof v === 'number' ? fmt(v) : v);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]): string => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  const out = [`\n${title}`, line(columns), line(widths.map((w) => '-'.repeat(w)))];
  for (const r of rows) out.push(line(columns.map((c) => cell(r[c]))));
  return `${out.join('\n')}\n`;
}
