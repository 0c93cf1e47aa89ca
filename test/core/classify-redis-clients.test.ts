/**
 * classify() against the errors node-redis and ioredis raise for a command they could not send,
 * made by the real clients (no server needed: a client that is not connected): node-redis's
 * ClientClosedError and ClientOfflineError, ioredis's refusal with `enableOfflineQueue: false`
 * and its MaxRetriesPerRequestError. They were `unknown`, so neither retry() nor a ServerSet
 * tried another server (an outside review: a ServerSet over two guarded redis clients failed 90 %
 * of its calls for 2 s after one node died, the other healthy). Each is now a `connection`
 * failure of no connection of ours, transient; not sent, except MaxRetriesPerRequestError (its
 * command may have been sent before the connection died).
 */
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';

const require = createRequire(import.meta.url);

const notSent = { kind: 'connection', notSent: true, transient: true, connectionDead: false };

describe('classify: a redis client that could not send a command', () => {
  it("node-redis, a client never connected (or closed): ClientClosedError is not sent, transient", async () => {
    const client = createClient({ socket: { host: '127.0.0.1', port: 1 } });
    const err = await client.ping().catch((e: unknown) => e);
    expect((err as Error).message).toBe('The client is closed');
    expect(classify(err)).toMatchObject({ ...notSent, code: 'CLIENT_CLOSED' });
  });

  it("node-redis's ClientOfflineError (disableOfflineQueue): not sent, transient", () => {
    const { ClientOfflineError } = require('@redis/client/dist/lib/errors.js') as { ClientOfflineError: new () => Error };
    expect(classify(new ClientOfflineError())).toMatchObject({ ...notSent, code: 'CLIENT_OFFLINE' });
  });

  it('ioredis with enableOfflineQueue: false and no connection: not sent, transient', async () => {
    const client = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false });
    try {
      const err = await client.ping().catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/enableOfflineQueue/);
      expect(classify(err)).toMatchObject({ ...notSent, code: 'CLIENT_OFFLINE' });
    } finally {
      client.disconnect();
    }
  });

  it("ioredis's MaxRetriesPerRequestError: a connection failure, transient, but maybe sent", () => {
    const { default: MaxRetries } = require('ioredis/built/errors/MaxRetriesPerRequestError.js') as { default: new (n: number) => Error };
    expect(classify(new MaxRetries(20))).toMatchObject({ kind: 'connection', notSent: false, transient: true, connectionDead: false, code: 'MAX_RETRIES_PER_REQUEST' });
  });

  it('the same words in another shape are not taken for them: a code of its own, another name, more text', () => {
    expect(classify(Object.assign(new Error('The client is offline'), { code: 'EOTHER' })).code).not.toBe('CLIENT_OFFLINE');
    expect(classify(new TypeError('The client is offline')).kind).toBe('unknown');
    expect(classify(new Error('The client is offline, says the proxy')).kind).toBe('unknown');
    expect(classify(Object.assign(new Error('x'), { name: 'MaxRetriesPerRequestError', code: 'E1' })).code).not.toBe('MAX_RETRIES_PER_REQUEST');
  });
});
