/**
 * One client process of the redis chaos scenario. Started by the scenario with `fork`, it opens
 * `perNode` node-redis and `perNode` ioredis clients to every node (default settings, or the same
 * through one {@link RedisGuard} per process), runs one GET loop per client for `durationMs`, and
 * reports over IPC: each call (wall-clock start and end, ok, whether it went to the watched node),
 * each dial to the watched node, and breaker changes for it.
 *
 * Dials are counted where they leave: node-redis's resolver (called once per TCP attempt) and
 * ioredis's connector (called once per connect); the guard's gate sits in front of both, so a
 * refused dial is not counted.
 *
 * @module
 */
import type net from 'node:net';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedisGuard } from '../../adapters/redis/index.js';
import { HostBreaker } from '../../guard/host-breaker.js';
import { type WorkerReportBase, Reporter, runCallLoops, runWhenForked } from '../worker-loop.js';

/** What the scenario passes (as JSON in argv[2]). */
export interface RedisWorkerConfig {
  lane: 'guarded' | 'unguarded';
  /** Ports of the nodes on 127.0.0.1 (dialled by the name `localhost`, resolved to 127.0.0.1). */
  ports: number[];
  /** The port whose dials and breaker state are reported. */
  watch: number;
  /** Clients of each kind (node-redis, ioredis) per node. */
  perNode: number;
  durationMs: number;
  /** A call not answered within this many ms counts as failed (the clients have no reply timeout). */
  callTimeout: number;
  /** Pause between one loop's calls, ms. */
  pause: number;
  /** The guard's connectTimeout, ms (guarded lane only). */
  connectTimeout: number;
}

/** One IPC report: batched since the last one. Calls are `[start, end, ok, watched]`. */
export interface RedisWorkerReport extends WorkerReportBase<[start: number, end: number, ok: 0 | 1, watched: 0 | 1]> {
  /** Guarded lane: dials to the watched node the breaker let through as a probe (it was not closed). */
  probes?: number;
  /** Sent once, when every client has answered a PING (or 10 s passed): the worker then waits for {@link RedisWorkerGo}. */
  ready?: true;
}

/** The parent's word to start the loops, once every process is ready. */
export interface RedisWorkerGo {
  go: true;
}

interface AnyClient {
  get(key: string): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * Runs one worker: connects its clients, reports `ready`, waits for `go`, runs the loops for
 * `durationMs`, closes every client and resolves after the last report (`done`). The forked
 * process wraps it; tests call it in-process.
 */
export async function runRedisWorker(config: RedisWorkerConfig, send: (r: RedisWorkerReport) => Promise<void>, go: Promise<unknown>): Promise<void> {
  const report = new Reporter<RedisWorkerReport>(send);
  let breaker: HostBreaker | undefined;
  const watchKey = `localhost:${config.watch}`;
  const onDial = (port: number): void => {
    report.batch.opened++;
    if (port !== config.watch) return;
    report.batch.dials.push(Date.now());
    if (breaker !== undefined && (breaker.state(watchKey)?.state ?? 'closed') !== 'closed') report.batch.probes = (report.batch.probes ?? 0) + 1;
  };
  const lookupFor = (port: number): net.LookupFunction =>
    ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
      onDial(port);
      if (opts?.all === true) cb(null, [{ address: '127.0.0.1', family: 4 }]);
      else cb(null, '127.0.0.1', 4);
    }) as unknown as net.LookupFunction;
  type Connector = new (options: unknown) => { connect(emitter: unknown): Promise<unknown> };
  const Base = (new Redis({ lazyConnect: true }) as unknown as { connector: { constructor: Connector } }).connector.constructor;
  class CountingConnector extends Base {
    readonly #port: number;
    constructor(options: unknown) {
      super(options);
      this.#port = (options as { port: number }).port;
    }
    override connect(emitter: unknown): Promise<unknown> {
      onDial(this.#port);
      return super.connect(emitter);
    }
  }

  let guard: RedisGuard | undefined;
  if (config.lane === 'guarded') {
    breaker = new HostBreaker(); // every default: 3 failed rounds over 1.5 s, adaptive window
    breaker.on('opened', (e) => e.host === watchKey && report.batch.breaker.push([1, Date.now()]));
    breaker.on('closed', (e) => e.host === watchKey && report.batch.breaker.push([0, Date.now()]));
    guard = new RedisGuard({ breaker, connectTimeout: config.connectTimeout });
  }
  const clients: Array<{ client: AnyClient; port: number; close: () => void }> = [];
  for (const port of config.ports) {
    for (let i = 0; i < config.perNode; i++) {
      const nrOptions = { socket: { host: 'localhost', port, lookup: lookupFor(port) } };
      const nr = guard === undefined ? createClient(nrOptions as never) : guard.nodeRedis(createClient, nrOptions);
      nr.on('error', () => {});
      nr.connect().catch(() => {});
      clients.push({ client: nr as unknown as AnyClient, port, close: () => void (nr.isOpen ? nr.destroy() : undefined) });
      const ioOptions = { host: 'localhost', port, family: 4, Connector: CountingConnector };
      const io = guard === undefined ? new Redis(ioOptions as never) : guard.ioredis(Redis, ioOptions);
      io.on('error', () => {});
      clients.push({ client: io as unknown as AnyClient, port, close: () => io.disconnect() });
    }
  }

  // Connected before the clock starts: a process slow to start must not dial during the fault.
  const readyBy = Date.now() + 10_000;
  await Promise.all(
    clients.map(async ({ client }) => {
      while (Date.now() < readyBy) {
        const ok = await Promise.race([(client as unknown as { ping(): Promise<unknown> }).ping().then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), 250))]);
        if (ok) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    }),
  );
  report.batch.opened = 0;
  report.batch.dials = [];
  await send({ calls: [], dials: [], opened: 0, breaker: [], ready: true });
  await go;

  report.start();
  const done = await runCallLoops({
    loops: clients.length,
    durationMs: config.durationMs,
    call: (n, i) => withDeadline(clients[n]!.client.get(`key-${n}-${i % 100}`), config.callTimeout),
    record: (n, start, end, ok) => report.batch.calls.push([start, end, ok, clients[n]!.port === config.watch ? 1 : 0]),
    pause: () => new Promise((r) => setTimeout(r, config.pause)),
  });
  for (const c of clients) c.close();
  await report.finish(done);
}

/** `p`, or a rejection once `ms` have passed without it settling (the timer is cleared either way). */
function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no reply in time')), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

runWhenForked(import.meta.url, 'redis worker', runRedisWorker);
