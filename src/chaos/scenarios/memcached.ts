/**
 * Chaos scenario "memcached storm" (seed 002): real memcached servers, several client processes
 * per lane, one node frozen with SIGSTOP. Counts the dials per second against the frozen node.
 *
 * memcached is Debian's package: see `ensureMemcached`. Where it can be neither found nor
 * installed, the scenario reports itself skipped with the reason.
 *
 * @module
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type MemcachedServer, ensureMemcached, startMemcached } from '../memcached/server.js';
import type { WorkerConfig, WorkerReport } from '../memcached/worker.js';
import { LaneRecorder } from '../recorder.js';
import { type Scenario, type ScenarioContext, type ScenarioResult, wait } from '../scenario.js';
import { followWorker, skippedResult } from './worker-lanes.js';

const CLIENTS = 4;
const LOOPS = 8;
const REQUEST_TIMEOUT = 100;
const CONNECT_TIMEOUT = 200;
const OPEN_BASE = 1_000;
const OPEN_MAX = 4_000;

const workerPath = fileURLToPath(new URL('../memcached/worker.js', import.meta.url));

export const memcachedStorm: Scenario = {
  name: 'memcached',
  title: 'A sick memcached node and a redial storm (seed 002)',
  story:
    `Three real memcached nodes serve ${CLIENTS} client processes per lane (${LOOPS} request loops each). One node is frozen ` +
    'with SIGSTOP: its kernel still accepts TCP, but nothing answers. Unguarded clients drop the connection on every ' +
    'timeout and redial at once; guarded ones dial through a ConnectionPool whose handshake and keep-alive notice the ' +
    'silence, and whose breaker backs off (1 s doubling to 4 s, ±50 %).',
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const healthy = ctx.quick ? 1 : 3;
    const faultFor = ctx.quick ? 6 : 12;
    const after = ctx.quick ? 2 : 4;
    const total = healthy + faultFor + after;
    const missing = ensureMemcached(ctx.log);
    if (missing !== undefined) {
      ctx.log(`memcached: SKIPPED: ${missing}`);
      return skippedResult('memcached', memcachedStorm.title, missing);
    }

    const servers: MemcachedServer[] = [];
    const workers: ChildProcess[] = [];
    try {
      for (let i = 0; i < 3; i++) servers.push(await startMemcached());
      const nodes = servers.map((s) => s.node);
      const frozen = servers[1]!;
      const start = performance.now();
      const wallOffset = Date.now() - performance.now();
      const lanes = { unguarded: new LaneRecorder(start), guarded: new LaneRecorder(start) };
      lanes.unguarded.fault = lanes.guarded.fault = [healthy, healthy + faultFor];
      const openClients = { unguarded: 0, guarded: 0 };
      let phase = 'healthy';
      ctx.live({ total, elapsed: () => lanes.guarded.elapsed(), lanes, openBreakers: () => openClients.guarded, phase: () => phase });

      const done: Array<Promise<void>> = [];
      for (const lane of ['unguarded', 'guarded'] as const) {
        for (let i = 0; i < CLIENTS; i++) {
          const config: WorkerConfig = {
            lane,
            nodes,
            watch: frozen.node,
            loops: LOOPS,
            durationMs: total * 1_000,
            requestTimeout: REQUEST_TIMEOUT,
            connectTimeout: CONNECT_TIMEOUT,
            openBase: OPEN_BASE,
            openMax: OPEN_MAX,
          };
          const worker = fork(workerPath, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
          workers.push(worker);
          done.push(followWorker<WorkerReport>(worker, { lane, lanes, openClients, wallOffset: () => wallOffset }));
        }
      }
      await wait(healthy * 1_000);
      phase = 'node frozen';
      ctx.log(`memcached: freezing ${frozen.node} (SIGSTOP)`);
      await frozen.freeze();
      await wait(faultFor * 1_000);
      phase = 'node thawed';
      ctx.log(`memcached: thawing ${frozen.node} (SIGCONT)`);
      await frozen.thaw();
      await Promise.race([Promise.all(done), wait((after + 20) * 1_000)]);
      const duration = lanes.guarded.elapsed();
      return {
        name: 'memcached',
        title: memcachedStorm.title,
        duration,
        fault: [healthy, healthy + faultFor],
        faultLabel: `${frozen.node} frozen (SIGSTOP)`,
        lanes: { unguarded: lanes.unguarded.result(duration), guarded: lanes.guarded.result(duration) },
        notes: [
          `${CLIENTS} client processes per lane, ${LOOPS} loops each, request timeout ${REQUEST_TIMEOUT} ms`,
          `guarded: connect + version handshake ${CONNECT_TIMEOUT} ms, keep-alive 1 s, breaker 3 failures, open ${OPEN_BASE / 1_000}-${OPEN_MAX / 1_000} s ±50 %`,
          `bound for the guarded lane: ${CLIENTS} clients / open window ≈ ${CLIENTS / (OPEN_BASE / 1_000)}-${CLIENTS / (OPEN_MAX / 1_000)} dials/s once open`,
        ],
      };
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await Promise.all(servers.map((s) => s.stop()));
    }
  },
};
