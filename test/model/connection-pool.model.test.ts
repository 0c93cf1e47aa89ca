/**
 * Model-based test of ConnectionPool: random sequences of requests (idempotent or not) on a few
 * targets, connects settling either way or timing out, requests finishing or failing with each
 * kind of error (in any order, late ones included), caller aborts, transports dying or being
 * retired, idle sweeps and clock moves. After every command the pool must hold its invariants,
 * and at the end every request must have settled exactly once and every connection be closed
 * exactly once.
 *
 * A failure prints fast-check's seed and path; replay it with FC_SEED=<seed> FC_PATH=<path>.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { type ConnectionWatch, ConnectionPool, type Connector } from '../../src/pool/connection-pool.js';
import type { Lease } from '../../src/pool/pooled-connection.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { replay, runs } from './replay.js';

const TARGETS = ['t1:1', 't2:2'];

interface Conn {
  n: number;
  target: string;
  closes: number;
  /** The pool said it retired (or found it gone): it takes no new requests. */
  retired: boolean;
  watch?: ConnectionWatch;
}

class Connector_ implements Connector<Conn> {
  attempts: Array<{ target: string; settled: boolean; resolve: () => void; reject: (e: unknown) => void }> = [];
  conns: Conn[] = [];

  connect(target: string, ctx: DialContext): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const a = {
        target,
        settled: false,
        resolve: () => {
          if (a.settled) return;
          a.settled = true;
          const c: Conn = { n: this.conns.length + 1, target, closes: 0, retired: false };
          this.conns.push(c);
          resolve(c);
        },
        reject: (e: unknown) => {
          if (a.settled) return;
          a.settled = true;
          reject(e);
        },
      };
      this.attempts.push(a);
      ctx.signal.addEventListener('abort', () => a.reject(ctx.signal.reason), { once: true });
    });
  }
  close(c: Conn): void {
    c.closes++;
  }
  watch(c: Conn, w: ConnectionWatch): () => void {
    c.watch = w;
    return () => {
      c.watch = undefined;
    };
  }
}

class Dead extends Error {}
class NotSent extends Error {}
const classify = (e: unknown) => ({ connectionDead: e instanceof Dead, notSent: e instanceof NotSent });

interface Request {
  target: string;
  controller: AbortController;
  /** The current ride's lease and how to end it. */
  lease?: Lease<Conn>;
  end?: { resolve: (v: string) => void; reject: (e: unknown) => void };
  settles: number;
  settled: boolean;
}

interface Real {
  clock: ManualClock;
  pool: ConnectionPool<Conn>;
  connector: Connector_;
  requests: Request[];
}

type Cmd = fc.AsyncCommand<object, Real>;

function cmd(name: string, run: (r: Real) => void | Promise<void>): Cmd {
  return {
    check: () => true,
    run: async (_m, r) => {
      await run(r);
      await flushMicrotasks();
      invariants(r);
    },
    toString: () => name,
  };
}

function invariants(r: Real): void {
  // One connect attempt in flight per target, at most.
  for (const t of TARGETS) {
    const pending = r.connector.attempts.filter((a) => a.target === t && !a.settled).length;
    if (pending > 1) expect(pending, `connects in flight to ${t}`).toBeLessThanOrEqual(1);
  }
  for (const c of r.connector.conns) if (c.closes > 1) expect(c.closes, `connection #${c.n} closed`).toBe(1);
  // At most one connection per target takes new requests: a second means one was orphaned
  // (evicted from its slot without being retired), as a late failure evicting its replacement would.
  for (const t of TARGETS) {
    const usable = r.connector.conns.filter((c) => c.target === t && c.closes === 0 && !c.retired).map((c) => c.n);
    if (usable.length > 1) expect(usable, `usable connections to ${t}`).toHaveLength(1);
  }
  // Nobody is left riding a closed connection (a released ride's lease signal has aborted).
  const rides = (q: Request): boolean => !q.settled && q.lease !== undefined && q.end !== undefined && !q.lease.signal.aborted;
  for (const q of r.requests) {
    if (!rides(q)) continue;
    const c = r.connector.conns.find((x) => x.n === q.lease!.connection.n)!;
    if (c.closes > 0) expect({ request: 'riding a closed connection', conn: c.n }).toBeUndefined();
  }
  const riding = r.requests.filter(rides).length;
  if (r.pool.stats().leases !== riding) expect(r.pool.stats().leases).toBe(riding);
}

const commands = [
  fc.tuple(fc.constantFrom(...TARGETS), fc.boolean()).map(([target, idempotent]) =>
    cmd(`use(${target}, ${idempotent})`, (r) => {
      const q: Request = { target, controller: new AbortController(), settles: 0, settled: false };
      r.requests.push(q);
      r.pool
        .use(
          target,
          (lease) =>
            new Promise<string>((resolve, reject) => {
              q.lease = lease;
              q.end = { resolve, reject };
            }),
          { signal: q.controller.signal, idempotent },
        )
        .then(
          () => {
            q.settles++;
            q.settled = true;
          },
          () => {
            q.settles++;
            q.settled = true;
          },
        );
    }),
  ),
  fc.nat(10).map((i) => cmd(`resolveConnect(${i})`, (r) => pick(r.connector.attempts.filter((a) => !a.settled), i)?.resolve())),
  fc.nat(10).map((i) => cmd(`rejectConnect(${i})`, (r) => pick(r.connector.attempts.filter((a) => !a.settled), i)?.reject(new Error('ECONNREFUSED')))),
  fc.tuple(fc.nat(20), fc.constantFrom('ok', 'dead', 'notSent', 'stream')).map(([i, how]) =>
    cmd(`finish(${i}, ${how})`, (r) => {
      // Any request that holds a lease, finished or not: finishing a released one is a late report.
      const q = pick(r.requests.filter((x) => x.end !== undefined), i);
      if (q === undefined) return;
      const end = q.end!;
      if (how === 'ok') end.resolve('ok');
      else end.reject(how === 'dead' ? new Dead('transport died') : how === 'notSent' ? new NotSent('refused stream') : new Error('RST_STREAM'));
      if (!q.settled) q.end = undefined;
    }),
  ),
  fc.nat(20).map((i) => cmd(`abort(${i})`, (r) => pick(r.requests.filter((q) => !q.settled), i)?.controller.abort(new Error('caller left')))),
  fc.nat(10).map((i) => cmd(`transportGone(${i})`, (r) => pick(r.connector.conns.filter((c) => c.watch !== undefined), i)?.watch!.gone(new Error('socket closed')))),
  fc.nat(10).map((i) => cmd(`goaway(${i})`, (r) => pick(r.connector.conns.filter((c) => c.watch !== undefined), i)?.watch!.retire('goaway'))),
  fc.constantFrom(10, 500, 1_000, 60_000).map((ms) => cmd(`advance(${ms})`, (r) => r.clock.advance(ms))),
];

function pick<T>(xs: T[], i: number): T | undefined {
  return xs.length === 0 ? undefined : xs[i % xs.length];
}

/** Settles everything still open, closes the pool, and checks nothing was lost or leaked. */
async function drain(r: Real): Promise<void> {
  for (let round = 0; round < 20; round++) {
    for (const a of r.connector.attempts) a.resolve();
    for (const q of r.requests) if (!q.settled && q.end !== undefined) q.end.resolve('done');
    await flushMicrotasks();
    if (r.requests.every((q) => q.settled)) break;
    r.clock.advance(250); // a caller waiting out a failed target's redial pace joins the next attempt then
    await flushMicrotasks();
  }
  const lost = r.requests.filter((q) => !q.settled).length;
  expect(lost, 'requests that never settled').toBe(0);
  expect(r.requests.filter((q) => q.settles !== 1).length, 'requests settled more than once').toBe(0);
  await r.pool.close();
  for (const c of r.connector.conns) expect(c.closes, `connection #${c.n}`).toBe(1);
  expect(r.pool.stats()).toMatchObject({ connections: 0, leases: 0, attempts: 0 });
}

describe('ConnectionPool, model-based', () => {
  it('holds its invariants over 10 000 random sequences, and loses, doubles and leaks nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 40, size: 'max' }), async (cmds) => {
        const clock = new ManualClock();
        const connector = new Connector_();
        const real: Real = {
          clock,
          connector,
          requests: [],
          pool: new ConnectionPool<Conn>({
            connector,
            clock,
            classify,
            breaker: new HostBreaker({ clock, minOutage: 0, failureThreshold: 2, openDuration: 700 }),
            connectTimeout: 1_000,
            idleTimeout: 60_000,
            sweepInterval: 30_000,
            closeTimeout: 100,
          }),
        };
        const mark = (e: { id: number }): void => {
          const c = connector.conns.find((x) => x.n === e.id);
          if (c !== undefined) c.retired = true;
        };
        real.pool.on('retired', mark);
        real.pool.on('gone', mark);
        await fc.asyncModelRun(() => ({ model: {}, real }), cmds);
        await drain(real);
      }),
      { numRuns: runs(10_000), ...replay() },
    );
  }, 120_000);
});
