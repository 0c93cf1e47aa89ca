/** Test plumbing for TCP and TLS servers: listen on loopback, and close with every socket. */
import type net from 'node:net';

/** What a server hands its listeners and must destroy before it can close: a socket, an HTTP/2 session. */
interface Held {
  destroy(): void;
  on(event: 'close', listener: () => void): unknown;
}

/**
 * Listens `server` on 127.0.0.1 (a free port), keeping what it hands `event` ('connection', a TLS
 * server's 'secureConnection', an HTTP/2 server's 'session'), and registers with `cleanup` its
 * close, which destroys them first (a kept-alive socket or an open session holds a server's
 * close). Its port.
 */
export async function listenLoopback(server: net.Server, cleanup: Array<() => unknown>, event: 'connection' | 'secureConnection' | 'session' = 'connection'): Promise<number> {
  const sockets = new Set<Held>();
  server.on(event, (s: Held) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}
