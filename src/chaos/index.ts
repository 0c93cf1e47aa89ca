/**
 * `dialguard chaos`: the seeds' incidents replayed on embedded peers on loopback, each with an
 * unguarded and a guarded client side by side; a live view while it runs, a summary table, one
 * JSON line per scenario (`--json`), and a self-contained HTML report (`--report FILE`).
 *
 * @module
 */
import { writeFileSync } from 'node:fs';
import { type Row, fmt, renderTable } from '../cli/table.js';
import { LiveView } from './live-view.js';
import { renderReport } from './report-html.js';
import type { Scenario, ScenarioResult } from './scenario.js';
import { deadProxy } from './scenarios/dead-proxy.js';
import { memcachedStorm } from './scenarios/memcached.js';
import { redisScenario } from './scenarios/redis.js';
import { s5 } from './scenarios/s5.js';

/** Every scenario, in the order a full run plays them. */
export const scenarios: readonly Scenario[] = [s5, deadProxy, memcachedStorm, redisScenario];

/** Options of {@link runChaos}. */
export interface ChaosOptions {
  /** Scenario names; default all. */
  only?: readonly string[];
  /** Shorter timings (CI smoke runs). */
  quick?: boolean;
  /** Print one JSON line per scenario on stdout; everything else goes to stderr. */
  json?: boolean;
  /** Write the HTML report here. */
  report?: string;
}

/** The JSON line of one scenario. */
export function jsonLine(r: ScenarioResult): Record<string, unknown> {
  const u = r.lanes.unguarded.summary;
  const g = r.lanes.guarded.summary;
  const pair = (k: keyof typeof u): { guarded: number; unguarded: number } => ({ guarded: g[k], unguarded: u[k] });
  return {
    bench: 'chaos',
    scenario: r.name,
    ...(r.skipped === undefined ? {} : { skipped: r.skipped }),
    duration_s: Number(r.duration.toFixed(1)),
    p99_ms_during_fault: pair('p99_ms_during_fault'),
    p50_ms_during_fault: pair('p50_ms_during_fault'),
    calls: pair('calls'),
    failed_calls: pair('failed_calls'),
    retries: pair('retries'),
    dials_to_dead_host_per_s: pair('dials_to_dead_host_per_s'),
    connections_opened: pair('connections_opened'),
    lost_calls: pair('lost_calls'),
    double_settled: pair('double_settled'),
    ...(r.extra ?? {}),
  };
}

/** The summary table over every scenario. */
export function summaryRows(results: readonly ScenarioResult[]): Row[] {
  const rows: Row[] = [];
  for (const r of results) {
    if (r.skipped !== undefined) {
      rows.push({ scenario: r.name, measure: `SKIPPED: ${r.skipped}` });
      continue;
    }
    const u = r.lanes.unguarded.summary;
    const g = r.lanes.guarded.summary;
    const line = (measure: string, a: number, b: number): Row => ({
      scenario: r.name,
      measure,
      unguarded: a,
      guarded: b,
      'guarded/unguarded': a === 0 ? (b === 0 ? '=' : '') : fmt(b / a),
    });
    rows.push(line('p99 during fault (ms)', u.p99_ms_during_fault, g.p99_ms_during_fault));
    rows.push(line('calls completed', u.calls, g.calls));
    rows.push(line('failed calls', u.failed_calls, g.failed_calls));
    rows.push(line('dials/s to faulty host', u.dials_to_dead_host_per_s, g.dials_to_dead_host_per_s));
    rows.push(line('connections opened', u.connections_opened, g.connections_opened));
    rows.push(line('lost + double-settled', u.lost_calls + u.double_settled, g.lost_calls + g.double_settled));
  }
  return rows;
}

/**
 * Runs the chosen scenarios one after another and reports them. Resolves with the results;
 * rejects (after reporting what ran) if a scenario threw.
 */
export async function runChaos(options: ChaosOptions = {}): Promise<ScenarioResult[]> {
  const chosen = options.only === undefined || options.only.length === 0 ? scenarios : scenarios.filter((s) => options.only!.includes(s.name));
  const unknown = (options.only ?? []).filter((n) => !scenarios.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`no chaos scenario named ${unknown.join(', ')}; have ${scenarios.map((s) => s.name).join(', ')}`);
  const human = options.json === true ? process.stderr : process.stdout;
  const write = (t: string): void => void human.write(t);
  const view = new LiveView({ write, tty: human.isTTY === true });
  const results: ScenarioResult[] = [];
  const started = performance.now();
  for (const scenario of chosen) {
    write(`\n=== ${scenario.title} ===\n${scenario.story}\n\n`);
    const result = await scenario.run({
      quick: options.quick === true,
      log: (line) => view.log(`  ${((performance.now() - started) / 1_000).toFixed(1).padStart(6)} s  ${line}`),
      live: (source) => view.show(scenario.name, source),
    });
    view.stop();
    results.push(result);
    write(renderTable(scenario.title, summaryRows([result])));
    if (options.json === true) process.stdout.write(`${JSON.stringify(jsonLine(result))}\n`);
  }
  write(renderTable('chaos summary', summaryRows(results)));
  if (options.report !== undefined) {
    writeFileSync(options.report, renderReport(results, { generated: new Date().toISOString(), quick: options.quick === true }));
    write(`\nreport written to ${options.report}\n`);
  }
  write(`done in ${((performance.now() - started) / 1_000).toFixed(1)} s\n`);
  return results;
}
