/**
 * connect() given its target the way a hurried user does (an outside review, r129): a URL or
 * `host:port` as the host with no port said "port must be a number, got undefined", hiding the
 * mistake; a string target said the same; an empty port string was admitted, keyed as the bare
 * host, and failed with Node's ERR_SOCKET_BAD_PORT inside the dial. Each is now a TypeError
 * naming the mistake, before the breaker hears of it.
 */
import { describe, expect, it } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import type { ConnectTarget } from '../../src/guard/connect.js';

/** The TypeError connect() rejects with, and whether the breaker was asked. */
async function mistake(target: unknown): Promise<{ error: unknown; asked: number }> {
  const breaker = new HostBreaker();
  let asked = 0;
  const tryAdmit = breaker.tryAdmit.bind(breaker);
  breaker.tryAdmit = ((...args: Parameters<HostBreaker['tryAdmit']>) => {
    asked++;
    return tryAdmit(...args);
  }) as HostBreaker['tryAdmit'];
  const error = await connect(target as ConnectTarget, { breaker, timeout: 500 }).then(
    (s) => {
      s.destroy();
      return undefined;
    },
    (err: unknown) => err,
  );
  return { error, asked };
}

describe('connect(): target mistakes named', () => {
  it.each([
    [{ host: 'http://127.0.0.1:16429' }, 'host must be a name or an IP address (the port goes in port)'],
    [{ host: '127.0.0.1:16429' }, 'host must be a name or an IP address (the port goes in port)'],
    ['127.0.0.1:16429', 'target must be { host, port }'],
    [null, 'target must be { host, port }'],
    [{ host: '127.0.0.1', port: '' }, 'port must be a number, got ""'],
    [{ host: '127.0.0.1', port: '  ' }, 'port must be a number'],
    [{ host: '127.0.0.1' }, 'port must be a number, got undefined'],
    [{ host: '::1' }, 'port must be a number, got undefined'],
    [{ host: '127.0.0.1:16429', port: null }, 'port must be a number, got null'],
    [{ host: 5 }, 'port must be a number, got undefined'],
  ])('%j: %s', async (target, message) => {
    const { error, asked } = await mistake(target);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain(message);
    expect(asked).toBe(0);
  });
});
