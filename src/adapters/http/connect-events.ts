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
 * `socket._httpMessage`, adds its own listeners to the socket (`'error'` first), then emits the
 * request's `'socket'`, then writes the request. A `'newListener'` listener on the socket hears
 * the first of those with `_httpMessage` set and adds a listener of its own to that request's
 * `'socket'`, last, then goes. (It was a one-shot setter on `_httpMessage`: redefining that
 * property gave each socket a hidden class of its own with a large property store, ~2.4 KB more
 * heap a keep-alive connection: axios over 5 000 hosts held 23 MB more than Node's agent, and
 * took 27 % longer; an outside review, r144.)
 *
 * @module
 */
import type { EventEmitter } from 'node:events';
import type net from 'node:net';

/** Makes `socket`, newly connected, emit its connect events to the first request that rides it (see the module docs). */
export function announceConnected(socket: net.Socket, secure: boolean): void {
  if ((socket as { _httpMessage?: unknown })._httpMessage != null) return; // bound already: nothing to announce to
  const bound = (): void => {
    const req = (socket as { _httpMessage?: unknown })._httpMessage;
    if (typeof req !== 'object' || req === null || typeof (req as EventEmitter).once !== 'function') return; // the agent's own listeners, before the binding
    socket.removeListener('newListener', bound);
    (req as EventEmitter).once('socket', () => {
      if (socket.destroyed) return;
      socket.emit('connect');
      if (!socket.destroyed) socket.emit('ready');
      if (secure && !socket.destroyed) socket.emit('secureConnect');
    });
  };
  socket.on('newListener', bound);
}
