/** Test plumbing for node:http2 servers: listen on loopback, and close with every session. */
import type http2 from 'node:http2';
import type net from 'node:net';

/**
 * Listens `server` on 127.0.0.1 (a free port) and registers with `cleanup` its close, which
 * destroys the sessions still open first (a session keeps a server's close waiting). Its port.
 */
export async function listenH2(server: http2.Http2Server | http2.Http2SecureServer, cleanup: Array<() => unknown>): Promise<number> {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}
