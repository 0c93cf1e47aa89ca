/**
 * Demo scene, seed 003: a gRPC peer was killed and every request queued on its cached
 * connection stalled for ~120 s.
 *
 * An HTTP/2 peer serves both clients, then dies and its address goes dark (a blackhole on the same
 * port, as when a pod's IP stops routing). Requests keep arriving. The raw `node:http2` client
 * queues them behind a new connect with no timeout: they wait for the kernel (~130 s; the scene
 * stops watching after a cap). The guarded client shares one bounded dial among all of them,
 * releases them together at one connect timeout, stops dialling once the breaker opens, and
 * resumes with one probe when the peer is back.
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import { HostBreaker } from '../guard/host-breaker.js';
import { Http2Client } from '../http2/client.js';
import { blackhole } from '../testing/blackhole.js';
import { http2Peer } from '../testing/http2-peer.js';
import type { Row } from '../cli/table.js';
import { fmtMs } from './dead-host-scene.js';
import { NaiveHttp2Client } from './naive-http2.js';

/** Knobs of the scene. */
export interface DeadConnectionSceneOptions {
  /** Requests queued in each wave. Default 64. */
  requests?: number;
  /** Connect timeout of the guarded client, ms. Default 1 000. */
  connectTimeout?: number;
  /** How long the scene watches the raw client before giving up on it, ms. Default 8 000. */
  rawCap?: number;
  log?: (line: string) => void;
}

/** Runs the scene and returns its table rows. */
export async function deadConnectionScene(options: DeadConnectionSceneOptions = {}): Promise<{ rows: Row[] }> {
  const n = options.requests ?? 64;
  const connectTimeout = options.connectTimeout ?? 1_000;
  const rawCap = options.rawCap ?? 8_000;
  const log = options.log ?? (() => {});

  const peer = await http2Peer();
  const url = `${peer.origin}/`;
  const breaker = new HostBreaker({ failureThreshold: 3, openDuration: 3_000 });
  const guarded = new Http2Client({ connectTimeout, breaker });
  const raw = new NaiveHttp2Client();
  breaker.on('opened', () => log(`[guarded] breaker opened: later requests refused without dialling`));
  breaker.on('closed', () => log(`[guarded] probe connected: the peer is back`));
  try {
    await Promise.all([guarded.request(url), raw.request(url)]);
    log(`both clients have a warm session to ${peer.address}`);
    const port = peer.port;
    await peer.kill();
    const dark = await blackhole({ port });
    log(`the peer is killed and its address goes dark; ${n} requests arrive at each client`);

    const rawController = new AbortController();
    setMaxListeners(0, rawController.signal); // one listener per queued request
    const rawStart = performance.now();
    let rawSettled = 0;
    const rawWave = Promise.all(
      Array.from({ length: n }, () =>
        raw.request(url, { signal: rawController.signal }).then(
          () => rawSettled++,
          () => rawSettled++,
        ),
      ),
    );
    const waves: Array<{ ms: number; dials: number; code: string }> = [];
    for (let w = 1; w <= 4; w++) {
      const dials0 = breaker.stats().failed + breaker.stats().succeeded;
      const t0 = performance.now();
      const results = await Promise.allSettled(Array.from({ length: n }, () => guarded.request(url)));
      const ms = performance.now() - t0;
      const first = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      const code = (first?.reason as { code?: string } | undefined)?.code ?? 'ok';
      const dials = breaker.stats().failed + breaker.stats().succeeded - dials0;
      waves.push({ ms, dials, code });
      log(`[guarded] wave ${w}: all ${n} released in ${fmtMs(ms)} (${code}), ${dials} dial(s)`);
    }
    const ticker = setInterval(() => {
      log(`[raw]     ${n - rawSettled} of ${n} still waiting after ${fmtMs(performance.now() - rawStart)}`);
    }, 2_000);
    const rawDone = await Promise.race([rawWave.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), rawCap - (performance.now() - rawStart)))]);
    clearInterval(ticker);
    const rawMs = performance.now() - rawStart;
    const rawWaiting = n - rawSettled;
    log(rawDone ? `[raw]     all settled after ${fmtMs(rawMs)}` : `[raw]     ${rawWaiting} still waiting after ${fmtMs(rawMs)}: the scene stops watching`);
    rawController.abort(new Error('scene over'));
    await rawWave;

    await dark.close();
    await peer.listen();
    log('the peer is back on the same port');
    const back0 = performance.now();
    let backMs = Number.NaN;
    for (let i = 0; i < 100; i++) {
      try {
        await guarded.request(url);
        backMs = performance.now() - back0;
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    log(`[guarded] first success ${fmtMs(backMs)} after the peer came back`);
    const rows: Row[] = [
      {
        '': `${n} requests after the peer died`,
        'raw node:http2': rawDone ? fmtMs(rawMs) : `> ${fmtMs(rawMs)} (${rawWaiting} still waiting; the kernel gives up after ~130 s)`,
        guarded: `${fmtMs(waves[0]!.ms)} (${waves[0]!.code}, ${waves[0]!.dials} dial)`,
      },
      {
        '': 'next waves',
        'raw node:http2': 'would queue behind the same connect',
        guarded: waves
          .slice(1)
          .map((w) => `${fmtMs(w.ms)}/${w.dials} dial`)
          .join(', '),
      },
      { '': 'peer back: first success after', 'raw node:http2': '', guarded: fmtMs(backMs) },
    ];
    return { rows };
  } finally {
    raw.close();
    await guarded.close();
    await peer.close();
  }
}
