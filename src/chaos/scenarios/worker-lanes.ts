/**
 * The scenario side of the chaos client workers (see `../worker-loop.ts`): folding each worker's
 * reports into its lane's recorder, and the result of a scenario that could not run.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { LaneRecorder } from '../recorder.js';
import { reapAtExit } from '../../testing/local-process.js';
import type { ScenarioResult } from '../scenario.js';
import type { WorkerReportBase } from '../worker-loop.js';

/** A lane of a two-lane scenario. */
export type Lane = 'unguarded' | 'guarded';

/** The result of a scenario that did not run, saying why. */
export function skippedResult(name: string, title: string, reason: string): ScenarioResult {
  const empty = new LaneRecorder(performance.now()).result(0);
  return { name, title, duration: 0, fault: [0, 0], faultLabel: '', lanes: { unguarded: empty, guarded: empty }, skipped: reason, notes: [] };
}

/** Where {@link followWorker} records a worker's reports. */
export interface FollowOptions<R> {
  lane: Lane;
  /** Read at every report: a scenario may replace a recorder when its clock starts. */
  lanes: Record<Lane, LaneRecorder>;
  /** Workers of each lane whose breaker holds the watched node open; the lane's breaker shows open while any does. */
  openClients: Record<Lane, number>;
  /** Wall clock minus the recorders' clock, ms (read at every report). */
  wallOffset: () => number;
  /** Sees every report first, with its lane's recorder; returning false takes it no further. */
  onReport?: (r: R, rec: LaneRecorder) => boolean | void;
}

/**
 * Records `worker`'s calls, dials, opened connections, breaker changes and final counts in its
 * lane; resolves when it exits. A worker that exits without its final report counts one lost call.
 */
export function followWorker<R extends WorkerReportBase<[start: number, end: number, ok: 0 | 1, ...rest: number[]]>>(worker: ChildProcess, o: FollowOptions<R>): Promise<void> {
  const { lane, lanes, openClients } = o;
  let reportedDone = false;
  reapAtExit(worker); // a worker never outlives this process (it would run on to its duration unheard)
  worker.on('message', (r: R) => {
    const rec = lanes[lane];
    if (o.onReport?.(r, rec) === false) return;
    const wallOffset = o.wallOffset();
    for (const [s, e, ok] of r.calls) rec.record(s - wallOffset, e - wallOffset, ok === 1);
    for (const at of r.dials) rec.dial(at - wallOffset);
    rec.connectionsOpened += r.opened;
    for (const [open, at] of r.breaker) {
      openClients[lane] += open === 1 ? 1 : -1;
      if (open === 1 && openClients[lane] === 1) rec.breaker(true, at - wallOffset);
      if (open === 0 && openClients[lane] === 0) rec.breaker(false, at - wallOffset);
    }
    if (r.done !== undefined) {
      reportedDone = true;
      rec.settledElsewhere(r.done.lost, r.done.double);
    }
  });
  return new Promise<void>((resolve) =>
    worker.once('exit', () => {
      if (!reportedDone) lanes[lane].settledElsewhere(1, 0); // a worker that died without reporting lost its calls
      resolve();
    }),
  );
}
