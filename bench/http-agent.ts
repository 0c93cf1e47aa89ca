/**
 * bench/http-agent: axios and got on Node's own `https.Agent` against axios and got on
 * dialguard's `GuardedHttpsAgent`, in one run.
 *
 *   node dist/bench/http-agent.js [--quick] [--timeout MS] [--rounds N] [--round-ms MS] [--no-netns]
 *
 * - healthy_ratio: requests per second through the guarded agent / through Node's agent (both
 *   keep-alive), 16 concurrent callers against a node:https server in a child process. Raw and
 *   guarded rounds alternate (bench/lib/paired.ts): the median of `--rounds` pair ratios (default
 *   150 pairs of 100 ms rounds, `--round-ms`, as the other benches), per client, with its spread
 *   (min-max of the pairs).
 *   cpu_us_per_call is this process's CPU per request (median of the rounds); its `extra` is the
 *   median over the pairs of guarded minus raw, µs. A keep-alive socket is reused by Node's own
 *   code, so the guard adds nothing per request: the extra is noise around 0.
 * - dials_per_100_requests: dials for 100 requests to a blackholed origin, each request giving up
 *   after `--timeout` ms (axios: `signal`, got: `timeout.request`, no retry). Node's agent: 100
 *   requests at once (its dials have no bound of their own; the client's timeout ends each).
 *   Guarded: one after another, connectTimeout = the same timeout, breaker 3 failures / 60 s.
 *   Counted at the peer (veth, ActiveOpens, inside a network namespace of the bench's own) where possible,
 *   else at the client (the breaker's counters; Node's agent: one per request).
 * - dead_host_request_ms: requests 2..100 to that origin, median: what a request costs once the
 *   host is known dead.
 */
import https from 'node:https';
import axios from 'axios';
import got from 'got';
import { GuardedHttpsAgent } from '../src/adapters/http/index.js';
import { HostBreaker } from '../src/index.js';
import { type Blackhole, TEST_CERT, TEST_KEY, blackhole } from '../src/testing/index.js';
import { numberFlag, quick } from './lib/args.js';
import { childServer } from './lib/child-server.js';
import { inBenchNetns, reexecInNetns } from './lib/netns.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import { type Paired, cpuNote, pairedRounds, roundsFlag } from './lib/paired.js';
import { median, throughput } from './lib/timing.js';

reexecInNetns();

const TIMEOUT = numberFlag('--timeout', quick ? 200 : 1_000);
const CALLERS = 16;
const HEALTHY_MS = numberFlag('--round-ms', 100);
const HEALTHY_ROUNDS = roundsFlag(quick ? 12 : 150);
const REQUESTS = 100;

type ClientName = 'axios' | 'got';
type Call = (agent: https.Agent, url: string, timeout?: number) => Promise<unknown>;

const clients: Record<ClientName, Call> = {
  axios: (agent, url, timeout) => axios.get(url, { httpsAgent: agent, ...(timeout === undefined ? {} : { signal: AbortSignal.timeout(timeout) }) }),
  got: (agent, url, timeout) => got(url, { agent: { https: agent }, retry: { limit: 0 }, ...(timeout === undefined ? {} : { timeout: { request: timeout } }) }),
};

/** A node:https server in a child process: its event loop is not the clients'. */
async function serverProcess(): Promise<{ origin: string; stop: () => Promise<void> }> {
  const { port, stop } = await childServer(`
    const https = require('node:https');
    const s = https.createServer({ cert: ${JSON.stringify(TEST_CERT)}, key: ${JSON.stringify(TEST_KEY)}, keepAliveTimeout: 60000 }, (req, res) => { req.resume(); res.end('ok'); });
    s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
  `);
  return { origin: `https://localhost:${port}`, stop: () => stop() };
}

async function healthy(name: ClientName, url: string): Promise<Paired> {
  progress(`healthy, ${name}: ${CALLERS} concurrent callers, ${HEALTHY_ROUNDS} alternating pairs of ${HEALTHY_MS} ms rounds`);
  const call = clients[name];
  const raw = new https.Agent({ keepAlive: true, ca: TEST_CERT });
  const guarded = new GuardedHttpsAgent({ keepAlive: true, ca: TEST_CERT, breaker: new HostBreaker() });
  try {
    await throughput(CALLERS, 1_000, () => call(raw, url)); // warm-up: connections open, code paths hot
    await throughput(CALLERS, 1_000, () => call(guarded, url));
    return await pairedRounds(HEALTHY_ROUNDS, HEALTHY_MS, CALLERS, () => call(raw, url), () => call(guarded, url), (i, r, g) => {
      if ((i + 1) % 25 === 0 || i + 1 === HEALTHY_ROUNDS) {
        progress(`${name} round ${i + 1}: raw ${Math.round(r.perSecond)}/s, guarded ${Math.round(g.perSecond)}/s, ratio ${(g.perSecond / r.perSecond).toFixed(3)}; CPU/request raw ${r.cpuUsPerCall.toFixed(1)} µs, guarded ${g.cpuUsPerCall.toFixed(1)} µs`);
      }
    });
  } finally {
    raw.destroy();
    guarded.destroy();
  }
}

async function settle(p: Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  try {
    await p;
  } catch {
    /* failing is the point */
  }
  return performance.now() - t0;
}

interface Dead {
  dials: number;
  laterMs: number[];
}

async function deadRaw(name: ClientName, peer: Blackhole): Promise<Dead> {
  progress(`dead origin, ${name} on Node's agent: ${REQUESTS} requests at once, each giving up after ${TIMEOUT} ms`);
  const agent = new https.Agent({ ca: TEST_CERT });
  const before = peer.attempts;
  try {
    const url = `https://${peer.address}/`;
    const times = await Promise.all(Array.from({ length: REQUESTS }, () => settle(clients[name](agent, url, TIMEOUT))));
    return { dials: inBenchNetns ? peer.attempts - before : REQUESTS, laterMs: times.slice(1) };
  } finally {
    agent.destroy();
  }
}

async function deadGuarded(name: ClientName, peer: Blackhole): Promise<Dead> {
  progress(`dead origin, ${name} on GuardedHttpsAgent (connectTimeout ${TIMEOUT} ms, threshold 3): ${REQUESTS} requests, one after another`);
  const breaker = new HostBreaker({ failureThreshold: 3, openDuration: 60_000 });
  const agent = new GuardedHttpsAgent({ ca: TEST_CERT, breaker, connectTimeout: TIMEOUT });
  const before = peer.attempts;
  try {
    const url = `https://${peer.address}/`;
    const times: number[] = [];
    for (let i = 0; i < REQUESTS; i++) times.push(await settle(clients[name](agent, url, TIMEOUT)));
    const s = breaker.stats();
    return { dials: inBenchNetns ? peer.attempts - before : s.succeeded + s.failed + s.abandoned + s.stale, laterMs: times.slice(1) };
  } finally {
    agent.destroy();
  }
}

async function main(): Promise<void> {
  const server = await serverProcess();
  const health: Partial<Record<ClientName, Paired>> = {};
  try {
    for (const name of ['axios', 'got'] as const) health[name] = await healthy(name, `${server.origin}/`);
  } finally {
    await server.stop();
  }
  // veth, as bench/undici: it needs no nft binary (a fresh machine has none) and counts at the peer too.
  const mode = inBenchNetns ? 'veth' : 'accept-queue';
  progress(`dead origin: a blackhole via ${mode}; dials counted ${inBenchNetns ? 'at the peer' : 'at the client'}`);
  const raw: Partial<Record<ClientName, Dead>> = {};
  const guarded: Partial<Record<ClientName, Dead>> = {};
  for (const name of ['axios', 'got'] as const) {
    // A fresh blackhole per client: its own port, so one client's breaker state is not another's.
    const peer = await blackhole({ mode });
    try {
      raw[name] = await deadRaw(name, peer);
      guarded[name] = await deadGuarded(name, peer);
    } finally {
      await peer.close();
    }
  }
  const h = health as Record<ClientName, Paired>;
  const r = raw as Record<ClientName, Dead>;
  const g = guarded as Record<ClientName, Dead>;
  const rows = (['axios', 'got'] as const).flatMap((n) => [
    {
      measure: `${n}: healthy requests/s, ${CALLERS} callers (median)`,
      node: h[n].raw,
      guarded: h[n].guarded,
      'guarded/node': h[n].ratio,
      note: `median of ${h[n].rounds} pair ratios, spread ${h[n].ratioMin.toFixed(3)}-${h[n].ratioMax.toFixed(3)}`,
    },
    {
      measure: `${n}: healthy CPU per request (µs, median)`,
      node: h[n].cpuUsPerCall.raw,
      guarded: h[n].cpuUsPerCall.guarded,
      'guarded/node': h[n].cpuUsPerCall.guarded / h[n].cpuUsPerCall.raw,
      note: cpuNote(h[n]),
    },
    { measure: `${n}: dead origin, requests 2..${REQUESTS} (ms, median)`, node: median(r[n].laterMs), guarded: median(g[n].laterMs), 'guarded/node': median(g[n].laterMs) / median(r[n].laterMs), note: '' },
    { measure: `${n}: dead origin, dials for ${REQUESTS} requests`, node: r[n].dials, guarded: g[n].dials, 'guarded/node': g[n].dials / r[n].dials, note: '' },
  ]);
  printTable(`http-agent: axios and got on GuardedHttpsAgent vs Node's https.Agent, timeout ${TIMEOUT} ms, dials counted ${inBenchNetns ? 'at the peer (veth)' : 'at the client'}`, rows);
  const per = <T>(f: (n: ClientName) => T): Record<ClientName, T> => ({ axios: f('axios'), got: f('got') });
  printJson('http-agent', {
    timeout_ms: TIMEOUT,
    callers: CALLERS,
    healthy_rounds: HEALTHY_ROUNDS,
    healthy_round_ms: HEALTHY_MS,
    dial_count: inBenchNetns ? 'peer' : 'client',
    dials_per_100_requests: per((n) => g[n].dials),
    raw_dials_per_100_requests: per((n) => r[n].dials),
    dead_host_request_ms: per((n) => round(median(g[n].laterMs))),
    raw_dead_host_request_ms: per((n) => round(median(r[n].laterMs))),
    healthy_ratio: per((n) => round(h[n].ratio)),
    healthy_ratio_spread: per((n) => [round(h[n].ratioMin), round(h[n].ratioMax)]),
    cpu_us_per_call: per((n) => round(h[n].cpuUsPerCall.guarded)),
    raw_cpu_us_per_call: per((n) => round(h[n].cpuUsPerCall.raw)),
    extra_cpu_us_per_call: per((n) => round(h[n].cpuExtraUs)),
    extra_cpu_total_us_per_call: per((n) => round(h[n].cpuTotalUsPerCall.extra)),
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`http-agent bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
