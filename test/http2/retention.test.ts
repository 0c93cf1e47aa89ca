/**
 * What a finished exchange leaves reachable from its stream (issue 14). node:http2 may keep a
 * finished stream, and so whatever its listeners capture, past a young-generation GC; everything
 * kept that way is copied by the GC on every call. Measured on the healthy lane: ~5.8 KB survived
 * a scavenge per guarded call against ~4.4 KB per raw call, ~4.1 KB once the listeners let go of
 * the lease (the pool's ride, its callback, the call's URL and options) and of the settled
 * promise (the response, its headers and body). Proved here by reachability, not by timing.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { exchange } from '../../src/http2/exchange.js';
import type { Lease } from '../../src/pool/pooled-connection.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { collectGarbage as collect } from '../helpers/gc.js';


describe('exchange: what a settled stream keeps', () => {
  it('a finished stream, still held, keeps neither the lease nor the response reachable', async () => {
    await using peer = await http2Peer();
    const session = http2.connect(peer.origin);
    await new Promise<void>((resolve, reject) => {
      session.once('remoteSettings', () => resolve());
      session.once('error', reject);
    });
    try {
      // The stream the exchange opens, held strongly here as node:http2 may hold it.
      const streams: http2.ClientHttp2Stream[] = [];
      const watched = new Proxy(session, {
        get(target, key) {
          if (key === 'request') {
            return (headers: http2.OutgoingHttpHeaders) => {
              const stream = target.request(headers);
              streams.push(stream);
              return stream;
            };
          }
          const value: unknown = Reflect.get(target, key);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      let lease: Lease<http2.ClientHttp2Session> | undefined = {
        connection: watched,
        id: 7,
        target: peer.origin,
        signal: new AbortController().signal,
        turn: 1,
        commit: () => {},
      };
      const leaseRef = new WeakRef(lease);
      let response = await exchange(lease, new URL(`${peer.origin}/`), 'GET', {}, undefined, systemClock.now(), systemClock, undefined);
      expect(response).toMatchObject({ status: 200, connectionId: 7 });
      const responseRef = new WeakRef(response);
      const headersRef = new WeakRef(response.headers);
      lease = undefined;
      response = undefined as never;
      await collect();
      expect(streams).toHaveLength(1);
      expect(streams[0]!.closed).toBe(true);
      expect(leaseRef.deref()).toBeUndefined();
      expect(responseRef.deref()).toBeUndefined();
      expect(headersRef.deref()).toBeUndefined();
    } finally {
      await new Promise<void>((resolve) => session.close(() => resolve()));
    }
  });
});
