/**
 * undici's own Agent options given at a GuardedAgent's top level, as a user moving from
 * `new Agent({ connect: { lookup } })` writes them: they were silently dropped. The request then
 * went to real DNS (ENOTFOUND after 1.5 s), the name opened, and every later request to it was
 * refused for every client on the breaker. They are now refused at construction, naming where
 * they go; under `undici` they are honoured.
 */
import type dns from 'node:dns';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { answer, guarded, httpServer, leakChecked } from './helpers.js';

leakChecked();

describe('GuardedAgent: undici Agent options at the top level', () => {
  it.each(['connect', 'connections', 'pipelining', 'keepAliveTimeout', 'maxResponseSize', 'interceptors', 'localAddress'])(
    '%s is refused with a TypeError saying to pass it under undici',
    (key) => {
      expect(() => new GuardedAgent({ [key]: 1 } as never)).toThrow(TypeError);
      expect(() => new GuardedAgent({ [key]: 1 } as never)).toThrow(`${key} is an undici Agent option: pass it as undici: { ${key} }`);
      void new GuardedAgent({ [key]: undefined } as never).destroy(); // undefined is unset, as for every option (a spread config)
    },
  );

  it('retry, as Http2Client and GrpcGuard take it, is refused naming the top-level options (was: warned about and ignored, so retry: false left every retry on; an outside review)', () => {
    expect(() => new GuardedAgent({ retry: false } as never)).toThrow('retry is not a GuardedAgent option: its retry options are top-level (maxAttempts, backoff, budget, timeout...); maxAttempts: 1 turns retries off');
    expect(() => new GuardedAgent({ retry: { maxAttempts: 4 } } as never)).toThrow(TypeError);
    void new GuardedAgent({ retry: undefined } as never).destroy();
  });

  it("connect.lookup under undici is the one used: a name only it knows is served, with one lookup per dial", async () => {
    await using server = await httpServer(answer(200, 'via lookup'));
    let lookups = 0;
    const lookup = ((_name: string, options: dns.LookupOptions, cb: (...args: unknown[]) => void) => {
      lookups++;
      if (options?.all === true) cb(null, [{ address: '127.0.0.1', family: 4 }]);
      else cb(null, '127.0.0.1', 4);
    }) as never;
    const { agent } = guarded({ undici: { connect: { lookup } } });
    const res = await request(`http://only-the-lookup-knows.test:${server.port}/`, { dispatcher: agent });
    expect(await res.body.text()).toBe('via lookup');
    expect(lookups).toBe(1);
  });
});
