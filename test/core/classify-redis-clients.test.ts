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

  // An outside review (seed 004's EOF, redis's words for it): a BLPOP long poll through retry()
  // whose connection was killed mid-wait failed at once with 3.5 s of a 5 s deadline left, plain
  // and guarded alike, where the same long poll over axios or got was sent again.
  it("node-redis's SocketClosedUnexpectedlyError (its socket closed under sent commands): a connection failure, transient, maybe sent", () => {
    const { SocketClosedUnexpectedlyError } = require('@redis/client/dist/lib/errors.js') as { SocketClosedUnexpectedlyError: new () => Error };
    expect(classify(new SocketClosedUnexpectedlyError())).toMatchObject({ kind: 'connection', notSent: false, transient: true, connectionDead: true, code: 'SOCKET_CLOSED_UNEXPECTEDLY' });
  });

  it("ioredis's AbortError for a command its closed connection took with it (autoResendUnfulfilledCommands: false): a connection failure, not the caller's cancellation", () => {
    const { AbortError } = require('redis-errors') as { AbortError: new (m: string) => Error };
    const err = new AbortError('Command aborted due to connection close');
    expect(err.name).toBe('AbortError');
    expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, transient: true, connectionDead: true, code: 'COMMAND_ABORTED' });
    expect(classify(new AbortError('Cluster is ended.')).kind).toBe('cancelled'); // its other uses stay as they were
  });

  it("ioredis's 'Connection is closed.' (the client ended: its queue flushed, sent commands among them): a connection failure, transient, maybe sent", async () => {
    const client = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true });
    client.disconnect(); // ended
    const err = await client.ping().catch((e: unknown) => e);
    expect((err as Error).message).toBe('Connection is closed.');
    expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, transient: true, connectionDead: false, code: 'CONNECTION_CLOSED' });
  });

  it("node-redis's ConnectionTimeoutError (its connectTimeout, before the socket connected): a failed dial, not sent, transient", () => {
    const { ConnectionTimeoutError } = require('@redis/client/dist/lib/errors.js') as { ConnectionTimeoutError: new () => Error };
    // Was unknown: retry() over a guarded TLS client on a dead node gave up at once (an outside review).
    expect(classify(new ConnectionTimeoutError())).toMatchObject({ kind: 'dial', code: 'CONNECTION_TIMEOUT', notSent: true, transient: true });
    expect(classify(Object.assign(new Error('Connection timeout'), { code: 'E1' })).code).not.toBe('CONNECTION_TIMEOUT');
    expect(classify(new TypeError('Connection timeout')).kind).toBe('unknown');
  });

  it('the same words in another shape are not taken for them: a code of its own, another name, more text', () => {
    expect(classify(Object.assign(new Error('The client is offline'), { code: 'EOTHER' })).code).not.toBe('CLIENT_OFFLINE');
    expect(classify(new TypeError('The client is offline')).kind).toBe('unknown');
    expect(classify(new Error('The client is offline, says the proxy')).kind).toBe('unknown');
    expect(classify(Object.assign(new Error('x'), { name: 'MaxRetriesPerRequestError', code: 'E1' })).code).not.toBe('MAX_RETRIES_PER_REQUEST');
    expect(classify(Object.assign(new Error('Socket closed unexpectedly'), { code: 'E1' })).code).not.toBe('SOCKET_CLOSED_UNEXPECTEDLY');
    expect(classify(new RangeError('Socket closed unexpectedly')).kind).toBe('unknown');
    const aborted = Object.assign(new Error('Command aborted due to connection close'), { name: 'AbortError', code: 'ABORT_ERR' });
    expect(classify(aborted).kind).toBe('cancelled'); // a code of its own: Node's AbortError
    expect(classify(new Error('Command aborted due to connection close')).kind).toBe('unknown'); // not an AbortError
    expect(classify(new Error('Connection is closed')).kind).toBe('unknown'); // without ioredis's full stop
  });
});
