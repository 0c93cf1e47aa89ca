/**
 * The chaos run's HTML report: one self-contained page (inline CSS and SVG, no script, nothing
 * fetched), with per scenario the time series of both lanes on shared axes (latency p50/p99,
 * calls/s, errors/s, dials/s to the faulty host), the fault window and the breaker's open bands
 * shaded, and the summary table.
 *
 * @module
 */
import { fmt } from '../cli/table.js';
import type { Bucket, LaneResult, LaneSummary } from './recorder.js';
import type { ScenarioResult } from './scenario.js';

const W = 560;
const H = 210;
const M = { left: 56, right: 12, top: 14, bottom: 30 };
const COLORS = { unguarded: '#c0392b', guarded: '#1f6fb2' } as const;

type Lane = keyof typeof COLORS;

interface Series {
  lane: Lane;
  metric: string;
  dashed: boolean;
  points: Array<[number, number]>;
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Round numbers for axis ticks: 1, 2, 5 times a power of ten. */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** One chart as an SVG string. */
function chart(title: string, unit: string, series: Series[], duration: number, shade: { fault: [number, number]; bands: Array<[number, number]> }, log: boolean): string {
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const values = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => Number.isFinite(v));
  const positive = values.filter((v) => v > 0);
  const lo = log ? 10 ** Math.floor(Math.log10(Math.min(...positive, 1))) : 0;
  const hi = log ? 10 ** Math.ceil(Math.log10(Math.max(...positive, 10))) : niceMax(Math.max(...values, 0));
  const x = (t: number): number => M.left + (Math.min(Math.max(t, 0), duration) / Math.max(duration, 1e-9)) * pw;
  const y = (v: number): number => {
    const f = log ? (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : v / hi;
    return M.top + ph - Math.min(1, Math.max(0, f)) * ph;
  };
  const parts: string[] = [];
  parts.push(`<rect class="fault" x="${x(shade.fault[0]).toFixed(1)}" y="${M.top}" width="${Math.max(0, x(shade.fault[1]) - x(shade.fault[0])).toFixed(1)}" height="${ph}"/>`);
  for (const [a, b] of shade.bands) {
    parts.push(`<rect class="breaker-band" x="${x(a).toFixed(1)}" y="${M.top + ph - 6}" width="${Math.max(1, x(b) - x(a)).toFixed(1)}" height="6"><title>guarded breaker open ${a.toFixed(1)}–${b.toFixed(1)} s</title></rect>`);
  }
  const yTicks = log
    ? Array.from({ length: Math.round(Math.log10(hi / lo)) + 1 }, (_, i) => lo * 10 ** i)
    : [0, hi / 4, hi / 2, (3 * hi) / 4, hi];
  for (const v of yTicks) {
    parts.push(`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}"/>`);
    parts.push(`<text class="tick" x="${M.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${esc(fmt(v))}</text>`);
  }
  const step = duration > 40 ? 10 : duration > 15 ? 5 : 2;
  for (let t = 0; t <= duration + 1e-9; t += step) {
    parts.push(`<text class="tick" x="${x(t).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${t}s</text>`);
  }
  for (const s of series) {
    let d = '';
    let pen = false;
    let n = 0;
    for (const [t, v] of s.points) {
      if (!Number.isFinite(v)) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
      n++;
    }
    parts.push(
      `<path class="series" data-lane="${s.lane}" data-metric="${esc(s.metric)}" data-points="${n}" d="${d}" stroke="${COLORS[s.lane]}"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
    );
  }
  parts.push(`<line class="axis" x1="${M.left}" x2="${W - M.right}" y1="${M.top + ph}" y2="${M.top + ph}"/>`);
  parts.push(`<line class="axis" x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${M.top + ph}"/>`);
  return (
    `<figure><figcaption>${esc(title)} <span class="unit">(${esc(unit)}${log ? ', log scale' : ''})</span></figcaption>` +
    `<svg class="chart" data-chart="${esc(title)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">${parts.join('')}</svg></figure>`
  );
}

function lanePoints(lane: LaneResult, pick: (b: Bucket) => number): Array<[number, number]> {
  return lane.series.map((b) => [b.t, pick(b)]);
}

const SUMMARY_ROWS: Array<[keyof LaneSummary, string]> = [
  ['p99_ms_during_fault', 'p99 during the fault (ms)'],
  ['p50_ms_during_fault', 'p50 during the fault (ms)'],
  ['calls', 'calls completed'],
  ['failed_calls', 'failed calls'],
  ['retries', 'retries'],
  ['dials_to_dead_host_per_s', 'dials/s to the faulty host'],
  ['connections_opened', 'connections opened'],
  ['lost_calls', 'lost calls'],
  ['double_settled', 'double-settled calls'],
];

function summaryTable(r: ScenarioResult): string {
  const u = r.lanes.unguarded.summary;
  const g = r.lanes.guarded.summary;
  const rows = SUMMARY_ROWS.map(([k, label]) => {
    const ratio = u[k] !== 0 && Number.isFinite(u[k]) && Number.isFinite(g[k]) ? fmt(g[k] / u[k]) : '';
    return `<tr><th>${esc(label)}</th><td>${esc(fmt(u[k]))}</td><td>${esc(fmt(g[k]))}</td><td>${esc(ratio)}</td></tr>`;
  });
  return `<table class="summary"><thead><tr><th></th><th>unguarded</th><th>guarded</th><th>guarded/unguarded</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function section(r: ScenarioResult): string {
  if (r.skipped !== undefined) {
    return `<section class="scenario skipped" id="${esc(r.name)}"><h2>${esc(r.title)}</h2><p class="skip">Skipped: ${esc(r.skipped)}</p></section>`;
  }
  const shade = { fault: r.fault, bands: r.lanes.guarded.breakerOpen };
  const both = (metric: string, pick: (b: Bucket) => number, dashed = false): Series[] =>
    (['unguarded', 'guarded'] as const).map((lane) => ({ lane, metric, dashed, points: lanePoints(r.lanes[lane], pick) }));
  const charts = [
    chart('latency p50 / p99', 'ms', [...both('p99', (b) => b.p99), ...both('p50', (b) => b.p50, true)], r.duration, shade, true),
    chart('calls completed', 'calls/s', both('calls', (b) => b.callsPerS), r.duration, shade, false),
    chart('failed calls', 'errors/s', both('errors', (b) => b.errorsPerS), r.duration, shade, false),
    chart('dials to the faulty host', 'dials/s', both('dials', (b) => b.dialsPerS), r.duration, shade, false),
  ];
  return (
    `<section class="scenario" id="${esc(r.name)}"><h2>${esc(r.title)}</h2>` +
    `<p class="fault-label">Fault: ${esc(r.faultLabel)}, ${r.fault[0].toFixed(0)}–${r.fault[1].toFixed(0)} s (grey). ` +
    `Orange marks: the guarded breaker holding the faulty host open.</p>` +
    `<div class="charts">${charts.join('')}</div>${summaryTable(r)}` +
    `<ul class="notes">${r.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul></section>`
  );
}

/** The whole report page. */
export function renderReport(results: readonly ScenarioResult[], meta: { generated: string; quick: boolean }): string {
  const css = `
    body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
    h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
    .meta,.fault-label,.unit{color:#666} .legend span{display:inline-block;margin-right:16px}
    .sw{display:inline-block;width:22px;height:3px;vertical-align:middle;margin-right:6px}
    .charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:8px}
    figure{margin:0} figcaption{font-weight:600;margin:4px 0}
    svg.chart{background:#fff;border:1px solid #e4e4e4}
    .series{fill:none;stroke-width:1.6} .grid{stroke:#eee} .axis{stroke:#999}
    .tick{font-size:10px;fill:#666} .fault{fill:#000;fill-opacity:.06} .breaker-band{fill:#e67e22;fill-opacity:.8}
    table.summary{border-collapse:collapse;margin:10px 0} table.summary th,table.summary td{border:1px solid #ddd;padding:3px 10px;text-align:right}
    table.summary th:first-child{text-align:left} .skip{color:#a33;font-weight:600} .notes{color:#555}`;
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>dialguard chaos report</title><style>${css}</style></head><body>` +
    `<h1>dialguard chaos report</h1><p class="meta">Generated ${esc(meta.generated)}${meta.quick ? ' (quick run)' : ''}. ` +
    `Each scenario runs an unguarded and a guarded client side by side against the same embedded peers on loopback.</p>` +
    `<p class="legend"><span><i class="sw" style="background:${COLORS.unguarded}"></i>unguarded</span>` +
    `<span><i class="sw" style="background:${COLORS.guarded}"></i>guarded (dialguard)</span><span>dashed: p50</span></p>` +
    results.map(section).join('') +
    `</body></html>\n`
  );
}
