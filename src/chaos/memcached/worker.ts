/**
 * One memcached client process of the storm scenario. Started by the scenario with `fork`, it
 * runs `loops` request loops against the nodes for `durationMs` and reports over IPC: each call
 * (wall-clock start and end, ok), each dial to the watched node, and breaker changes for it.
 *
 * @module
 */
import { HostBreaker } from '../../guard/host-breaker.js';
import { proportionalJitter } from '../../core/backoff.js';
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

/** One IPC report: batched since the last one. */
export interface WorkerReport {
  calls: Array<[start: number, end: number, ok: 0 | 1]>;
  dials: number[];
  /** Dials to any node since the last report. */
  opened: number;
  breaker: Array<[open: 0 | 1, at: number]>;
  done?: { lost: number; double: number };
}

async function main(config: WorkerConfig): Promise<void> {
  const send = (r: WorkerReport): Promise<void> => new Promise((resolve) => process.send!(r, () => resolve()));
  let batch: WorkerReport = { calls: [], dials: [], opened: 0, breaker: [] };
  const onDial = (node: string): void => {
    batch.opened++;
    if (node === config.watch) batch.dials.push(Date.now());
  };
  let client: NaiveMemcached | GuardedMemcached;
  if (config.lane === 'guarded') {
    const breaker = new HostBreaker({
      failureThreshold: 3,
      openDuration: proportionalJitter({ base: config.openBase, max: config.openMax }),
    });
    breaker.on('opened', (e) => e.host === config.watch && batch.breaker.push([1, Date.now()]));
    breaker.on('closed', (e) => e.host === config.watch && batch.breaker.push([0, Date.now()]));
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
  const flush = setInterval(() => {
    const out = batch;
    batch = { calls: [], dials: [], opened: 0, breaker: [] };
    void send(out);
  }, 200);

  const until = Date.now() + config.durationMs;
  let started = 0;
  let settled = 0;
  let double = 0;
  await Promise.all(
    Array.from({ length: config.loops }, async (_, loop) => {
      for (let i = 0; Date.now() < until; i++) {
        const node = config.nodes[(loop + i) % config.nodes.length]!;
        const t0 = Date.now();
        started++;
        let count = 0;
        const settle = (ok: 0 | 1): void => {
          if (++count > 1) {
            double++;
            return;
          }
          settled++;
          batch.calls.push([t0, Date.now(), ok]);
        };
        await client.get(node, `key-${loop}-${i % 100}`).then(
          () => settle(1),
          () => settle(0),
        );
        await new Promise((r) => setImmediate(r)); // a refusal settles in microtasks: let timers run
      }
    }),
  );
  clearInterval(flush);
  await client.close();
  await send({ ...batch, done: { lost: started - settled, double } });
  process.exit(0);
}

if (process.send !== undefined && process.argv[2] !== undefined) {
  main(JSON.parse(process.argv[2]) as WorkerConfig).catch((err: unknown) => {
    process.stderr.write(`memcached worker failed: ${String(err)}\n`);
    process.exit(1);
  });
}
