/** Test plumbing for node:http2 servers: listen on loopback, and close with every session. */
import type http2 from 'node:http2';
import { listenLoopback } from '../helpers/listen.js';

/**
 * Listens `server` on 127.0.0.1 (a free port) and registers with `cleanup` its close, which
 * destroys the sessions still open first (a session keeps a server's close waiting). Its port.
 */
export function listenH2(server: http2.Http2Server | http2.Http2SecureServer, cleanup: Array<() => unknown>): Promise<number> {
  return listenLoopback(server, cleanup, 'session');
}
