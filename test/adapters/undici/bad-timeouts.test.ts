/**
 * A request's own headersTimeout or bodyTimeout that undici refuses ('5000' read from an env var,
 * -1, NaN) is refused through a GuardedAgent as through a plain Agent. With the agent's own
 * `timeout` set, the attempt's cut value used to replace it, and the request went out silently.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { answer, guarded, httpServer, leakChecked } from './helpers.js';

leakChecked();

describe('GuardedAgent: a request timeout undici would refuse', () => {
  it.each([
    ['headersTimeout', '5000'],
    ['headersTimeout', -1],
    ['bodyTimeout', Number.NaN],
  ] as const)('%s %s is refused as a plain Agent refuses it, even with the agent\'s own timeout set (was: replaced silently)', async (key, value) => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded({ timeout: 3_000 });
    const err = await request(`${server.origin}/`, { dispatcher: agent, [key]: value as number }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UND_ERR_INVALID_ARG', message: `invalid ${key}` });
    expect(server.requests).toBe(0);
  });
});
