/**
 * A connect the kernel completed while a long tick blocked the event loop: Node runs expired
 * timers before it polls for I/O, so the dial's timer fired first and the dial failed with
 * ConnectTimeoutError though its socket was up (870 of a 4 000-connection burst, the client busy
 * with it). The dial now decides after one poll. Real sockets on 127.0.0.1, a real clock.
 */
import { describe, expect, it } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** Blocks the event loop for `ms`. */
function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('dial: a connect heard after its timer, the loop blocked meanwhile', () => {
  it('connects (was: ConnectTimeoutError), and counts nothing against the host', async () => {
    const peer = await echoPeer();
    cleanup.push(() => peer.close());
    const { port } = peer;
    const breaker = new HostBreaker();
    const dialled = connect({ host: '127.0.0.1', port }, { timeout: 50, breaker }).then(
      (socket) => {
        socket.destroy();
        return 'connected';
      },
      (err: unknown) => err,
    );
    // Let the connect go out (net issues it on a later tick), then hold the loop past the bound.
    await new Promise<void>((resolve) => process.nextTick(resolve));
    await new Promise<void>((resolve) => process.nextTick(resolve));
    block(150);
    expect(await dialled).toBe('connected');
    expect(breaker.state(`127.0.0.1:${port}`)?.failures ?? 0).toBe(0);
  });
});
