/**
 * Model-based test of HostBreaker: random sequences of admits, settlements in any order
 * (succeeded, failed, abandoned, twice, late), clock moves and capacity pressure, run against the
 * breaker and a small reference model of the rules in DESIGN.md. After every command the two
 * must agree on every host's state, and every admit must agree on grant, probe or refusal.
 *
 * A failure prints fast-check's seed and path; replay it with FC_SEED=<seed> FC_PATH=<path>.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { type DialPermit, HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { replay, runs } from './replay.js';

const HOSTS = ['a:1', 'b:2'];
const THRESHOLD = 3;
const OPEN = 1_000;
const PROBE = 500;
/** Failed rounds must span this long to open (the blip rule); the clock moves by 1 to 2 500. */
const MIN_OUTAGE = 1_000;

/** The rules, written as plainly as possible. */
class Model {
  hosts = new Map<
    string,
    { closed: boolean; failures: number; round: number; streakStart: number; openUntil: number; probing: boolean; probeUntil: number; gen: number }
  >();
  now = 0;

  #entry(h: string) {
    let e = this.hosts.get(h);
    if (e === undefined) {
      e = { closed: true, failures: 0, round: 0, streakStart: 0, openUntil: 0, probing: false, probeUntil: 0, gen: 0 };
      this.hosts.set(h, e);
    }
    return e;
  }

  /** 'granted' | 'probe' | refusal retryAfter; plus the generation the permit belongs to. */
  admit(h: string): { result: 'granted' | 'probe' | { refused: number; state: 'open' | 'half-open' }; gen: number; round: number; at: number } {
    const e = this.#entry(h);
    const round = e.round;
    const at = this.now;
    if (e.closed) return { result: 'granted', gen: e.gen, round, at };
    if (this.now < e.openUntil) return { result: { refused: e.openUntil - this.now, state: 'open' }, gen: e.gen, round, at };
    if (e.probing && this.now < e.probeUntil) return { result: { refused: e.probeUntil - this.now, state: 'half-open' }, gen: e.gen, round, at };
    e.gen++;
    e.probing = true;
    e.probeUntil = this.now + PROBE;
    return { result: 'probe', gen: e.gen, round, at };
  }

  settle(h: string, gen: number, round: number, at: number, probe: boolean, outcome: 'succeeded' | 'failed' | 'abandoned'): void {
    const e = this.#entry(h);
    const current = e.gen === gen;
    if (outcome === 'abandoned') {
      if (current && probe) {
        e.probing = false;
        e.gen++;
      }
      return;
    }
    if (!current) return;
    if (outcome === 'succeeded') {
      e.failures = 0;
      if (!e.closed) {
        e.closed = true;
        e.probing = false;
        e.gen++;
      }
      return;
    }
    if (e.closed) {
      // One round per overlap: only a permit admitted since the last counted failure counts.
      if (round === e.round) {
        e.round++;
        if (e.failures === 0) e.streakStart = at; // the outage began by this dial's admission
        e.failures++;
      }
      if (e.failures < THRESHOLD || this.now - e.streakStart < MIN_OUTAGE) return;
    }
    e.closed = false;
    e.openUntil = this.now + OPEN;
    e.probing = false;
    e.gen++;
  }

  snapshot(h: string) {
    const e = this.hosts.get(h);
    if (e === undefined) return undefined;
    const open = !e.closed;
    const halfOpen = open && this.now >= e.openUntil;
    return {
      state: e.closed ? 'closed' : halfOpen ? 'half-open' : 'open',
      failures: e.failures,
      probing: halfOpen && e.probing && this.now < e.probeUntil,
      retryAfter: !open ? 0 : !halfOpen ? e.openUntil - this.now : e.probing && this.now < e.probeUntil ? e.probeUntil - this.now : 0,
    };
  }
}

interface Real {
  clock: ManualClock;
  breaker: HostBreaker;
  permits: Array<{ permit: DialPermit; host: string; gen: number; round: number; at: number; settled: boolean }>;
}
interface World {
  model: Model;
}

class Admit implements fc.Command<World, Real> {
  constructor(readonly host: string) {}
  check = (): boolean => true;
  run(m: World, r: Real): void {
    const expected = m.model.admit(this.host);
    let actual: DialPermit | HostUnavailableError;
    try {
      actual = r.breaker.admit(this.host);
    } catch (err) {
      actual = err as HostUnavailableError;
    }
    // Plain comparisons on the hot path (10 000 runs); expect() only to report a mismatch.
    const refused = actual instanceof HostUnavailableError;
    if (typeof expected.result === 'object') {
      const e = actual as HostUnavailableError;
      if (!refused || e.retryAfter !== expected.result.refused || e.state !== expected.result.state) {
        expect({ refused, retryAfter: refused ? e.retryAfter : undefined, state: refused ? e.state : undefined }).toEqual({
          refused: true,
          retryAfter: expected.result.refused,
          state: expected.result.state,
        });
      }
    } else {
      const probe = !refused && (actual as DialPermit).probe;
      if (refused || probe !== (expected.result === 'probe')) expect({ refused, probe }).toEqual({ refused: false, probe: expected.result === 'probe' });
      r.permits.push({ permit: actual as DialPermit, host: this.host, gen: expected.gen, round: expected.round, at: expected.at, settled: false });
    }
  }
  toString = (): string => `admit(${this.host})`;
}

class Settle implements fc.Command<World, Real> {
  constructor(
    readonly index: number,
    readonly outcome: 'succeeded' | 'failed' | 'abandoned',
  ) {}
  check = (): boolean => true;
  run(m: World, r: Real): void {
    // Mostly a permit still out (late settlements of old ones happen too, and are ignored).
    const open = r.permits.filter((x) => !x.settled);
    const pool = open.length > 0 && this.index % 5 !== 0 ? open : r.permits;
    if (pool.length === 0) return;
    const p = pool[this.index % pool.length]!;
    if (!p.settled) m.model.settle(p.host, p.gen, p.round, p.at, p.permit.probe, this.outcome); // the first settlement wins
    p.settled = true;
    p.permit[this.outcome]();
    if (!p.permit.settled) expect(p.permit.settled).toBe(true);
  }
  toString = (): string => `settle(#${this.index}, ${this.outcome})`;
}

class Advance implements fc.Command<World, Real> {
  constructor(readonly ms: number) {}
  check = (): boolean => true;
  run(m: World, r: Real): void {
    m.model.now += this.ms;
    r.clock.advance(this.ms);
  }
  toString = (): string => `advance(${this.ms})`;
}

function agree(m: World, r: Real): void {
  for (const h of HOSTS) {
    const expected = m.model.snapshot(h);
    const actual = r.breaker.state(h);
    const same =
      expected === undefined
        ? actual === undefined
        : actual !== undefined &&
          actual.state === expected.state &&
          actual.failures === expected.failures &&
          actual.probing === expected.probing &&
          actual.retryAfter === expected.retryAfter;
    if (!same) expect(actual).toEqual(expected === undefined ? undefined : expect.objectContaining(expected));
  }
}

const command = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTS).map((h) => new Admit(h)) },
  { weight: 4, arbitrary: fc.tuple(fc.nat(50), fc.constantFrom('succeeded', 'failed', 'abandoned') as fc.Arbitrary<'succeeded' | 'failed' | 'abandoned'>).map(([i, o]) => new Settle(i, o)) },
  { weight: 2, arbitrary: fc.constantFrom(1, 100, 499, 500, 999, 1_000, 2_500).map((ms) => new Advance(ms)) },
);

describe('HostBreaker, model-based', () => {
  it('agrees with the reference model on every command of 10 000 random sequences', () => {
    fc.assert(
      fc.property(fc.commands([command], { maxCommands: 80, size: 'max' }), (cmds) => {
        const clock = new ManualClock();
        const real: Real = {
          clock,
          breaker: new HostBreaker({ clock, failureThreshold: THRESHOLD, minOutage: MIN_OUTAGE, openDuration: OPEN, probeTimeout: PROBE, idleRetention: Number.POSITIVE_INFINITY }),
          permits: [],
        };
        const world: World = { model: new Model() };
        fc.modelRun(() => ({ model: world, real }), [...cmds].map((c) => wrap(c, agree)));
      }),
      { numRuns: runs(10_000), ...replay() },
    );
  });

  it('never holds more hosts than its capacity, whatever is admitted and settled', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ maxLength: 12 }), fc.nat(65535), fc.constantFrom('succeeded', 'failed', 'abandoned')), { maxLength: 300 }), (ops) => {
        const breaker = new HostBreaker({ capacity: 16, failureThreshold: 1 });
        for (const [name, port, outcome] of ops) {
          try {
            const p = breaker.admit(`h-${name}`, port);
            p[outcome as 'succeeded' | 'failed' | 'abandoned']();
          } catch (err) {
            if (!(err instanceof HostUnavailableError) && !(err instanceof TypeError)) throw err;
          }
          expect(breaker.stats().hosts).toBeLessThanOrEqual(16);
        }
      }),
      { numRuns: runs(500), ...replay() },
    );
  });
});

/** Runs `check` after each command so a disagreement is caught at the command that caused it. */
function wrap(cmd: fc.Command<World, Real>, check: (m: World, r: Real) => void): fc.Command<World, Real> {
  return {
    check: (m) => cmd.check(m),
    run: (m, r) => {
      cmd.run(m, r);
      check(m, r);
    },
    toString: () => cmd.toString(),
  };
}
