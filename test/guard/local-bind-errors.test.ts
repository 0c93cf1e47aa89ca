/**
 * A dial that fails binding its own socket sent nothing to the host: a pinned `localPort` already
 * taken (`EADDRINUSE`), a `localAddress` of the other family (`EINVAL`), a privileged port
 * without the right (`EACCES`). They counted against the host, so one job's wrong socket options
 * opened a live server for every client of the shared breaker (an outside review: 30
 * `EADDRINUSE`, then 18 `DIALGUARD_HOST_UNAVAILABLE`, and 3 of 5 requests of a right client
 * refused; Node's agent served all 5). `EADDRNOTAVAIL` was already this process's own. Real
 * sockets on loopback; the right client's connections counted at the server.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { dialFailureOutcome } from '../../src/guard/dial-outcome.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

async function listening(onConnection: (s: net.Socket) => void = (s) => s.destroy()): Promise<net.Server> {
  const server = net.createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return server;
}

const portOf = (server: net.Server): number => (server.address() as net.AddressInfo).port;

describe("a dial failing on its own socket's bind never counts against the host", () => {
  it.each(['EADDRINUSE', 'EINVAL', 'EACCES', 'EAFNOSUPPORT'])('%s is this process\'s own: abandoned', (code) => {
    const err = Object.assign(new Error(`connect ${code}`), { code, syscall: 'connect' });
    expect(dialFailureOutcome(err)).toBe('abandoned');
    expect(dialFailureOutcome(new Error('wrapped', { cause: err }))).toBe('abandoned');
  });

  it.each([
    ['a localPort already taken', 'EADDRINUSE'],
    ['a localAddress of the other family', 'EINVAL'],
  ] as const)('%s (%s): 6 failed dials leave the host closed, and a right client connects', async (_name, code) => {
    let accepted = 0;
    const server = await listening((s) => {
      accepted++;
      s.destroy();
    });
    const busy = await listening();
    const socket = code === 'EADDRINUSE' ? { localAddress: '127.0.0.1', localPort: portOf(busy) } : { localAddress: '::1' };
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const codes: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      codes.push(await connect({ host: '127.0.0.1', port: portOf(server) }, { timeout: 1_000, breaker, socket }).then((s) => s.destroy(), (e: { code?: unknown }) => e.code));
    }
    expect(codes).toEqual(Array(6).fill(code)); // was: the 2nd on, DIALGUARD_HOST_UNAVAILABLE
    expect(breaker.state('127.0.0.1', portOf(server))?.state ?? 'closed').toBe('closed');
    const right = await connect({ host: '127.0.0.1', port: portOf(server) }, { timeout: 1_000, breaker });
    right.destroy();
    await expect.poll(() => accepted, { timeout: 1_000 }).toBe(1);
  });
});
