/**
 * A dial made inside another dial's establishment (a pool's connector calling `connect()`): to
 * the same host on the same breaker, made synchronously or given the outer dial's signal, it is
 * the outer dial's own (no permit, nothing reported of its own); to another host or on another
 * breaker, or once the outer dial is over, it asks the breaker as any dial. And a breaker's
 * refusal inside a dial is never the host's failure.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { dial } from '../../src/guard/dial.js';
import { dialFailureOutcome } from '../../src/guard/dial-outcome.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';

const settled = (b: HostBreaker): number => {
  const s = b.stats();
  return s.succeeded + s.failed + s.abandoned;
};

describe('a dial inside a dial', () => {
  it('to the same host on the same breaker takes no permit of its own', async () => {
    const breaker = new HostBreaker();
    const value = await dial('a.test:1', () => dial('a.test:1', async () => 'inner', { breaker }), { breaker });
    expect(value).toBe('inner');
    expect(breaker.stats()).toMatchObject({ succeeded: 1, failed: 0, abandoned: 0 });
  });

  it('the outer dial\'s own publishes nothing of its own: one dial:settled event and one dial trace, not two (was: every dial of a pool whose connector uses connect() counted twice; an outside review)', async () => {
    const breaker = new HostBreaker();
    const settledEvents: unknown[] = [];
    const starts: unknown[] = [];
    const onSettled = (m: unknown): void => void settledEvents.push(m);
    const trace = diagnosticsChannel.tracingChannel('dialguard:dial');
    const handlers = { start: (m: unknown) => void starts.push(m), end: () => {}, asyncStart: () => {}, asyncEnd: () => {}, error: () => {} };
    diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);
    trace.subscribe(handlers);
    try {
      await dial('a.test:1', () => dial('a.test:1', async () => 'inner', { breaker }), { breaker });
      await dial('a.test:1', (ctx) => dial('a.test:1', async () => Promise.reject(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })), { breaker, signal: ctx.signal }), { breaker }).catch(() => {});
    } finally {
      diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled);
      trace.unsubscribe(handlers);
    }
    expect(settledEvents.map((e) => (e as { outcome: string }).outcome)).toEqual(['succeeded', 'failed']);
    expect(starts.length).toBe(2);
    expect(breaker.stats()).toMatchObject({ succeeded: 1, failed: 1 });
  });

  it("where the outer dial's own gets is the outer dial's: a stall in its handshake, timed out by the outer dial, is reported in 'handshake' (was 'tcp': a pool's connector using connect() against a frozen node; an outside review)", async () => {
    const breaker = new HostBreaker();
    const progressed: string[] = [];
    const err = await dial(
      'a.test:1',
      (ctx) => {
        const permit = ctx.permit;
        const progressedBefore = permit.progressed.bind(permit);
        permit.progressed = () => {
          progressed.push('outer');
          progressedBefore();
        };
        return dial(
          'a.test:1',
          (inner) => {
            inner.phase = 'tls';
            inner.phase = 'handshake';
            return new Promise<never>(() => {}); // the node never answers its handshake
          },
          { breaker, signal: ctx.signal, timeout: 5_000 },
        );
      },
      { breaker, timeout: 30 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectTimeoutError);
    expect((err as ConnectTimeoutError).phase).toBe('handshake');
    expect(progressed).toEqual(['outer', 'outer']); // the real permit heard that the host was reached
  });

  it("an answer the outer dial's own got is the outer dial's: its failure after it does not count against the host", async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const err = await dial(
      'a.test:1',
      (ctx) =>
        dial(
          'a.test:1',
          (inner) => {
            inner.answered = true; // the node replied, then the handshake failed
            return Promise.reject(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
          },
          { breaker, signal: ctx.signal },
        ),
      { breaker },
    ).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('ECONNRESET');
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 1, opened: 0 });
  });

  it("made after an await, it is found by the outer dial's signal passed on; after the outer dial, that signal is anyone's", async () => {
    const breaker = new HostBreaker();
    let kept: AbortSignal | undefined;
    await dial(
      'a.test:1',
      async (ctx) => {
        kept = ctx.signal;
        await new Promise((resolve) => setTimeout(resolve, 5));
        return dial('a.test:1', async () => 'inner', { breaker, signal: ctx.signal });
      },
      { breaker },
    );
    expect(breaker.stats()).toMatchObject({ succeeded: 1 });
    await dial('a.test:1', async () => 'later', { breaker, signal: kept });
    expect(breaker.stats()).toMatchObject({ succeeded: 2 });
  });

  it('made after an await without the signal, it asks the breaker (nothing ties it to the outer dial)', async () => {
    const breaker = new HostBreaker();
    await dial(
      'a.test:1',
      async () => {
        await Promise.resolve();
        return dial('a.test:1', async () => 'inner', { breaker });
      },
      { breaker },
    );
    expect(breaker.stats().succeeded).toBe(2);
  });

  it('to another host, or on another breaker, asks its breaker as any dial', async () => {
    const breaker = new HostBreaker();
    const other = new HostBreaker();
    await dial(
      'a.test:1',
      async () => {
        // Both made synchronously inside the establishment, where a same-host dial would be its own.
        await Promise.all([dial('b.test:1', async () => 'b', { breaker }), dial('a.test:1', async () => 'a', { breaker: other })]);
        return 'outer';
      },
      { breaker },
    );
    expect(settled(breaker)).toBe(2);
    expect(settled(other)).toBe(1);
  });

  it('once the outer dial is over, a dial started from its context asks the breaker again', async () => {
    const breaker = new HostBreaker();
    let later: Promise<string> | undefined;
    await dial(
      'a.test:1',
      async () => {
        later = new Promise((resolve) => setTimeout(resolve, 20)).then(() => dial('a.test:1', async () => 'later', { breaker }));
        return 'outer';
      },
      { breaker },
    );
    expect(await later).toBe('later');
    expect(breaker.stats().succeeded).toBe(2);
  });

  it("a breaker's refusal, bare or as a cause, is abandoned: no I/O, nothing of the host", () => {
    const refusal = new HostUnavailableError('a.test:1', 1_000, 'open');
    expect(dialFailureOutcome(refusal)).toBe('abandoned');
    expect(dialFailureOutcome(new Error('wrapped', { cause: refusal }))).toBe('abandoned');
  });
});
