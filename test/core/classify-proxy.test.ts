/**
 * classify() of undici's ProxyAgent failing a request whose CONNECT the proxy refused: the tunnel
 * never opened, so the request was never sent. A gateway status (502-504) may pass; another will
 * not. Made as undici makes it (a RequestAbortedError, whose name is AbortError).
 */
import { errors } from 'undici';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';

const refused = (status: number): Error => new errors.RequestAbortedError(`Proxy response (${status}) !== 200 when HTTP Tunneling`);

describe('classify: a proxy that refused the CONNECT', () => {
  it.each([502, 503, 504])('%i: a failed dial, never sent, transient', (status) => {
    expect(classify(refused(status))).toMatchObject({ kind: 'dial', notSent: true, transient: true, connectionDead: false, code: `PROXY_${status}` });
  });

  it.each([407, 403, 500, 501])('%i: a failed dial, never sent, not transient', (status) => {
    expect(classify(refused(status))).toMatchObject({ kind: 'dial', notSent: true, transient: false, code: `PROXY_${status}` });
  });

  it('the same words in another shape stay what they were', () => {
    expect(classify(new errors.RequestAbortedError('Request aborted')).kind).toBe('cancelled');
    expect(classify(new errors.RequestAbortedError('Proxy response (502) !== 200 when HTTP Tunneling!')).kind).toBe('cancelled');
    expect(classify(new errors.RequestAbortedError('x Proxy response (502) !== 200 when HTTP Tunneling')).kind).toBe('cancelled');
    expect(classify(Object.assign(new Error('Proxy response (502) !== 200 when HTTP Tunneling'), { code: 'UND_ERR_SOCKET' })).kind).toBe('connection');
    expect(classify(Object.assign(new Error('Proxy response (502) !== 200 when HTTP Tunneling'), { name: 'AbortError' })).kind).toBe('cancelled');
  });
});
