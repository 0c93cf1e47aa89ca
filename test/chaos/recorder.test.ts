import { describe, expect, it } from 'vitest';
import { LaneRecorder, percentile } from '../../src/chaos/recorder.js';

function recorder() {
  let now = 1_000;
  const rec = new LaneRecorder(1_000, 500, () => now);
  return { rec, at: (ms: number) => (now = 1_000 + ms) };
}

describe('LaneRecorder', () => {
  it('buckets calls by when they ended, with rates per second and latency percentiles', () => {
    const { rec, at } = recorder();
    for (let i = 0; i < 10; i++) {
      at(100);
      const settle = rec.begin();
      at(100 + (i + 1) * 10);
      settle(i !== 9);
    }
    const { series, summary } = rec.result(1);
    expect(series).toHaveLength(1);
    expect(series[0]).toMatchObject({ t: 0, callsPerS: 20, errorsPerS: 2, p50: 50, p99: 100 });
    expect(summary).toMatchObject({ calls: 10, failed_calls: 1, lost_calls: 0, double_settled: 0 });
  });

  it('takes fault-window percentiles from calls that started during the fault', () => {
    const { rec, at } = recorder();
    rec.fault = [1, 2];
    at(500);
    const before = rec.begin();
    at(1_200);
    const during = rec.begin();
    at(1_900);
    before(true); // started before the fault: excluded
    at(4_200);
    during(true); // 3 s, started in the fault
    expect(rec.result(5).summary).toMatchObject({ p50_ms_during_fault: 3_000, p99_ms_during_fault: 3_000 });
  });

  it('counts calls that never settled and calls that settled twice', () => {
    const { rec } = recorder();
    rec.begin(); // never settled
    const twice = rec.begin();
    twice(true);
    twice(false);
    rec.settledElsewhere(2, 1);
    expect(rec.result(1).summary).toMatchObject({ lost_calls: 3, double_settled: 2, calls: 1, failed_calls: 0 });
  });

  it('rates dials to the faulty host over the fault window and records breaker bands', () => {
    const { rec, at } = recorder();
    rec.fault = [1, 3];
    at(500);
    rec.dial(); // before the fault
    for (const t of [1_100, 1_200, 2_500, 2_900]) {
      at(t);
      rec.dial();
    }
    at(1_300);
    rec.breaker(true);
    at(2_000);
    rec.breaker(false);
    at(2_600);
    rec.breaker(true); // still open at the end
    const r = rec.result(4);
    expect(r.summary.dials_to_dead_host_per_s).toBe(2);
    expect(r.breakerOpen).toEqual([
      [1.3, 2],
      [2.6, 4],
    ]);
    expect(r.series.map((b) => b.dialsPerS)).toEqual([0, 2, 4, 0, 0, 4]);
  });

  it('percentile is nearest rank and NaN for nothing', () => {
    expect(percentile([], 99)).toBeNaN();
    expect(percentile([5, 1, 3], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4], 99)).toBe(4);
  });
});
