/** Test plumbing for TCP and TLS servers: listen on loopback, and close with every socket. */
import type net from 'node:net';

/**
 * Listens `server` on 127.0.0.1 (a free port), keeping the sockets it hands `event` ('connection',
 * or a TLS server's 'secureConnection'), and registers with `cleanup` its close, which destroys
 * them first (a kept-alive socket holds a server's close). Its port.
 */
export async function listenLoopback(server: net.Server, cleanup: Array<() => unknown>, event: 'connection' | 'secureConnection' = 'connection'): Promise<number> {
  const sockets = new Set<net.Socket>();
  server.on(event, (s: net.Socket) => {
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
