/**
 * One memcached client process of the storm scenario. Started by the scenario with `fork`, it
 * runs `loops` request loops against the nodes for `durationMs` and reports over IPC: each call
 * (wall-clock start and end, ok), each dial to the watched node, and breaker changes for it.
 *
 * @module
 */
import { HostBreaker } from '../../guard/host-breaker.js';
import { proportionalJitter } from '../../core/backoff.js';
import { type WorkerReportBase, Reporter, runCallLoops, runWhenForked } from '../worker-loop.js';
import { GuardedMemcached, NaiveMemcached } from './clients.js';

/** What the scenario passes (as JSON in argv[2]). */
export interface WorkerConfig {
  lane: 'guarded' | 'unguarded';
  nodes: string[];
  /** The node whose dials and breaker state are reported. */
  watch: string;
  loops: number;
  durationMs: number;
  requestTimeout: number;
  connectTimeout: number;
  openBase: number;
  openMax: number;
}

/** One IPC report: batched since the last one. Calls are `[start, end, ok]`. */
export type WorkerReport = WorkerReportBase<[start: number, end: number, ok: 0 | 1]>;

/** Runs one worker for `durationMs`, closes its client and resolves after the last report (`done`). */
async function runMemcachedWorker(config: WorkerConfig, send: (r: WorkerReport) => Promise<void>): Promise<void> {
  const report = new Reporter<WorkerReport>(send);
  const onDial = (node: string): void => {
    report.batch.opened++;
    if (node === config.watch) report.batch.dials.push(Date.now());
  };
  let client: NaiveMemcached | GuardedMemcached;
  if (config.lane === 'guarded') {
    const breaker = new HostBreaker({
      failureThreshold: 3,
      openDuration: proportionalJitter({ base: config.openBase, max: config.openMax }),
    });
    breaker.on('opened', (e) => e.host === config.watch && report.batch.breaker.push([1, Date.now()]));
    breaker.on('closed', (e) => e.host === config.watch && report.batch.breaker.push([0, Date.now()]));
    client = new GuardedMemcached({
      breaker,
      requestTimeout: config.requestTimeout,
      connectTimeout: config.connectTimeout,
      keepAlive: 1_000,
      onDial,
    });
  } else {
    client = new NaiveMemcached({ requestTimeout: config.requestTimeout, onDial });
  }
  report.start();
  const done = await runCallLoops({
    loops: config.loops,
    durationMs: config.durationMs,
    call: (loop, i) => client.get(config.nodes[(loop + i) % config.nodes.length]!, `key-${loop}-${i % 100}`),
    record: (_loop, start, end, ok) => report.batch.calls.push([start, end, ok]),
    pause: () => new Promise((r) => setImmediate(r)), // a refusal settles in microtasks: let timers run
  });
  report.stop();
  await client.close();
  await report.finish(done);
}

runWhenForked(import.meta.url, 'memcached worker', runMemcachedWorker);
