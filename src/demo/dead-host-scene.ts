/**
 * Demo scene, seed 000: a proxy pod is gone, and every request naming it pays for that.
 *
 * Two lanes side by side, each with its own blackholed host on loopback: an unguarded client
 * (Node's `net.connect` with the timeout applied by hand) and a guarded one (dialguard's
 * `connect` behind a HostBreaker). Each serves the same requests, 6 attempts apiece as the
 * seed's worker did. Then each host comes back: the unguarded client notices on its next
 * request; the guarded one after its open window, with exactly one probe dial.
 *
 * @module
 */
import { isPermanent } from '../core/errors.js';
import { connect } from '../guard/connect.js';
import { HostBreaker } from '../guard/host-breaker.js';
import { blackhole } from '../testing/blackhole.js';
import { type Row, fmt } from '../cli/table.js';
import { UnguardedDialer, attemptRequest } from './unguarded.js';

/** Knobs of the scene (the defaults keep it near 15 s). */
export interface DeadHostSceneOptions {
  /** Connect timeout, ms. Default 500. */
  timeout?: number;
  /** Requests made while the host is dead. Default 4. */
  requests?: number;
  /** Breaker open window, ms. Default 4 000. */
  openDuration?: number;
  /** Where progress lines go. */
  log?: (line: string) => void;
}

/** What the scene measured, per lane. */
export interface DeadHostSceneResult {
  rows: Row[];
  unguarded: LaneResult;
  guarded: LaneResult;
}

interface LaneResult {
  /** Per request while the host was dead: milliseconds and dials. */
  requests: Array<{ ms: number; dials: number }>;
  /** Time from the host coming back to the first request that got through, ms. */
  resumeMs: number;
  /** Dials made after the host came back, up to and including the one that got through. */
  resumeDials: number;
}

const ATTEMPTS = 6;

/** Runs the scene and returns its table rows. */
export async function deadHostScene(options: DeadHostSceneOptions = {}): Promise<DeadHostSceneResult> {
  const timeout = options.timeout ?? 500;
  const requests = options.requests ?? 4;
  const openDuration = options.openDuration ?? 4_000;
  const log = options.log ?? (() => {});

  const rawPeer = await blackhole();
  const guardedPeer = await blackhole();
  try {
    const raw = new UnguardedDialer(timeout);
    const breaker = new HostBreaker({ failureThreshold: 3, openDuration });
    breaker.on('opened', (e) => log(`[guarded]   breaker opened for ${e.host} after ${e.failures} failed dials: refusing for ${fmt(e.openFor / 1_000)} s`));
    breaker.on('probe-granted', (e) => log(`[guarded]   window over: one probe dial to ${e.host}`));
    breaker.on('closed', (e) => log(`[guarded]   probe connected: ${e.host} is back, traffic resumes`));
    const guardedDials = (): number => {
      const s = breaker.stats();
      return s.succeeded + s.failed + s.abandoned + s.stale;
    };

    const lane = async (
      name: string,
      dialOnce: () => ReturnType<typeof connect>,
      dials: () => number,
      heal: () => Promise<void>,
      healAfterMs: number,
    ): Promise<LaneResult> => {
      const result: LaneResult = { requests: [], resumeMs: Number.NaN, resumeDials: 0 };
      const started = performance.now();
      for (let i = 1; i <= requests; i++) {
        const d0 = dials();
        const t0 = performance.now();
        const { tries } = await attemptRequest(dialOnce, ATTEMPTS, isPermanent);
        const ms = performance.now() - t0;
        result.requests.push({ ms, dials: dials() - d0 });
        log(`[${name}] request ${i}: failed after ${tries} attempt(s), ${dials() - d0} dial(s), ${fmtMs(ms)}`);
      }
      const wait = healAfterMs - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await heal();
      log(`[${name}] the host is back`);
      const healed = performance.now();
      const d0 = dials();
      for (let i = 0; i < 200; i++) {
        const { ok } = await attemptRequest(dialOnce, 1, () => true);
        if (ok) {
          result.resumeMs = performance.now() - healed;
          result.resumeDials = dials() - d0;
          log(`[${name}] a request got through ${fmtMs(result.resumeMs)} after the host came back`);
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return result;
    };

    log(`two lanes, ${requests} requests each, ${ATTEMPTS} attempts per request, connect timeout ${timeout} ms`);
    const [unguarded, guarded] = await Promise.all([
      lane('unguarded', () => raw.connect(rawPeer.host, rawPeer.port), () => raw.dials, () => rawPeer.heal(), 0),
      lane(
        'guarded',
        () => connect({ host: guardedPeer.host, port: guardedPeer.port }, { timeout, breaker }),
        guardedDials,
        () => guardedPeer.heal(),
        ATTEMPTS * timeout, // comes back soon after the trip, while the breaker is still open
      ),
    ]);

    const sum = (l: LaneResult, k: 'ms' | 'dials'): number => l.requests.reduce((a, r) => a + r[k], 0);
    const later = (l: LaneResult): Array<{ ms: number; dials: number }> => l.requests.slice(1);
    const avg = (xs: Array<{ ms: number }>): number => xs.reduce((a, r) => a + r.ms, 0) / Math.max(1, xs.length);
    const rows: Row[] = [
      { '': 'request 1', unguarded: `${fmtMs(unguarded.requests[0]!.ms)}, ${unguarded.requests[0]!.dials} dials`, guarded: `${fmtMs(guarded.requests[0]!.ms)}, ${guarded.requests[0]!.dials} dials` },
      {
        '': `requests 2..${requests} (each)`,
        unguarded: `${fmtMs(avg(later(unguarded)))}, ${later(unguarded)[0]?.dials ?? 0} dials`,
        guarded: `${fmtMs(avg(later(guarded)))}, ${later(guarded)[0]?.dials ?? 0} dials`,
      },
      { '': 'worker slot held, all requests', unguarded: fmtMs(sum(unguarded, 'ms')), guarded: fmtMs(sum(guarded, 'ms')) },
      { '': 'dials to the dead host', unguarded: sum(unguarded, 'dials'), guarded: sum(guarded, 'dials') },
      {
        '': 'host back: first success after',
        unguarded: `${fmtMs(unguarded.resumeMs)} (${unguarded.resumeDials} dial)`,
        guarded: `${fmtMs(guarded.resumeMs)} (${guarded.resumeDials} probe dial)`,
      },
    ];
    return { rows, unguarded, guarded };
  } finally {
    await Promise.all([rawPeer.close(), guardedPeer.close()]);
  }
}

/** `1.50 s`, `12 ms`, `8 µs`. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'never';
  if (ms >= 1_000) return `${(ms / 1_000).toFixed(2)} s`;
  if (ms >= 1) return `${fmt(ms)} ms`;
  return `${fmt(ms * 1_000)} µs`;
}
