/**
 * Demo scene: Node's own `fetch()` against an origin that has gone dark (issue 5), as it is and
 * with dialguard's GuardedAgent as its dispatcher.
 *
 * Two lanes side by side, each with its own blackholed origin on loopback. The raw lane is
 * `fetch(url, { signal: AbortSignal.timeout(t) })`, the careful way to call it today; the guarded
 * lane is `fetch(url, { dispatcher: new GuardedAgent({ connectTimeout: t }) })`, three attempts
 * and a breaker that opens after three failed dials. Each lane makes the same fetches, one after
 * another; dials are counted on undici's own diagnostics channel. Then each origin comes back as
 * a real HTTP server: the raw lane notices on its next fetch; the guarded one after its open
 * window, with exactly one probe dial.
 *
 * undici is an optional peer dependency: the guarded lane loads the adapter when the scene runs,
 * so the rest of the demo works without it.
 *
 * @module
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import type { GuardedAgent } from '../adapters/undici/index.js';
import { type Row, fmt } from '../cli/table.js';
import { HostBreaker } from '../guard/host-breaker.js';
import { blackhole } from '../testing/blackhole.js';
import { fmtMs } from './dead-host-scene.js';

/** Knobs of the scene (the defaults keep it near 10 s). */
export interface FetchSceneOptions {
  /** The raw lane's per-fetch timeout and the guarded lane's connect timeout, ms. Default 500. */
  timeout?: number;
  /** Fetches made while the origin is dark. Default 8. */
  requests?: number;
  /** The guarded lane's breaker window, ms. Default 4 000. */
  openDuration?: number;
  /** Where progress lines go. */
  log?: (line: string) => void;
}

/** What one lane measured. */
export interface FetchLaneResult {
  /** Per request while the origin was dark: milliseconds, dials, and what fetch rejected with. */
  requests: Array<{ ms: number; dials: number; error: string }>;
  /** From the origin coming back to the first request that got a response, ms. */
  resumeMs: number;
  /** Dials made after the origin came back, up to and including the one that got through. */
  resumeDials: number;
}

/** What the scene measured. */
export interface FetchSceneResult {
  rows: Row[];
  raw: FetchLaneResult;
  guarded: FetchLaneResult;
}

/** `TypeError: fetch failed` hides the real error in `cause`; name it. */
function describe(err: unknown): string {
  const cause = err instanceof TypeError && err.cause !== undefined ? err.cause : err;
  if (typeof cause !== 'object' || cause === null) return String(cause);
  const c = cause as { name?: string; code?: unknown; errors?: unknown[] };
  if (c.code === 'DIALGUARD_RETRIES_EXHAUSTED' && Array.isArray(c.errors)) return `${c.errors.length} attempts, each ${describe(c.errors[0])}`;
  // The undici adapter fails with the last attempt's own error, its retries attached (retriesOf).
  const story = (cause as Record<symbol, { errors?: unknown[] } | undefined>)[Symbol.for('dialguard.undici.retries')];
  if (Array.isArray(story?.errors)) return `${story.errors.length} attempts, each ${describe(story.errors[0])}`;
  return typeof c.code === 'string' ? `${c.name} (${c.code})` : String(c.name);
}

/** An HTTP server on `port` of loopback: the origin, back. */
async function httpOn(port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    res.end('back');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => resolve());
  });
  return server;
}

async function closeServer(server: http.Server | undefined): Promise<void> {
  if (server === undefined) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The adapter, loaded when the scene runs (undici is an optional peer dependency). */
async function loadAdapter(): Promise<typeof import('../adapters/undici/index.js')> {
  try {
    return await import('../adapters/undici/index.js');
  } catch (err) {
    throw new Error(`the fetch scene needs undici, an optional peer dependency of dialguard (npm install undici): ${String(err)}`);
  }
}

/** Counts the connects undici starts to `port` (Node's bundled undici and the npm one both report them). */
function countDials(): { to: (port: number) => number; stop: () => void } {
  const byPort = new Map<number, number>();
  const onConnect = (message: unknown): void => {
    const port = Number((message as { connectParams?: { port?: unknown } }).connectParams?.port);
    byPort.set(port, (byPort.get(port) ?? 0) + 1);
  };
  diagnosticsChannel.subscribe('undici:client:beforeConnect', onConnect);
  return {
    to: (port) => byPort.get(port) ?? 0,
    stop: () => diagnosticsChannel.unsubscribe('undici:client:beforeConnect', onConnect),
  };
}

/** Runs the scene and returns its table rows. */
export async function fetchScene(options: FetchSceneOptions = {}): Promise<FetchSceneResult> {
  const timeout = options.timeout ?? 500;
  const requests = options.requests ?? 8;
  const openDuration = options.openDuration ?? 4_000;
  const log = options.log ?? (() => {});

  const adapter = await loadAdapter();
  const breaker = new HostBreaker({ failureThreshold: 3, openDuration });
  const guarded: GuardedAgent = new adapter.GuardedAgent({ breaker, connectTimeout: timeout, budget: null });
  // Node's fetch types `dispatcher` with its bundled undici's types; it takes a GuardedAgent as is.
  const viaGuard = { dispatcher: guarded as unknown as RequestInit['dispatcher'] };
  breaker.on('opened', (e) => log(`[guarded] breaker opened for ${e.host} after ${e.failures} failed dials: refusing for ${fmt(e.openFor / 1_000)} s`));
  breaker.on('probe-granted', (e) => log(`[guarded] window over: one probe dial to ${e.host}`));
  breaker.on('closed', (e) => log(`[guarded] probe connected: ${e.host} is back, traffic resumes`));
  const dials = countDials();
  const rawHole = await blackhole();
  const guardedHole = await blackhole();
  const servers: Array<http.Server | undefined> = [];
  try {
    const lane = async (name: string, init: () => RequestInit, hole: typeof rawHole, healAfterMs: number): Promise<FetchLaneResult> => {
      const url = `http://${hole.address}/`;
      const port = hole.port;
      const dialed = (): number => dials.to(port);
      const result: FetchLaneResult = { requests: [], resumeMs: Number.NaN, resumeDials: 0 };
      const started = performance.now();
      for (let i = 1; i <= requests; i++) {
        const d0 = dialed();
        const t0 = performance.now();
        const error = await fetch(url, init()).then(
          () => 'none',
          (err: unknown) => describe(err),
        );
        const ms = performance.now() - t0;
        result.requests.push({ ms, dials: dialed() - d0, error });
        log(`[${name}] fetch ${i}: failed in ${fmtMs(ms)} after ${dialed() - d0} dial(s): ${error}`);
      }
      const wait = healAfterMs - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await hole.close();
      servers.push(await httpOn(port));
      log(`[${name}] the origin is back`);
      const healed = performance.now();
      const d0 = dialed();
      for (let i = 0; i < 200; i++) {
        const ok = await fetch(url, init()).then(
          async (res) => (await res.text()) === 'back',
          () => false,
        );
        if (ok) {
          result.resumeMs = performance.now() - healed;
          result.resumeDials = dialed() - d0;
          log(`[${name}] a fetch got through ${fmtMs(result.resumeMs)} after the origin came back`);
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return result;
    };

    log(`two lanes, ${requests} fetches each: AbortSignal.timeout(${timeout}) vs a GuardedAgent with a ${timeout} ms connect timeout`);
    const [rawLane, guardedLane] = await Promise.all([
      lane('raw    ', () => ({ signal: AbortSignal.timeout(timeout) }), rawHole, 0),
      lane('guarded', () => viaGuard, guardedHole, 3 * timeout + 500), // back while the window is open
    ]);

    const later = (l: FetchLaneResult): Array<{ ms: number; dials: number; error: string }> => l.requests.slice(1);
    const median = (xs: Array<{ ms: number }>): number => {
      const sorted = xs.map((x) => x.ms).sort((a, b) => a - b);
      return sorted.length === 0 ? Number.NaN : sorted[sorted.length >> 1]!;
    };
    const sum = (l: FetchLaneResult, k: 'ms' | 'dials'): number => l.requests.reduce((a, r) => a + r[k], 0);
    const rows: Row[] = [
      { '': 'fetch 1', 'raw fetch': `${fmtMs(rawLane.requests[0]!.ms)}, ${rawLane.requests[0]!.dials} dial`, guarded: `${fmtMs(guardedLane.requests[0]!.ms)}, ${guardedLane.requests[0]!.dials} dials` },
      {
        '': `fetches 2..${requests} (each, median)`,
        'raw fetch': `${fmtMs(median(later(rawLane)))}, ${later(rawLane)[0]?.dials ?? 0} dial`,
        guarded: `${fmtMs(median(later(guardedLane)))}, ${later(guardedLane)[0]?.dials ?? 0} dials`,
      },
      { '': 'what fetch rejects with (later)', 'raw fetch': later(rawLane)[0]?.error ?? '', guarded: later(guardedLane)[0]?.error ?? '' },
      { '': 'time spent on the dead origin', 'raw fetch': fmtMs(sum(rawLane, 'ms')), guarded: fmtMs(sum(guardedLane, 'ms')) },
      { '': 'dials to the dead origin', 'raw fetch': sum(rawLane, 'dials'), guarded: sum(guardedLane, 'dials') },
      {
        '': 'origin back: first response after',
        'raw fetch': `${fmtMs(rawLane.resumeMs)} (${rawLane.resumeDials} dial)`,
        guarded: `${fmtMs(guardedLane.resumeMs)} (${guardedLane.resumeDials} probe dial)`,
      },
    ];
    return { rows, raw: rawLane, guarded: guardedLane };
  } finally {
    dials.stop();
    await guarded.destroy();
    await Promise.all([rawHole.close(), guardedHole.close()]);
    await Promise.all(servers.map(closeServer));
  }
}
