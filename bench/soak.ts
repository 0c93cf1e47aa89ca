/**
 * bench/soak: a bounded soak. The ConnectionPool (directly, over a line-echo protocol), the
 * HTTP/2 client and the undici adapter run at load for `--seconds` (default 120) while their peers
 * are killed and restarted, blackholed, made silent and reset, one fault every 2.5 s.
 *
 *   node dist/bench/soak.js [--seconds N] [--quick]
 *
 * It fails (exit 1) unless: every call settled exactly once (a result or a typed error), no
 * promise rejection went unhandled, nothing (socket, server, session, timer) was left open after
 * close(), and the heap after GC ended within 10 % of where it started. Prints a table and one
 * JSON line `{"bench":"soak",...}`.
 */
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { request } from 'undici';
import { GuardedAgent } from '../src/adapters/undici/index.js';
import { Http2Client } from '../src/http2/index.js';
import { openSocket } from '../src/guard/connect.js';
import { ConnectionPool, type DialContext, HostBreaker } from '../src/index.js';
import { type Http2Peer, type HttpPeer, type TcpPeer, blackhole, echoPeer, http2Peer, httpPeer } from '../src/testing/index.js';
import { numberFlag, quick } from './lib/args.js';
import { printJson, printTable, progress, round } from './lib/report.js';

if (typeof globalThis.gc !== 'function') {
  // Heap growth is only meaningful after a full GC: re-run with it exposed.
  const r = spawnSync(process.execPath, ['--expose-gc', ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const gc = globalThis.gc as () => void;

const SECONDS = numberFlag('--seconds', quick ? 20 : 120);
const LOOPS = 12;
const FAULT_EVERY = 2_500;

/** A line-echo connection: writes `n\n`, reads lines back in order; a timed-out read keeps its place. */
class EchoLines {
  readonly #waiters: Array<{ done: boolean; resolve: () => void; reject: (e: unknown) => void; timer: ReturnType<typeof setTimeout> }> = [];
  #buffer = '';
  #dead: unknown;
  constructor(readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.#buffer += d;
      for (let i = this.#buffer.indexOf('\n'); i >= 0; i = this.#buffer.indexOf('\n')) {
        this.#buffer = this.#buffer.slice(i + 1);
        const w = this.#waiters.shift();
        if (w !== undefined && !w.done) {
          w.done = true;
          clearTimeout(w.timer);
          w.resolve();
        }
      }
    });
    const fail = (e: unknown): void => {
      this.#dead ??= e;
      for (const w of this.#waiters.splice(0)) {
        if (w.done) continue;
        w.done = true;
        clearTimeout(w.timer);
        w.reject(e);
      }
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('echo connection closed')));
  }
  ping(timeout: number): Promise<void> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      const w = {
        done: false,
        resolve,
        reject,
        timer: setTimeout(() => {
          w.done = true; // keeps its place: the late line is read and dropped
          reject(new Error('echo timed out'));
        }, timeout),
      };
      this.#waiters.push(w);
      this.socket.write('ping\n');
    });
  }
}

interface Tally {
  calls: number;
  ok: number;
  failed: number;
  violations: number;
  inFlight: number;
}

function tally(): Tally {
  return { calls: 0, ok: 0, failed: 0, violations: 0, inFlight: 0 };
}

/** Runs `call`, counting how many times it settles: exactly once is the only right answer. */
async function tracked(t: Tally, call: () => Promise<unknown>): Promise<void> {
  t.calls++;
  t.inFlight++;
  let settles = 0;
  const settle = (ok: boolean): void => {
    settles++;
    if (settles > 1) {
      t.violations++;
      return;
    }
    t.inFlight--;
    if (ok) t.ok++;
    else t.failed++;
  };
  let p: Promise<unknown>;
  try {
    p = call();
  } catch (err) {
    p = Promise.reject(err);
  }
  await p.then(
    () => settle(true),
    () => settle(false),
  );
}

/** Kinds of handle network code can leak (stdio pipes, made lazily on first write, are not one). */
const LEAKABLE = new Set(['TCPSocketWrap', 'TCPServerWrap', 'TLSWrap', 'Timeout', 'Immediate', 'Http2Session', 'UDPWrap', 'ProcessWrap']);

function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) if (LEAKABLE.has(r)) counts[r] = (counts[r] ?? 0) + 1;
  return counts;
}

async function main(): Promise<void> {
  let unhandled = 0;
  process.on('unhandledRejection', (reason) => {
    unhandled++;
    process.stderr.write(`unhandled rejection: ${String(reason)}\n`);
  });
  const baseline = handles();
  const h2 = [await http2Peer(), await http2Peer()];
  const h1 = [await httpPeer(), await httpPeer()];
  const echo = [await echoPeer(), await echoPeer()];
  // The peers listen on whatever port they got; every fault brings them back on the same one.
  type Peer = Http2Peer | HttpPeer | TcpPeer;
  const all: Peer[] = [...h2, ...h1, ...echo];

  const breaker = (): HostBreaker => new HostBreaker({ failureThreshold: 3, openDuration: 1_000, probeTimeout: 2_000 });
  const http2Client = new Http2Client({ connectTimeout: 500, requestTimeout: 1_000, keepAliveInterval: 500, keepAliveTimeout: 500, breaker: breaker() });
  const agent = new GuardedAgent({ connectTimeout: 500, timeout: 1_500, maxAttempts: 2, breaker: breaker() });
  const pool = new ConnectionPool<EchoLines>({
    breaker: breaker(),
    connectTimeout: 500,
    connector: {
      connect: async (target: string, ctx: DialContext) => {
        const i = target.lastIndexOf(':');
        return new EchoLines(await openSocket({ host: target.slice(0, i), port: Number(target.slice(i + 1)) }, {}, ctx));
      },
      close: (c: EchoLines) => void c.socket.destroy(),
      watch: (c: EchoLines, w) => {
        const onClose = (): void => w.gone(new Error('echo socket closed'));
        c.socket.once('close', onClose);
        return () => c.socket.off('close', onClose);
      },
    },
  });

  const tallies = { http2: tally(), undici: tally(), pool: tally() };
  const until = performance.now() + SECONDS * 1_000;
  const running = (): boolean => performance.now() < until;
  const loops = (t: Tally, call: (i: number) => Promise<unknown>): Array<Promise<void>> =>
    Array.from({ length: LOOPS }, async (_, loop) => {
      for (let i = 0; running(); i++) {
        await tracked(t, () => call(loop + i));
        await new Promise((r) => setImmediate(r));
      }
    });

  // Faults: one every 2.5 s, rotating over the peers and the kinds of failure.
  let faults = 0;
  const faultLog: Record<string, number> = {};
  const faulting = (async () => {
    const kinds = ['kill', 'blackhole', 'silence', 'reset'] as const;
    for (let n = 0; performance.now() + FAULT_EVERY < until; n++) {
      await new Promise((r) => setTimeout(r, FAULT_EVERY));
      // 6 peers and 4 kinds: stepping both by one covers every pairing within 12 faults.
      const peer = all[n % all.length]!;
      let kind: (typeof kinds)[number] = kinds[n % kinds.length]!;
      if (kind === 'silence' && !('silence' in peer)) kind = 'kill';
      if (kind === 'reset' && !('resetConnections' in peer)) kind = 'kill';
      faults++;
      faultLog[kind] = (faultLog[kind] ?? 0) + 1;
      if (kind === 'kill') {
        await peer.kill();
        await new Promise((r) => setTimeout(r, 1_000));
        await peer.listen();
      } else if (kind === 'blackhole') {
        const port = peer.port;
        await peer.kill();
        const dark = await blackhole({ port });
        await new Promise((r) => setTimeout(r, 1_500));
        await dark.close();
        await peer.listen();
      } else if (kind === 'silence') {
        (peer as Http2Peer | HttpPeer).silence();
        await new Promise((r) => setTimeout(r, 1_500));
        (peer as Http2Peer | HttpPeer).serve();
      } else {
        await (peer as Http2Peer | HttpPeer).resetConnections();
      }
    }
  })();

  progress(`soak: ${SECONDS} s, ${LOOPS} loops per client, a fault every ${FAULT_EVERY / 1_000} s`);
  let heapStart = Number.NaN;
  const warmup = setTimeout(() => {
    gc();
    gc();
    heapStart = process.memoryUsage().heapUsed;
  }, Math.min(10_000, (SECONDS * 1_000) / 4));
  const ticker = setInterval(() => {
    const calls = tallies.http2.calls + tallies.undici.calls + tallies.pool.calls;
    progress(`soak: ${calls} calls, ${faults} faults`);
  }, 10_000);
  await Promise.all([
    ...loops(tallies.http2, (i) => http2Client.request(`${h2[i % 2]!.origin}/`)),
    ...loops(tallies.undici, async (i) => {
      const res = await request(`${h1[i % 2]!.origin}/`, { dispatcher: agent });
      await res.body.dump();
    }),
    ...loops(tallies.pool, (i) => pool.use(echo[i % 2]!.address, (lease) => lease.connection.ping(1_000), { idempotent: true })),
  ]);
  clearInterval(ticker);
  await faulting;
  const lost = tallies.http2.inFlight + tallies.undici.inFlight + tallies.pool.inFlight;
  await Promise.all([http2Client.close(), agent.close(), pool.close()]);
  await Promise.all(all.map((p) => p.close()));
  // Closing is asynchronous: give handles a bounded moment to go, then count what is left.
  let leaked: Record<string, number> = {};
  for (let i = 0; i < 60; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const now = handles();
    leaked = {};
    for (const [k, v] of Object.entries(now)) if (v > (baseline[k] ?? 0)) leaked[k] = v - (baseline[k] ?? 0);
    if (Object.keys(leaked).length === 0) break;
  }
  clearTimeout(warmup);
  for (let i = 0; i < 3; i++) gc();
  const heapEnd = process.memoryUsage().heapUsed;
  const growth = ((heapEnd - heapStart) / heapStart) * 100;
  const violations = tallies.http2.violations + tallies.undici.violations + tallies.pool.violations;
  const leakedCount = Object.values(leaked).reduce((a, b) => a + b, 0);

  printTable(`soak: ${SECONDS} s, ${faults} faults (${Object.entries(faultLog).map(([k, v]) => `${v} ${k}`).join(', ')})`, [
    ...(['http2', 'undici', 'pool'] as const).map((k) => ({ client: k, calls: tallies[k].calls, ok: tallies[k].ok, failed: tallies[k].failed, 'settled twice': tallies[k].violations })),
  ]);
  process.stdout.write(`lost ${lost}, unhandled rejections ${unhandled}, leaked handles ${JSON.stringify(leaked)}, heap ${round(heapStart / 1e6)} MB -> ${round(heapEnd / 1e6)} MB (${round(growth)} %)\n`);
  printJson('soak', {
    seconds: SECONDS,
    calls: tallies.http2.calls + tallies.undici.calls + tallies.pool.calls,
    calls_by_client: { http2: tallies.http2.calls, undici: tallies.undici.calls, pool: tallies.pool.calls },
    faults_injected: faults,
    settled_once_violations: violations,
    lost_calls: lost,
    unhandled_rejections: unhandled,
    leaked_handles: leakedCount,
    heap_growth_pct: round(growth),
  });
  const ok = violations === 0 && lost === 0 && unhandled === 0 && leakedCount === 0 && Math.abs(growth) <= 10;
  process.exitCode = ok ? 0 : 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
