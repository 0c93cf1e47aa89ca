/**
 * The chaos HTML report, opened in a real headless Chromium (npm's @sparticuz/chromium, driven by
 * playwright-core): every chart must have rendered with data. The browser comes with `npm ci`;
 * one that does not launch is a failure, never a skip.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runChaos } from '../../src/chaos/index.js';
import { LaneRecorder } from '../../src/chaos/recorder.js';
import { renderReport } from '../../src/chaos/report-html.js';
import type { ScenarioResult } from '../../src/chaos/scenario.js';
import { launchChromium } from '../helpers/chromium.js';

const dir = mkdtempSync(join(tmpdir(), 'dialguard-report-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Rendered {
  charts: Array<{ name: string; series: Array<{ lane: string; metric: string; points: number; width: number; height: number }> }>;
  skipped: number;
  tables: number;
  external: number;
}

async function inspect(file: string): Promise<Rendered> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const requests: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith('file:')) requests.push(r.url());
    });
    await page.goto(`file://${file}`);
    // Runs in the page (a string, so this Node-typed project needs no DOM typings).
    const rendered = (await page.evaluate(`({
      charts: [...document.querySelectorAll('svg.chart')].map((svg) => ({
        name: svg.getAttribute('data-chart') ?? '',
        series: [...svg.querySelectorAll('path.series')].map((p) => {
          const box = p.getBBox();
          return {
            lane: p.getAttribute('data-lane') ?? '',
            metric: p.getAttribute('data-metric') ?? '',
            points: Number(p.getAttribute('data-points')),
            width: box.width,
            height: box.height,
          };
        }),
      })),
      skipped: document.querySelectorAll('section.skipped').length,
      tables: document.querySelectorAll('table.summary').length,
      external: document.querySelectorAll('script, link, img, iframe').length,
    })`)) as Rendered;
    return { ...rendered, external: rendered.external + requests.length };
  } finally {
    await browser.close();
  }
}

describe('chaos report', () => {
  it('a real quick chaos run renders every chart with data, both lanes, self-contained', async () => {
    const file = join(dir, 'report.html');
    const [result] = await runChaos({ only: ['dead-proxy'], quick: true, report: file });
    expect(result!.lanes.guarded.summary.lost_calls + result!.lanes.guarded.summary.double_settled).toBe(0);
    const r = await inspect(file);
    expect(r.charts.map((c) => c.name)).toEqual(['latency p50 / p99', 'calls completed', 'failed calls', 'dials to the faulty host']);
    for (const chart of r.charts) {
      const drawn = chart.series.filter((s) => s.points >= 2 && s.width > 0);
      expect(new Set(drawn.map((s) => s.lane)), `chart ${chart.name}`).toEqual(new Set(['unguarded', 'guarded']));
    }
    expect(r.tables).toBe(1);
    expect(r.external).toBe(0);
  }, 60_000);

  it('shows a skipped scenario as skipped, with its reason, beside rendered ones', async () => {
    const rec = (): LaneRecorder => {
      let now = 0;
      const l = new LaneRecorder(0, 500, () => now);
      for (let i = 0; i < 40; i++) {
        now = i * 100;
        const settle = l.begin();
        now += 10 + (i % 7);
        settle(i % 5 !== 0);
        l.dial(now);
      }
      return l;
    };
    const ok: ScenarioResult = {
      name: 's5',
      title: 'S5',
      duration: 4,
      fault: [1, 3],
      faultLabel: 'peer killed',
      lanes: { unguarded: rec().result(4), guarded: rec().result(4) },
      notes: ['synthetic'],
    };
    const skipped: ScenarioResult = { ...ok, name: 'memcached', title: 'memcached', skipped: 'memcached is not installed' };
    const file = join(dir, 'synthetic.html');
    writeFileSync(file, renderReport([ok, skipped], { generated: 'now', quick: true }));
    const r = await inspect(file);
    expect(r.charts).toHaveLength(4);
    expect(r.skipped).toBe(1);
    expect(r.charts.every((c) => c.series.some((s) => s.points >= 2 && s.width > 0))).toBe(true);
  }, 60_000);
});
