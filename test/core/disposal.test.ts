/**
 * Lifetimes that `await using` ends (issue 16, section 3): every closeable is an async
 * disposable, and every listener subscription a disposable.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { Http2Client } from '../../src/http2/index.js';
import { ConnectionPool, HostBreaker, PoolClosedError, onRetryEvent, registerClassifier, subscribe } from '../../src/index.js';

const noopConnector = { connect: async () => ({}), close: () => {} };

describe('await using', () => {
  it('closes a ConnectionPool, an Http2Client, a GuardedAgent and a GrpcGuard when the scope ends', async () => {
    let pool: ConnectionPool<object>;
    let client: Http2Client;
    let agent: GuardedAgent;
    let guard: GrpcGuard;
    {
      await using p = new ConnectionPool({ connector: noopConnector, breaker: null });
      await using c = new Http2Client({ breaker: null });
      await using a = new GuardedAgent({ breaker: null });
      await using g = new GrpcGuard({ breaker: null });
      pool = p;
      client = c;
      agent = a;
      guard = g;
    }
    await expect(pool.use('svc:1', async () => 'x')).rejects.toBeInstanceOf(PoolClosedError);
    await expect(client.request('http://127.0.0.1:1/')).rejects.toBeInstanceOf(PoolClosedError);
    expect(agent.closed).toBe(true);
    expect(() => guard.channel('127.0.0.1:1', grpc.credentials.createInsecure())).toThrow(/shut down/);
  });
});

describe('using', () => {
  it('a listener subscription ends with its scope: breaker.on, subscribe, onRetryEvent, registerClassifier', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const heard: string[] = [];
    {
      using _a = breaker.on('opened', () => heard.push('on'));
      using _b = subscribe('dialguard:breaker:opened', () => heard.push('subscribe'));
      using _c = onRetryEvent('scheduled', () => heard.push('retry'));
      using _d = registerClassifier({ patterns: [] });
      breaker.admit('h:1').failed(new Error('x'));
    }
    expect(heard).toEqual(['on', 'subscribe']);
    breaker.reset('h:1');
    breaker.admit('h:1').failed(new Error('x'));
    expect(heard).toEqual(['on', 'subscribe']); // nothing more: both ended with the scope
    expect(diagnosticsChannel.channel('dialguard:breaker:opened').hasSubscribers).toBe(false);
  });
});
