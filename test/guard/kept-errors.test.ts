/**
 * What the breaker keeps of a failed dial: the error itself (a refusal's `cause`), never what
 * that error's unread stack trace holds. V8 keeps an error's captured frames, each with its
 * receiver, until its stack is read; the breaker keeps a host's last error and its refusal for as
 * long as it remembers the host, so an error made inside a call kept that call, its handler and
 * its request body alive for minutes after the client was closed (an outside review: 52 MiB after
 * 200 failed 256 KiB POSTs through a GuardedAgent, plain undici under 1 MiB).
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { releaseFrames } from '../../src/core/release-frames.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { refusing } from '../../src/testing/tcp-peers.js';
import { guarded, leakChecked } from '../adapters/undici/helpers.js';
import { collectGarbage } from '../helpers/gc.js';

leakChecked();

/** A call in flight: it holds a large body, and errors are made in its methods. */
class Call {
  readonly body = new Uint8Array(1 << 20);
  fail(): Error {
    return new Error('connect ECONNREFUSED');
  }
  ask(breaker: HostBreaker, host: string): unknown {
    return breaker.tryAdmit(host, 80);
  }
}

/** A dial failed inside a call; only the error is kept. */
function failIn(breaker: HostBreaker, host: string): { call: WeakRef<Call>; error: Error } {
  const call = new Call();
  const error = call.fail();
  breaker.admit(host, 80).failed(error);
  return { call: new WeakRef(call), error };
}

/** A refusal made inside a call; only the refusal is kept. */
function refusedIn(breaker: HostBreaker, host: string): { call: WeakRef<Call>; refusal: unknown } {
  const call = new Call();
  return { call: new WeakRef(call), refusal: call.ask(breaker, host) };
}

describe('the breaker keeps errors, not the calls they were made in', () => {
  it("a host's last error keeps its identity as the refusal's cause, and not its call", async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const { call, error } = failIn(breaker, '127.0.0.1');
    await collectGarbage();
    expect(call.deref()).toBeUndefined();
    const refusal = breaker.tryAdmit('127.0.0.1', 80);
    expect(refusal).toBeInstanceOf(HostUnavailableError);
    expect((refusal as HostUnavailableError).cause).toBe(error);
  });

  it('a refusal, handed to every caller of its window, does not keep the first', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    breaker.admit('127.0.0.1', 80).failed(new Error('connect ECONNREFUSED'));
    const { call, refusal } = refusedIn(breaker, '127.0.0.1');
    expect(refusal).toBeInstanceOf(HostUnavailableError);
    await collectGarbage();
    expect(call.deref()).toBeUndefined();
    expect(breaker.tryAdmit('127.0.0.1', 80)).toBe(refusal); // still the window's one refusal
  });

  it('a GuardedAgent POST that failed and retried: its body is let go once the agent is closed, while the breaker still holds the host', async () => {
    await using peer = await refusing();
    const { agent, breaker } = guarded({ maxAttempts: 3 });
    const post = async (): Promise<WeakRef<Buffer>> => {
      const body = Buffer.alloc(1 << 20, 1);
      const err = await request(`http://${peer.address}/`, { method: 'POST', body, dispatcher: agent }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'ECONNREFUSED' }); // the story (3 attempts) rides on it
      return new WeakRef(body);
    };
    const body = await post();
    await agent.close();
    await collectGarbage();
    expect(body.deref()).toBeUndefined();
    expect(breaker.stats().hosts).toBe(1);
  });
});

describe('releaseFrames', () => {
  it('walks cause and errors, bounded, and never throws', () => {
    const hostile = new Proxy(new Error('x'), {
      get(target, key) {
        if (key === 'cause') throw new Error('hostile getter');
        return Reflect.get(target, key) as unknown;
      },
    });
    const cyclic = new Error('a') as Error & { cause?: unknown };
    cyclic.cause = cyclic;
    const wide = new AggregateError(Array.from({ length: 1_000 }, (_, i) => new Error(String(i))));
    for (const value of [undefined, null, 7, 'text', {}, hostile, cyclic, wide]) expect(releaseFrames(value)).toBe(value);
  });

  it('a throwing Error.prepareStackTrace is contained', () => {
    const saved = Error.prepareStackTrace;
    Error.prepareStackTrace = () => {
      throw new Error('formatter broke');
    };
    try {
      const err = new Error('x');
      expect(releaseFrames(err)).toBe(err);
    } finally {
      Error.prepareStackTrace = saved;
    }
  });
});
