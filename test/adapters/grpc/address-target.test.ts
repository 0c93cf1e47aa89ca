/**
 * Which grpc targets the adapter dials per address (a DNS name dialguard resolves with the same
 * lookup grpc-js would), and which it leaves to grpc-js's own resolution, guarded by name.
 */
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { addressOptions, addressTarget, namedTarget } from '../../../src/adapters/grpc/address-target.js';

describe('namedTarget: the targets dialled per address', () => {
  it.each([
    ['svc.test:50051', { host: 'svc.test', port: 50051, authority: 'svc.test:50051' }],
    ['svc.test', { host: 'svc.test', port: 443, authority: 'svc.test' }],
    ['dns:///svc.test:50051', { host: 'svc.test', port: 50051, authority: 'svc.test:50051' }],
    ['dns:svc.test:8080', { host: 'svc.test', port: 8080, authority: 'svc.test:8080' }],
    ['localhost:1', { host: 'localhost', port: 1, authority: 'localhost:1' }],
  ])('%s is resolved by dialguard', (target, expected) => {
    expect(namedTarget(target, {}, {})).toEqual(expected);
  });

  it.each([
    ['127.0.0.1:50051', 'an IP address'],
    ['[::1]:50051', 'an IPv6 address'],
    ['ipv4:127.0.0.2:1,127.0.0.3:1', 'an address list'],
    ['dns://8.8.8.8/svc.test:50051', 'a DNS server named'],
    ['unix:/tmp/grpc.sock', 'a unix socket'],
    ['xds:///svc.test', 'another resolver'],
    ['mine:svc', 'a resolver the user registered'],
    ['svc.test:99999', 'a port out of range'],
  ])('%s is left to grpc-js (%s)', (target) => {
    expect(namedTarget(target, {}, {})).toBeUndefined();
  });

  it('a proxy from the environment leaves the name to grpc-js, unless grpc.enable_http_proxy is 0', () => {
    expect(namedTarget('svc.test:1', {}, { https_proxy: 'http://127.0.0.1:3128' })).toBeUndefined();
    expect(namedTarget('svc.test:1', {}, { grpc_proxy: 'http://127.0.0.1:3128' })).toBeUndefined();
    expect(namedTarget('svc.test:1', { 'grpc.enable_http_proxy': 0 }, { https_proxy: 'http://127.0.0.1:3128' })?.host).toBe('svc.test');
  });

  it('a balancer other than pick_first in grpc.service_config leaves the name to grpc-js (it must see every address)', () => {
    const config = (c: unknown): grpc.ChannelOptions => ({ 'grpc.service_config': JSON.stringify(c) });
    expect(namedTarget('svc.test:1', config({ loadBalancingConfig: [{ round_robin: {} }] }), {})).toBeUndefined();
    expect(namedTarget('svc.test:1', config({ loadBalancingConfig: [{ mine: {} }, { pick_first: {} }] }), {})).toBeUndefined();
    expect(namedTarget('svc.test:1', { 'grpc.service_config': '{not json' }, {})).toBeUndefined();
    // pick_first, said or implied: per address as before.
    expect(namedTarget('svc.test:1', config({ loadBalancingConfig: [{ pick_first: {} }, { round_robin: {} }] }), {})?.host).toBe('svc.test');
    expect(namedTarget('svc.test:1', config({ loadBalancingConfig: [] }), {})?.host).toBe('svc.test');
    // grpc-js 1.14 parses the older loadBalancingPolicy but never acts on it: still pick_first.
    expect(namedTarget('svc.test:1', config({ loadBalancingPolicy: 'round_robin' }), {})?.host).toBe('svc.test');
    expect(namedTarget('svc.test:1', config({ methodConfig: [{ name: [{}], timeout: '1s' }] }), {})?.host).toBe('svc.test');
  });

  it("grpc-js's alternative resolver leaves the name to grpc-js", () => {
    expect(namedTarget('svc.test:1', {}, { GRPC_NODE_USE_ALTERNATIVE_RESOLVER: 'true' })).toBeUndefined();
  });

  it('an address target per family, and options that keep the name as authority and TLS name unless set', () => {
    expect(addressTarget('127.0.0.2', 5)).toBe('ipv4:127.0.0.2:5');
    expect(addressTarget('::1', 5)).toBe('ipv6:[::1]:5');
    const named = namedTarget('svc.test:5', {}, {})!;
    expect(addressOptions({ a: 1 }, named)).toEqual({ a: 1, 'grpc.default_authority': 'svc.test:5', 'grpc.ssl_target_name_override': 'svc.test' });
    expect(addressOptions({ 'grpc.default_authority': 'x', 'grpc.ssl_target_name_override': 'y' }, named)).toEqual({
      'grpc.default_authority': 'x',
      'grpc.ssl_target_name_override': 'y',
    });
  });
});

describe("a guarded channel's getTarget() and an unsent call's getPeer(), as grpc-js spells them", () => {
  it.each(['127.0.0.1:50999', 'localhost:50999', '[::1]:50999', 'dns:///localhost:50999', 'dns:localhost:50999', 'ipv4:127.0.0.1:50999', 'unix:/tmp/none.sock'])(
    '%s: the same string as a plain grpc-js client (it dropped the dns: prefix; an outside review)',
    async (target) => {
      const { Client, credentials } = await import('@grpc/grpc-js');
      const { GrpcGuard } = await import('../../../src/adapters/grpc/index.js');
      const { HostBreaker } = await import('../../../src/guard/host-breaker.js');
      const guard = new GrpcGuard({ breaker: new HostBreaker() });
      const plain = new Client(target, credentials.createInsecure());
      const guarded = new Client(target, credentials.createInsecure(), guard.clientOptions());
      try {
        expect(guarded.getChannel().getTarget()).toBe(plain.getChannel().getTarget());
        // So does a call's getPeer() before a channel has taken it (it was the bare target; r138).
        const peers = [plain, guarded].map((client) => {
          const call = client.getChannel().createCall('/x.E/M', Infinity, undefined, null, 0);
          const peer = call.getPeer();
          call.cancelWithStatus(1, 'done');
          return peer;
        });
        expect(peers[1]).toBe(peers[0]);
      } finally {
        plain.close();
        guarded.close();
        await guard.close();
      }
    },
  );
});
