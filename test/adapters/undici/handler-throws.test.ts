/**
 * A handler whose onComplete (or onResponseEnd) throws hears the error through onError (or
 * onResponseError), as undici's own request does. undici's retry interceptor gives up that way:
 * `agent.compose(interceptors.retry())` against a server answering 500 never settled through a
 * GuardedAgent (still pending after 8 s; a plain Agent: RequestRetryError in ~190 ms).
 */
import { type Dispatcher, interceptors, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { answer, guarded, httpServer, leakChecked } from './helpers.js';

leakChecked();

/** Settles `p` or says it did not within `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)))]).finally(() => clearTimeout(timer));
}

describe('GuardedAgent: a handler whose end callback throws', () => {
  it.each([500, 503])("compose(interceptors.retry()) against %i rejects with undici's RequestRetryError", async (status) => {
    await using server = await httpServer(answer(status, 'busy'));
    const { agent } = guarded({ maxAttempts: 1 });
    const composed = agent.compose(interceptors.retry({ maxRetries: 2, minTimeout: 10, maxTimeout: 10 }));
    const outcome = await within(
      request(`${server.origin}/`, { dispatcher: composed }).then(
        () => 'resolved',
        (e: unknown) => e,
      ),
      3_000,
    );
    expect(outcome).toMatchObject({ code: 'UND_ERR_REQ_RETRY', statusCode: status });
    expect(server.requests).toBe(3); // the interceptor's first try and its two retries
  });

  it("with the agent's own retries on: a 503 it held and then handed over still ends in RequestRetryError", async () => {
    await using server = await httpServer(answer(503, 'busy'));
    const { agent } = guarded({ maxAttempts: 2 });
    const composed = agent.compose(interceptors.retry({ maxRetries: 1, minTimeout: 10, maxTimeout: 10 }));
    const outcome = await within(request(`${server.origin}/`, { dispatcher: composed }).catch((e: unknown) => e), 3_000);
    expect(outcome).toMatchObject({ code: 'UND_ERR_REQ_RETRY', statusCode: 503 });
  });

  it.each(['legacy', 'controller'] as const)('%s style: the throw reaches the handler as its error', async (style) => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded({ maxAttempts: 1 });
    const seen: string[] = [];
    const ended = new Promise<void>((resolve) => {
      const handler =
        style === 'legacy'
          ? {
              onConnect: () => {},
              onHeaders: () => true,
              onData: () => true,
              onComplete: () => {
                seen.push('complete');
                throw new Error('refused in onComplete');
              },
              onError: (e: Error) => {
                seen.push(`error: ${e.message}`);
                resolve();
              },
            }
          : {
              onRequestStart: () => {},
              onResponseStart: () => {},
              onResponseData: () => {},
              onResponseEnd: () => {
                seen.push('complete');
                throw new Error('refused in onResponseEnd');
              },
              onResponseError: (_c: unknown, e: Error) => {
                seen.push(`error: ${e.message}`);
                resolve();
              },
            };
      agent.dispatch({ origin: server.origin, path: '/', method: 'GET' }, handler as unknown as Dispatcher.DispatchHandler);
    });
    expect(await within(ended, 2_000)).not.toBe('pending');
    expect(seen).toEqual(['complete', `error: refused in ${style === 'legacy' ? 'onComplete' : 'onResponseEnd'}`]);
  });
});

describe('GuardedAgent: a backoff that throws while a 503 is held', () => {
  // (`retryable` is not asked about a held status: holding it was the decision.)
  it.each(['backoff'] as const)('a throwing %s: the caller gets the held 503 and the throw is a process warning (was: swallowed, retries silently off)', async (which) => {
    await using server = await httpServer(answer(503, 'busy'));
    const thrower = (): never => {
      throw new Error(`${which} bug`);
    };
    const { agent } = guarded({ [which]: thrower });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const r = await request(`${server.origin}/`, { dispatcher: agent });
      expect({ status: r.statusCode, body: await r.body.text() }).toEqual({ status: 503, body: 'busy' });
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      expect(warnings.filter((m) => m.includes(`${which} bug`))).toHaveLength(1);
      expect(server.requests).toBe(1);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
