/**
 * A breaker key as OpenTelemetry's server.address and server.port (an outside review: the key
 * whole, `127.0.0.1:46824`, was given as the address, and no port).
 */
import { describe, expect, it } from 'vitest';
import { serverAttributes } from '../../../src/adapters/otel/tracing.js';

describe('otel serverAttributes', () => {
  it.each([
    ['127.0.0.1:46824', { 'server.address': '127.0.0.1', 'server.port': 46824 }],
    ['db.test:5432', { 'server.address': 'db.test', 'server.port': 5432 }],
    ['[::1]:443', { 'server.address': '::1', 'server.port': 443 }],
    ['[fe80::1%eth0]:80', { 'server.address': 'fe80::1%eth0', 'server.port': 80 }],
    ['localhost:0', { 'server.address': 'localhost', 'server.port': 0 }],
  ])('%s: the host alone, and the port', (key, attributes) => {
    expect(serverAttributes(key)).toEqual(attributes);
  });

  it.each(['svc', '::1', ':80', 'h:', 'h:http', 'h:99999', 'h:123456', 'fe80::1:80'])('%s: no port to tell apart, the key whole', (key) => {
    expect(serverAttributes(key)).toEqual({ 'server.address': key });
  });
});
