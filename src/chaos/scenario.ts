/**
 * What every chaos scenario is and returns, and the loop that drives its callers.
 *
 * @module
 */
import { blackhole } from '../testing/blackhole.js';
import type { LaneRecorder, LaneResult } from './recorder.js';

/** What a running scenario shows the live view. */
export interface LiveSource {
  /** Total planned seconds. */
  total: number;
  /** Seconds since start. */
  elapsed: () => number;
  lanes: { unguarded: LaneRecorder; guarded: LaneRecorder };
  /** Hosts the guarded lane's breakers hold open now. */
  openBreakers: () => number;
  /** What phase the scenario is in ("healthy", "peer killed", ...). */
  phase: () => string;
}

/** What a scenario gets from the runner. */
export interface ScenarioContext {
  /** Shorter timings, for CI smoke runs. */
  quick: boolean;
  /** Progress lines (state changes of the scenario itself). */
  log: (line: string) => void;
  /** Registers the scenario's recorders with the live view while it runs. */
  live: (source: LiveSource) => void;
}

/** A scenario's outcome. */
export interface ScenarioResult {
  name: string;
  title: string;
  /** Seconds the scenario ran. */
  duration: number;
  /** When the fault was on, seconds. */
  fault: [number, number];
  /** What the fault was. */
  faultLabel: string;
  lanes: { unguarded: LaneResult; guarded: LaneResult };
  /** Why it did not run, when it could not (e.g. memcached missing). */
  skipped?: string;
  /** Facts a reader needs to read the numbers (timeouts, counts). */
  notes: string[];
  /** Figures only this scenario measures, added to its JSON line as they are (e.g. `recovery_ms`). */
  extra?: Record<string, unknown>;
}

/** A replayable incident. */
export interface Scenario {
  name: string;
  title: string;
  /** One paragraph: what happened in the seed and what the scenario does. */
  story: string;
  run(ctx: ScenarioContext): Promise<ScenarioResult>;
}

/**
 * Runs `callers` loops until `until()` says stop, each calling `call` back to back and recording
 * it; resolves when every loop has finished its last call.
 */
export async function driveCallers(
  recorder: LaneRecorder,
  callers: number,
  stop: () => boolean,
  call: (caller: number, iteration: number) => Promise<unknown>,
  pause = 0,
): Promise<void> {
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      for (let i = 0; !stop(); i++) {
        const settle = recorder.begin();
        await call(caller, i).then(
          () => settle(true),
          () => settle(false),
        );
        // A refused call settles within microtasks; yield so timers and I/O of the other lane run.
        await new Promise((r) => (pause > 0 ? setTimeout(r, pause) : setImmediate(r)));
      }
    }),
  );
}

/** Resolves after `ms` of real time (scenarios run on the wall clock by design). */
export function wait(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)));
}

/** A peer that can die and come back on the same port (the fault kit's TCP and HTTP/2 peers). */
export interface KillablePeer {
  readonly address: string;
  readonly port: number;
  kill(): Promise<void>;
  listen(): Promise<unknown>;
}

/**
 * The timeline of the peer-death scenarios: `healthy` seconds of normal service; then the victim
 * dies and its address goes dark (a blackhole on its port, as when a pod's IP stops routing) for
 * `faultFor` seconds; then it is back on the same port for `after` seconds.
 */
export async function darkTimeline(
  victim: KillablePeer,
  seconds: { healthy: number; faultFor: number; after: number },
  on: { phase: (label: string) => void; log: (line: string) => void },
): Promise<void> {
  await wait(seconds.healthy * 1_000);
  on.phase('dead, address dark');
  on.log(`${victim.address} dies; its address goes dark`);
  const port = victim.port;
  await victim.kill();
  const dark = await blackhole({ port });
  try {
    await wait(seconds.faultFor * 1_000);
  } finally {
    await dark.close();
  }
  on.phase('back');
  on.log(`${victim.address} is back`);
  await victim.listen();
  await wait(seconds.after * 1_000);
}
