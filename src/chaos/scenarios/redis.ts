/**
 * Chaos scenario "redis" (issue 15, seed 002 in its commonest form): real `redis-server`
 * processes, client processes with default node-redis and ioredis settings beside the same
 * clients through a {@link RedisGuard}; one node is frozen (SIGSTOP), then SIGKILLed: its port
 * first refuses, then is dropped (a blackhole: SYNs vanish, as when the pod's address stops
 * routing); then it comes back on the same port. Counts the dials per second to that node.
 *
 * Where `redis-server` is missing, the scenario reports itself skipped with the install command.
 *
 * @module
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { blackhole } from '../../testing/blackhole.js';
import { freePort } from '../../testing/local-process.js';
import { LaneRecorder } from '../recorder.js';
import { RedisProcess, redisServerMissing } from '../redis/server.js';
import type { RedisWorkerConfig, RedisWorkerReport } from '../redis/worker.js';
import { type Scenario, type ScenarioContext, type ScenarioResult, wait } from '../scenario.js';
import { type Lane, followWorker, skippedResult } from './worker-lanes.js';

const PROCESSES = 3;
const PER_NODE = 2;
const CALL_TIMEOUT = 250;
const PAUSE = 20;
const CONNECT_TIMEOUT = 2_000;

const workerPath = fileURLToPath(new URL('../redis/worker.js', import.meta.url));
const LANES: readonly Lane[] = ['unguarded', 'guarded'];

/** Seconds of each phase. */
function phases(quick: boolean): { healthy: number; frozen: number; refused: number; dropped: number; after: number } {
  return quick ? { healthy: 2, frozen: 2, refused: 3, dropped: 3, after: 8 } : { healthy: 3, frozen: 5, refused: 8, dropped: 8, after: 12 };
}

export const redisScenario: Scenario = {
  name: 'redis',
  title: 'A frozen, then dead Redis node and its reconnect storm (issue 15, seed 002)',
  story:
    `Two real redis-server nodes serve ${PROCESSES} client processes per lane, each with ${PER_NODE} node-redis and ${PER_NODE} ioredis ` +
    'clients per node (default settings; the guarded lane wraps the same clients in one RedisGuard per process, breaker ' +
    'defaults). One node is frozen (SIGSTOP: its kernel still completes handshakes, nothing answers), then SIGKILLed: its ' +
    'port refuses, then is dropped (SYNs vanish); then it is back on the same port.',
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const p = phases(ctx.quick);
    const faultEnd = p.healthy + p.frozen + p.refused + p.dropped;
    const total = faultEnd + p.after;
    const missing = redisServerMissing();
    if (missing !== undefined) {
      ctx.log(`redis: SKIPPED: ${missing}`);
      return skippedResult('redis', redisScenario.title, missing);
    }

    const servers: RedisProcess[] = [];
    const workers: ChildProcess[] = [];
    let dark: Awaited<ReturnType<typeof blackhole>> | undefined;
    try {
      for (let i = 0; i < 2; i++) servers.push(await startOnFreePort());
      const victim = servers[1]!;
      let start = performance.now();
      let wallOffset = Date.now() - performance.now();
      const lanes = { unguarded: new LaneRecorder(start), guarded: new LaneRecorder(start) };
      let ready = 0;
      let allReady: () => void = () => {};
      const readyPromise = new Promise<void>((resolve) => {
        allReady = resolve;
      });
      lanes.unguarded.fault = lanes.guarded.fault = [p.healthy, faultEnd];
      const openClients = { unguarded: 0, guarded: 0 };
      // Wall-clock dial times to the victim and first good call to it after its return, per lane.
      const dialTimes: Record<Lane, number[]> = { unguarded: [], guarded: [] };
      const okAfter: Record<Lane, number[]> = { unguarded: [], guarded: [] };
      let backAt = Number.POSITIVE_INFINITY;
      // Per guarded process: open windows of the victim's breaker, and the probes dialled in them.
      const probeCounts: Array<{ opens: number; probes: number }> = [];
      let phase = 'healthy';
      ctx.live({ total, elapsed: () => lanes.guarded.elapsed(), lanes, openBreakers: () => openClients.guarded, phase: () => phase });

      const done: Array<Promise<void>> = [];
      for (const lane of LANES) {
        for (let i = 0; i < PROCESSES; i++) {
          const config: RedisWorkerConfig = {
            lane,
            ports: servers.map((s) => s.port),
            watch: victim.port,
            perNode: PER_NODE,
            durationMs: total * 1_000,
            callTimeout: CALL_TIMEOUT,
            pause: PAUSE,
            connectTimeout: CONNECT_TIMEOUT,
          };
          const worker = fork(workerPath, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
          workers.push(worker);
          const slot = okAfter[lane].push(Number.NaN) - 1;
          const windows = { opens: 0, probes: 0 };
          if (lane === 'guarded') probeCounts.push(windows);
          done.push(
            followWorker<RedisWorkerReport>(worker, {
              lane,
              lanes,
              openClients,
              wallOffset: () => wallOffset,
              onReport: (r) => {
                if (r.ready === true) {
                  if (++ready === 2 * PROCESSES) allReady();
                  return false;
                }
                for (const [s, e, ok, watched] of r.calls) {
                  if (ok === 1 && watched === 1 && s >= backAt && Number.isNaN(okAfter[lane][slot]!)) okAfter[lane][slot] = e - backAt;
                }
                dialTimes[lane].push(...r.dials);
                windows.probes += r.probes ?? 0;
                for (const [open] of r.breaker) if (open === 1) windows.opens++;
                return true;
              },
            }),
          );
        }
      }
      // Every client of every process connected (bounded): then the clock starts, for all at once.
      ctx.log('redis: connecting the client processes');
      await Promise.race([readyPromise, wait(30_000)]);
      start = performance.now();
      wallOffset = Date.now() - performance.now();
      lanes.unguarded = new LaneRecorder(start);
      lanes.guarded = new LaneRecorder(start);
      lanes.unguarded.fault = lanes.guarded.fault = [p.healthy, faultEnd];
      for (const w of workers) w.send({ go: true });
      const at = (s: number): number => start + wallOffset + s * 1_000;
      await wait(p.healthy * 1_000);
      phase = 'node frozen';
      ctx.log(`redis: freezing ${victim.node} (SIGSTOP)`);
      await victim.freeze();
      await wait(at(p.healthy + p.frozen) - Date.now());
      phase = 'node killed, port refuses';
      ctx.log(`redis: killing ${victim.node} (SIGKILL); its port refuses`);
      await victim.kill();
      await wait(at(p.healthy + p.frozen + p.refused) - Date.now());
      phase = 'port dropped';
      ctx.log(`redis: dropping ${victim.node}'s port (SYNs vanish)`);
      dark = await blackhole({ port: victim.port });
      await wait(at(faultEnd) - Date.now());
      await dark.close();
      dark = undefined;
      phase = 'node back';
      ctx.log(`redis: ${victim.node} is back`);
      await victim.start();
      backAt = Date.now();
      await Promise.race([Promise.all(done), wait((p.after + 20) * 1_000)]);
      const duration = lanes.guarded.elapsed();

      const perS = (lane: Lane, from: number, to: number): number =>
        Number((dialTimes[lane].filter((t) => t >= at(from) && t < at(to)).length / (to - from)).toFixed(2));
      const byPhase = (from: number, to: number): { guarded: number; unguarded: number } => ({ guarded: perS('guarded', from, to), unguarded: perS('unguarded', from, to) });
      const recovery = (lane: Lane): number | null => {
        const all = okAfter[lane];
        return all.some((v) => Number.isNaN(v)) ? null : Math.round(Math.max(...all));
      };
      const t1 = p.healthy + p.frozen;
      const t2 = t1 + p.refused;
      return {
        name: 'redis',
        title: redisScenario.title,
        duration,
        fault: [p.healthy, faultEnd],
        faultLabel: `${victim.node} frozen, killed, port dropped`,
        lanes: { unguarded: lanes.unguarded.result(duration), guarded: lanes.guarded.result(duration) },
        extra: {
          recovery_ms: { guarded: recovery('guarded'), unguarded: recovery('unguarded') },
          dials_per_s_by_phase: { frozen: byPhase(p.healthy, t1), refused: byPhase(t1, t2), dropped: byPhase(t2, faultEnd) },
          processes_per_lane: PROCESSES,
          guarded_probes_per_open_window: Number(Math.max(...probeCounts.map((c) => (c.opens === 0 ? 0 : c.probes / c.opens))).toFixed(2)),
        },
        notes: [
          `${PROCESSES} client processes per lane; each has ${PER_NODE} node-redis and ${PER_NODE} ioredis clients per node, one GET loop each (${PAUSE} ms apart); a call unanswered in ${CALL_TIMEOUT} ms counts as failed`,
          `phases: healthy ${p.healthy} s, frozen ${p.frozen} s, killed and refusing ${p.refused} s, port dropped ${p.dropped} s, back ${p.after} s`,
          `guarded: one RedisGuard per process, connectTimeout ${CONNECT_TIMEOUT} ms, HostBreaker defaults (3 failed rounds over 1.5 s; window 1 s doubling to 30 s)`,
          'guarded_probes_per_open_window: dials a guarded process made while its breaker held the node open (probes), per window it opened; the worst process',
          'recovery_ms: from the node\'s return until every client process has had a GET from it answered (the slowest process)',
        ],
      };
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await dark?.close();
      await Promise.all(servers.map((s) => s.kill()));
    }
  },
};

/** A redis-server on a port that was free a moment ago; another port if that one was taken (5 tries). */
async function startOnFreePort(): Promise<RedisProcess> {
  let last: unknown;
  for (let i = 0; i < 5; i++) {
    try {
      return await new RedisProcess(await freePort()).start();
    } catch (err) {
      last = err;
    }
  }
  throw new Error(`redis-server did not start on a port of its own in 5 tries: ${String(last)}`);
}
