/**
 * bench/dead-host: seed 000's table, unguarded vs guarded, in one run, same connect timeout.
 *
 *   node dist/bench/dead-host.js [--quick] [--timeout MS] [--open MS] [--no-netns]
 *
 * The unguarded client is Node's own `net.connect` with the same timeout applied by hand (Node
 * has none) and the seed's retry loop of 6 attempts. The guarded one is dialguard's `connect`
 * behind a HostBreaker (3 failures, fixed open window), with the same loop, which stops at the
 * first refusal because a refusal is permanent.
 */
import net from 'node:net';
import { circuitBreaker, ConsecutiveBreaker, handleAll } from 'cockatiel';
import CircuitBreaker from 'opossum';
import { UnguardedDialer, attemptRequest } from '../src/demo/unguarded.js';
import { HostBreaker, connect, isPermanent } from '../src/index.js';
import { type Blackhole, blackhole } from '../src/testing/index.js';
import { inBenchNetns, reexecInNetns } from './lib/netns.js';
import { printJson, printTable, progress, round } from './lib/report.js';
import { numberFlag, quick } from './lib/args.js';
import { median, perCallMicrosInterleaved, perCallMicrosSync, timed } from './lib/timing.js';

reexecInNetns();

const TIMEOUT = numberFlag('--timeout', quick ? 200 : 2_000); // seed 000 chose 2 s
const OPEN = numberFlag('--open', quick ? 2_000 : 30_000); // seed 000's open window
const THRESHOLD = 3;
const ATTEMPTS = 6; // seed 000's worker retry budget
const REQUESTS = 100;

const raw = new UnguardedDialer(TIMEOUT);
const rawConnect = (host: string, port: number): Promise<net.Socket> => raw.connect(host, port);

/** One request: up to ATTEMPTS tries, no backoff (the seed's loop), stopping on a permanent error. */
async function request(dialOnce: () => Promise<net.Socket>): Promise<boolean> {
  return (await attemptRequest(dialOnce, ATTEMPTS, isPermanent)).ok;
}

async function main(): Promise<void> {
  const mode = inBenchNetns ? 'veth' : 'accept-queue';
  progress(`blackhole via ${mode}, timeout ${TIMEOUT} ms, open window ${OPEN} ms`);
  const peer: Blackhole = await blackhole({ mode });
  const target = { host: peer.host, port: peer.port };
  const exactAtPeer = mode === 'veth';
  const peerDials = (): number => (exactAtPeer ? peer.attempts : Number.NaN);

  progress('single dial, unguarded and guarded');
  const rawSingle = await timed(() => rawConnect(peer.host, peer.port));
  const guardedSingle = await timed(() => connect(target, { timeout: TIMEOUT, breaker: new HostBreaker() }));

  progress(`full retry sequence (${ATTEMPTS} attempts), unguarded`);
  const rawFull = await timed(() => request(() => rawConnect(peer.host, peer.port)));

  progress(`${REQUESTS} requests, unguarded (concurrent, to keep the wait at one sequence)`);
  const rawDialsBefore = raw.dials;
  const peerBefore = peerDials();
  const rawBatch = await timed(() => Promise.all(Array.from({ length: REQUESTS }, () => request(() => rawConnect(peer.host, peer.port)))));
  const rawDialsPer100 = exactAtPeer ? peerDials() - peerBefore : raw.dials - rawDialsBefore;

  progress(`full retry sequence, guarded (threshold ${THRESHOLD})`);
  const breaker = new HostBreaker({ failureThreshold: THRESHOLD, openDuration: OPEN });
  const guardedDial = (): Promise<net.Socket> => connect(target, { timeout: TIMEOUT, breaker });
  const peerAtTrip = peerDials();
  const fullStart = performance.now();
  const guardedFull = await timed(() => request(guardedDial));

  progress(`requests 2..${REQUESTS} while the host is blocked`);
  const rest: number[] = [];
  for (let i = 1; i < REQUESTS; i++) rest.push((await timed(() => request(guardedDial))).ms);
  const stats = breaker.stats();
  const guardedDials = exactAtPeer ? peerDials() - peerAtTrip : stats.succeeded + stats.failed + stats.abandoned + stats.stale;

  progress('cost of one refusal while the host is blocked: dialguard vs cockatiel vs opossum, interleaved rounds');
  // Each library holds an open circuit; all are measured in alternating rounds in this state, with
  // the floor of this machine: awaiting a promise that is already rejected, and nothing else.
  const cockatiel = circuitBreaker(handleAll, { halfOpenAfter: 60_000, breaker: new ConsecutiveBreaker(THRESHOLD) });
  for (let i = 0; i < THRESHOLD; i++) await cockatiel.execute(() => Promise.reject(new Error('down'))).catch(() => {});
  const opossum = new CircuitBreaker(async () => 1, { resetTimeout: 60_000 });
  opossum.open();
  const rejected = new Error('floor');
  const refusal = await perCallMicrosInterleaved({
    dialguard: guardedDial,
    floor: () => Promise.reject(rejected),
    cockatiel: () => cockatiel.execute(async () => 1),
    opossum: () => opossum.fire(),
  }, quick ? 1 : 5, quick ? 5 : 20); // quick: well inside the 2 s window, so no probe runs meanwhile
  opossum.shutdown();
  const blockedUs = refusal.dialguard;
  const floorUs = refusal.floor;
  const admitUs = perCallMicrosSync(() => breaker.admit(peer.address));
  // The throw-free path: tryAdmit returns the cached refusal instead of throwing it.
  const tryAdmitUs = perCallMicrosSync(() => breaker.tryAdmit(peer.address));

  progress('the host comes back: time until a guarded request gets through');
  await peer.heal();
  const healedAt = performance.now();
  const dialsAtHeal = exactAtPeer ? peerDials() : breaker.stats().failed + breaker.stats().succeeded;
  let resumeMs = Number.NaN;
  const deadline = healedAt + OPEN + 10 * TIMEOUT;
  while (performance.now() < deadline) {
    if (await request(guardedDial)) {
      resumeMs = performance.now() - healedAt;
      break;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const probeDials = exactAtPeer ? peerDials() - dialsAtHeal : breaker.stats().failed + breaker.stats().succeeded - dialsAtHeal;
  const windowLeftAtHeal = OPEN - (healedAt - fullStart - guardedFull.ms);
  const rawResume = await timed(() => request(() => rawConnect(peer.host, peer.port)));
  await peer.close();

  printTable(`dead host: connect timeout ${TIMEOUT} ms, threshold ${THRESHOLD}, open window ${OPEN} ms, dials counted ${exactAtPeer ? 'at the peer (veth, ActiveOpens)' : 'at the client'}`, [
    { measure: 'single dial (ms)', unguarded: rawSingle.ms, guarded: guardedSingle.ms, 'guarded/unguarded': guardedSingle.ms / rawSingle.ms },
    { measure: `full retry sequence, ${ATTEMPTS} attempts (ms)`, unguarded: rawFull.ms, guarded: guardedFull.ms, 'guarded/unguarded': guardedFull.ms / rawFull.ms },
    { measure: 'later request, host blocked (µs, median)', unguarded: rawFull.ms * 1_000, guarded: blockedUs, 'guarded/unguarded': blockedUs / (rawFull.ms * 1_000) },
    { measure: `dials for ${REQUESTS} requests`, unguarded: rawDialsPer100, guarded: guardedDials, 'guarded/unguarded': guardedDials / rawDialsPer100 },
    { measure: 'resume after the host is back (ms)', unguarded: rawResume.ms, guarded: resumeMs, 'guarded/unguarded': '(bounded by the open window)' },
  ]);
  printTable('open-circuit rejection, one awaited call (µs, median of batches)', [
    { library: 'dialguard connect()', us: refusal.dialguard, 'vs dialguard': 1 },
    { library: 'dialguard admit() (sync, throws)', us: admitUs, 'vs dialguard': admitUs / refusal.dialguard },
    { library: 'dialguard tryAdmit() (sync, returns)', us: tryAdmitUs, 'vs dialguard': tryAdmitUs / refusal.dialguard },
    { library: '(floor: await a rejected promise)', us: floorUs, 'vs dialguard': floorUs / refusal.dialguard },
    { library: 'cockatiel execute()', us: refusal.cockatiel, 'vs dialguard': refusal.cockatiel / refusal.dialguard },
    { library: 'opossum fire()', us: refusal.opossum, 'vs dialguard': refusal.opossum / refusal.dialguard },
  ]);
  process.stdout.write(`\n(the unguarded batch of ${REQUESTS} concurrent requests took ${Math.round(rawBatch.ms)} ms; median later guarded request ${round(median(rest))} ms)\n`);
  printJson('dead-host', {
    timeout_ms: TIMEOUT,
    open_ms: OPEN,
    threshold: THRESHOLD,
    dial_count: exactAtPeer ? 'peer' : 'client',
    single_dial_ms: round(guardedSingle.ms),
    raw_single_dial_ms: round(rawSingle.ms),
    full_retry_ms: round(guardedFull.ms),
    raw_full_retry_ms: round(rawFull.ms),
    blocked_request_us: round(blockedUs),
    admit_refusal_us: round(admitUs),
    try_admit_refusal_us: round(tryAdmitUs),
    await_rejected_floor_us: round(floorUs),
    dials_per_100_requests: guardedDials,
    raw_dials_per_100_requests: rawDialsPer100,
    resume_ms: round(resumeMs),
    resume_window_left_ms: round(windowLeftAtHeal),
    resume_dials: probeDials,
    raw_resume_ms: round(rawResume.ms),
    refusal_us: { dialguard: round(refusal.dialguard), cockatiel: round(refusal.cockatiel), opossum: round(refusal.opossum) },
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`dead-host bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
