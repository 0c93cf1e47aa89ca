/**
 * The adapter's small parts, without sockets: Retry-After parsing, body replayability, and the
 * dial scout's one-dial-per-unproven-host rule.
 */
import { EventEmitter } from 'node:events';
import type tls from 'node:tls';
import { Readable } from 'node:stream';
import { errors } from 'undici';
import { describe, expect, it } from 'vitest';
import { DialScout } from '../../../src/adapters/undici/dial-scout.js';
import { requestBody } from '../../../src/adapters/undici/request-body.js';
import { retryAfterMs } from '../../../src/adapters/undici/retry-after.js';
import { watchErrors, withTlsAlert } from '../../../src/adapters/undici/tls-alert.js';
import { classify } from '../../../src/core/classify.js';

describe('retryAfterMs', () => {
  const wall = (): number => Date.parse('Sun, 06 Nov 1994 08:49:37 GMT');
  it.each([
    ['0', 0],
    ['3', 3_000],
    [' 120 ', 120_000],
    ['Sun, 06 Nov 1994 08:49:47 GMT', 10_000],
    ['Sunday, 06-Nov-94 08:49:47 GMT', 10_000],
    ['Sun, 06 Nov 1994 08:49:27 GMT', 0], // in the past: at once
  ])('%s -> %d ms', (value, ms) => {
    expect(retryAfterMs(value, wall)).toBe(ms);
  });
  it.each([[undefined], [''], ['-1'], ['1.5'], ['soon'], ['2026-01-01']])('%s -> undefined', (value) => {
    expect(retryAfterMs(value, wall)).toBeUndefined();
  });
  it('takes the first of repeated headers', () => {
    expect(retryAfterMs(['2', '9'], wall)).toBe(2_000);
  });
});

describe('requestBody', () => {
  it.each([[undefined], [null], ['text'], [Buffer.from('b')], [new Uint8Array(2)], [new ArrayBuffer(2)], [[Buffer.from('a')]], [new Blob(['x'])]])(
    '%o can always be sent again',
    (body) => {
      const b = requestBody(body);
      expect(b.forAttempt()).toBe(body);
      expect(b.consumed).toBe(false);
    },
  );

  it('a stream is consumed once anything reads it, and not before', async () => {
    const stream = Readable.from(['a', 'b']);
    const b = requestBody(stream);
    expect(b.forAttempt()).toBe(stream);
    expect(b.consumed).toBe(false);
    stream.on('data', () => {});
    expect(b.consumed).toBe(true);
    stream.destroy();
  });

  it('a generator is handed out wrapped, and consumed once an attempt starts iterating it', async () => {
    async function* gen(): AsyncGenerator<string> {
      yield 'x';
    }
    const b = requestBody(gen());
    const first = b.forAttempt() as AsyncIterable<string>;
    expect(b.consumed).toBe(false);
    const second = b.forAttempt() as AsyncIterable<string>; // an attempt that never started reading
    const chunks: string[] = [];
    for await (const c of second) chunks.push(c);
    expect(chunks).toEqual(['x']);
    expect(b.consumed).toBe(true);
    expect(first).not.toBe(second);
  });

  it('a sync iterable (not an array) is one-shot too', () => {
    const b = requestBody(new Set(['a']).values());
    const wrapped = b.forAttempt() as Iterable<string>;
    expect([...wrapped]).toEqual(['a']);
    expect(b.consumed).toBe(true);
  });
});

describe('DialScout', () => {
  /** A dial the test settles by hand, counting how many were started. */
  function dials(): { started: number; dial: () => Promise<string>; settle: (ok: boolean) => void } {
    const pending: Array<(ok: boolean) => void> = [];
    const state = {
      started: 0,
      dial: () => {
        state.started++;
        return new Promise<string>((resolve, reject) => pending.push((ok) => (ok ? resolve('socket') : reject(new Error('refused')))));
      },
      settle: (ok: boolean) => pending.shift()?.(ok),
    };
    return state;
  }

  it('an unproven host: one dial, and the others share its failure without dialling', async () => {
    const scout = new DialScout();
    const d = dials();
    const all = Array.from({ length: 10 }, () => scout.run('h:1', d.dial).catch((e: Error) => e.message));
    expect(d.started).toBe(1);
    d.settle(false);
    expect(await Promise.all(all)).toEqual(Array(10).fill('refused'));
    expect(d.started).toBe(1);
    expect(scout.proven('h:1')).toBe(false);
  });

  it('a held dial given `early` goes when it resolves, once, whatever the scout does after; before it, the scout decides as without', async () => {
    const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    for (const scoutOk of [true, false]) {
      const scout = new DialScout();
      const d = dials();
      const first = scout.run('h:1', d.dial).catch((e: Error) => e.message);
      let go!: () => void;
      const early = new Promise<void>((resolve) => (go = resolve));
      const held = scout.run('h:1', d.dial, undefined, early).catch((e: Error) => e.message);
      await flush();
      expect(d.started).toBe(1); // held until `early` or the scout
      go();
      await flush();
      expect(d.started).toBe(2); // went early
      d.settle(scoutOk); // the scout settles: nothing more starts
      d.settle(true);
      expect(await Promise.all([first, held])).toEqual([scoutOk ? 'socket' : 'refused', 'socket']);
      expect(d.started).toBe(2);
    }
    // The scout settles first: `early` resolving afterwards starts nothing; a shared failure is its answer.
    for (const scoutOk of [true, false]) {
      const scout = new DialScout();
      const d = dials();
      void scout.run('h:1', d.dial).catch(() => {});
      let go!: () => void;
      const held = scout.run('h:1', d.dial, undefined, new Promise<void>((resolve) => (go = resolve))).catch((e: Error) => e.message);
      d.settle(scoutOk);
      await flush();
      go();
      await flush();
      expect(d.started).toBe(scoutOk ? 2 : 1);
      d.settle(true);
      expect(await held).toBe(scoutOk ? 'socket' : 'refused');
    }
    // A dial that throws at once rejects the held call.
    const scout = new DialScout();
    const d = dials();
    void scout.run('h:1', d.dial).catch(() => {});
    const boom = scout.run('h:1', () => { throw new Error('boom'); }, undefined, Promise.resolve());
    await expect(boom).rejects.toThrow('boom');
    d.settle(true);
  });

  it('a scout that failed for a reason that says nothing of the host (a certificate it presented, its own TLS options) holds nobody: the others dial', async () => {
    for (const code of ['DEPTH_ZERO_SELF_SIGNED_CERT', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_SSL_NO_SUPPORTED_VERSIONS', 'EMFILE']) {
      const scout = new DialScout();
      let started = 0;
      const failing = Object.assign(new Error(code), { code });
      let fail!: (err: Error) => void;
      const first = scout.run('h:1', () => {
        started++;
        return new Promise<string>((_, reject) => (fail = reject));
      });
      const others = Array.from({ length: 3 }, () =>
        scout.run('h:1', () => {
          started++;
          return Promise.resolve('own socket');
        }),
      );
      fail(failing);
      await expect(first).rejects.toBe(failing);
      expect(await Promise.all(others), code).toEqual(Array(3).fill('own socket'));
      expect(started).toBe(4);
    }
  });

  it('once the scout connects, the others dial at once, in parallel; a proven host is never held', async () => {
    const scout = new DialScout();
    const d = dials();
    const all = Array.from({ length: 5 }, () => scout.run('h:1', d.dial));
    d.settle(true);
    await new Promise((r) => setImmediate(r));
    expect(d.started).toBe(5);
    for (let i = 0; i < 4; i++) d.settle(true);
    expect(await Promise.all(all)).toEqual(Array(5).fill('socket'));
    expect(scout.proven('h:1')).toBe(true);
    const more = Array.from({ length: 3 }, () => scout.run('h:1', d.dial));
    expect(d.started).toBe(8);
    for (let i = 0; i < 3; i++) d.settle(i < 2);
    await Promise.allSettled(more);
    // The last dial failed: the host is unproven again, and the next burst is scouted.
    expect(scout.proven('h:1')).toBe(false);
  });

  it('hosts are scouted independently', () => {
    const scout = new DialScout();
    const d = dials();
    void scout.run('a:1', d.dial);
    void scout.run('b:1', d.dial);
    expect(d.started).toBe(2);
    d.settle(true);
    d.settle(true);
  });
});

describe('tls-alert: which alerts become a bare SocketError\'s cause', () => {
  let port = 40_000;
  /** A connected TLS socket's stand-in, with its ends and the bytes it read; emits the alert, then closes. */
  function alerted(code: string, bytesRead: number): errors.SocketError {
    const ends = { localAddress: '127.0.0.1', localPort: ++port, remoteAddress: '127.0.0.1', remotePort: 443 };
    const socket = Object.assign(new EventEmitter(), ends, { bytesRead, encrypted: true });
    watchErrors(socket as unknown as tls.TLSSocket);
    socket.emit('error', Object.assign(new Error(code), { code }));
    const err = new errors.SocketError('other side closed', ends as never);
    withTlsAlert(err);
    socket.emit('close');
    return err;
  }

  it('a configuration alert before any answer (certificate required): the cause, so the request reads as never sent, and is not retried', () => {
    const err = alerted('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 0);
    expect((err as { cause?: { code?: string } }).cause?.code).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, transient: false });
  });

  it('an alert on a connection that has answered, or one that is not about configuration (internal_error): no cause, a dead connection, maybe sent', () => {
    for (const err of [alerted('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 512), alerted('ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR', 0)]) {
      expect((err as { cause?: unknown }).cause).toBeUndefined();
      expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, connectionDead: true });
    }
  });

  it("a watched socket's own error is a live connection's, whatever its code: a handshake's SSL code, an unreachable host, on TLS or not (maybe sent)", () => {
    for (const [code, encrypted] of [['ERR_SSL_BAD_RECORD_TYPE', true], ['ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR', true], ['EHOSTUNREACH', false], ['ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', false]] as const) {
      const socket = Object.assign(new EventEmitter(), { bytesRead: 0, encrypted });
      watchErrors(socket as unknown as tls.TLSSocket);
      const err = Object.assign(new Error(code), { code });
      expect(classify(err).kind).toBe('dial'); // before the socket emits it
      socket.emit('error', err);
      expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, connectionDead: true, code });
    }
  });
});

