import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { blackhole } from '../../src/testing/blackhole.js';
import { acceptAndHold, echoPeer, refusing, resetOnAccept } from '../../src/testing/tcp-peers.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { probe } from '../helpers/sockets.js';

leakCheckEach();


describe('fault peers', () => {
  it('blackhole (accept-queue): connects never complete, until the host heals and echoes', async () => {
    const peer = await blackhole();
    expect(peer).toMatchObject({ kind: 'blackhole', mode: 'accept-queue', host: '127.0.0.1', healed: false });
    const outcomes = await Promise.all([probe(peer.host, peer.port, 150), probe(peer.host, peer.port, 150)]);
    expect(outcomes).toEqual([{ connected: false }, { connected: false }]);
    await peer.heal();
    expect(await probe(peer.host, peer.port, 2_000, 'back')).toEqual({ connected: true, data: 'back' });
    await peer.close();
  });

  it('blackhole: a second heal() waits for the first, so a connect right after either completes at once (was: the second returned before the worker accepted, and 9 of 10 such connects came 1 s later)', async () => {
    const peer = await blackhole();
    const first = peer.heal();
    await peer.heal(); // the second caller, the first not awaited
    const started = performance.now();
    expect(await probe(peer.host, peer.port, 2_000, 'back')).toEqual({ connected: true, data: 'back' });
    expect(performance.now() - started).toBeLessThan(900); // not a SYN retransmission (1 s)
    await first;
    await peer.close();
  });

  it('blackhole: connects racing heal() are never refused (was: heal closed the listener and bound a new one, and a connect in between was refused; an outside review, 6 of 2 400)', async () => {
    let refused = 0;
    let connected = 0;
    for (let round = 0; round < 4; round++) {
      const peer = await blackhole();
      const outcomes: Array<Promise<void>> = [];
      let healing = true;
      const connectOne = (): Promise<void> =>
        new Promise((resolve) => {
          const socket = net.connect({ host: peer.host, port: peer.port });
          const timer = setTimeout(() => socket.destroy(), 2_500); // a SYN dropped before the heal: its retransmit lands after it
          socket.once('connect', () => {
            connected++;
            clearTimeout(timer);
            socket.destroy();
            resolve();
          });
          socket.once('error', (err: NodeJS.ErrnoException) => {
            if (err.code === 'ECONNREFUSED') refused++;
            clearTimeout(timer);
            resolve();
          });
          socket.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
        });
      const fire = (): void => {
        if (!healing || outcomes.length >= 2_000) return;
        for (let i = 0; i < 16; i++) outcomes.push(connectOne());
        setImmediate(fire);
      };
      const healed = peer.heal();
      fire();
      await healed;
      await new Promise((resolve) => setTimeout(resolve, 20));
      healing = false;
      await Promise.all(outcomes);
      await peer.close();
    }
    expect(refused).toBe(0);
    expect(connected).toBeGreaterThan(0);
  });

  it('blackhole: heal() counts none of the connections it filled its own queue with', async () => {
    await using peer = await blackhole();
    await peer.heal();
    expect(await probe(peer.host, peer.port, 2_000, 'back')).toEqual({ connected: true, data: 'back' });
    expect(await eventually(() => peer.attempts, (n) => n >= 1)).toBe(1); // the probe alone
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(peer.attempts).toBe(1);
  });

  it('blackhole: a port in use is the listen error, its code kept (was: a plain Error, no code)', async () => {
    await using first = await blackhole();
    await expect(blackhole({ port: first.port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  it('blackhole works on ::1 too', async () => {
    await using peer = await blackhole({ host: '::1' });
    expect(peer.address).toBe(`[::1]:${peer.port}`);
    expect(await probe('::1', peer.port, 150)).toEqual({ connected: false });
  });

  it('accept-and-hold: accepts, never sends, counts each connection', async () => {
    await using peer = await acceptAndHold();
    const outcomes = await Promise.all([1, 2, 3].map(() => probe(peer.host, peer.port, 100, 'hello?')));
    expect(outcomes.every((o) => o.connected && o.data === undefined && o.error === undefined)).toBe(true);
    expect(await eventually(() => peer.attempts, (n) => n >= 3)).toBe(3);
  });

  it('reset-on-accept: the client sees ECONNRESET', async () => {
    await using peer = await resetOnAccept();
    const out = await probe(peer.host, peer.port, 1_000, 'x');
    expect(out.error).toBe('ECONNRESET');
    expect(peer.attempts).toBe(1);
  });

  it('refusing: ECONNREFUSED at once, and it says it cannot count', async () => {
    await using peer = await refusing();
    expect((await probe(peer.host, peer.port, 1_000)).error).toBe('ECONNREFUSED');
    expect(() => peer.attempts).toThrow(/cannot observe/);
  });

  it('refusing on a port something listens on fails with EADDRINUSE, as every other peer does (it returned a "refusing" peer whose connects were accepted; an outside review)', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      await expect(refusing({ port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
      await using free = await refusing({ port: 0 });
      await using again = await refusing({ port: free.port }); // a port nothing listens on, given
      expect((await probe(again.host, again.port, 1_000)).error).toBe('ECONNREFUSED');
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it('echo: echoes, can be killed mid-connection (RST) and restarted on the same port', async () => {
    const peer = await echoPeer();
    expect(await probe(peer.host, peer.port, 1_000, 'one')).toMatchObject({ connected: true, data: 'one' });
    const held = net.connect({ host: peer.host, port: peer.port });
    const heldError = new Promise<string | undefined>((resolve) => {
      held.on('error', (e: NodeJS.ErrnoException) => resolve(e.code));
      held.on('close', () => resolve(undefined));
    });
    await new Promise((resolve) => held.once('connect', resolve));
    await eventually(() => peer.openSockets, (n) => n === 1);
    const port = peer.port;
    await peer.kill();
    expect(await heldError).toBe('ECONNRESET');
    expect((await probe(peer.host, port, 1_000)).error).toBe('ECONNREFUSED');
    await peer.listen();
    expect(peer.port).toBe(port);
    expect(await probe(peer.host, port, 1_000, 'two')).toMatchObject({ data: 'two' });
    await peer.close();
    expect(peer.openSockets).toBe(0);
  });

  it('binds loopback only', async () => {
    await expect(echoPeer({ host: '0.0.0.0' as '127.0.0.1' })).rejects.toThrow(/loopback only/);
    await expect(blackhole({ host: '10.0.0.1' as '127.0.0.1' })).rejects.toThrow(/loopback only/);
  });
});
