/**
 * The connect events of a socket the guarded agents dialled, for its first request's listeners.
 *
 * Node's agent hands a request its socket while it connects: listeners a user adds on `'socket'`
 * hear its `'connect'`, `'ready'` and (TLS) `'secureConnect'`. A guarded agent hands it over only
 * once its dial is over, connected, so they heard nothing: the widely copied certificate pin
 * (`req.on('socket', s => s.on('secureConnect', check))`) was skipped silently, and every request
 * went to an unpinned peer (an outside review). Each socket a guarded dial brings now emits them
 * once, to the first request that rides it, right after that request's `'socket'` listeners ran
 * and before Node writes the request: a pin that destroys the socket then sends nothing, as on
 * Node's agent. Code that checks `socket.connecting` first sees a connected socket, as for a
 * kept-alive one (got's timings count the dial as the wait before the socket).
 *
 * How: Node binds a request to its socket in one synchronous step (its `tickOnSocket`): it sets
 * `socket._httpMessage`, then emits the request's `'socket'`, then writes the request. A one-shot
 * setter on that field hears the binding and adds a listener of its own to that `'socket'`, last.
 *
 * @module
 */
import type { EventEmitter } from 'node:events';
import type net from 'node:net';

/** Makes `socket`, newly connected, emit its connect events to the first request that rides it (see the module docs). */
export function announceConnected(socket: net.Socket, secure: boolean): void {
  if (Object.prototype.hasOwnProperty.call(socket, '_httpMessage')) return;
  let message: unknown;
  Object.defineProperty(socket, '_httpMessage', {
    configurable: true,
    enumerable: false,
    get: () => message,
    set: (req: unknown) => {
      message = req;
      if (typeof req !== 'object' || req === null || typeof (req as EventEmitter).once !== 'function') return;
      // Bound: a plain field again, as Node keeps it, and the events go out once.
      Object.defineProperty(socket, '_httpMessage', { value: req, writable: true, configurable: true, enumerable: false });
      (req as EventEmitter).once('socket', () => {
        if (socket.destroyed) return;
        socket.emit('connect');
        if (!socket.destroyed) socket.emit('ready');
        if (secure && !socket.destroyed) socket.emit('secureConnect');
      });
    },
  });
}
