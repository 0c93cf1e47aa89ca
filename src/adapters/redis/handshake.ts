/**
 * The Redis clients' handshake, bounded. Neither client bounds what follows TCP connect: ioredis's
 * `connectTimeout` and node-redis's end there, and then ioredis waits for its ready check (INFO)
 * and node-redis for its handshake (CLIENT SETINFO, HELLO, AUTH, SELECT) with no bound. On a
 * frozen or accept-and-hold node the client waits forever, its dial never reported. The guard
 * ends such a dial: {@link boundHandshake} destroys a connection that has received nothing when
 * its dial's `connectTimeout` is over (rule 6: one bound on the whole dial), and any byte from
 * the server ends the bound (a reply proves the node alive, rule 1).
 *
 * ioredis hands the guard its socket (the guard's `Connector` makes it). node-redis does not: its
 * socket is picked up from net's `net.client.socket` channel, which `net.connect` publishes just
 * before it calls the socket's `lookup` (the guard's gate) in the same synchronous call, see
 * {@link takeConnectingSocket}.
 *
 * @module
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type net from 'node:net';

/** The socket `net.connect` published last, until the end of the current synchronous run. */
let latest: net.Socket | undefined;
let watching = false;

function onSocket(message: unknown): void {
  latest = (message as { socket: net.Socket }).socket;
  queueMicrotask(() => {
    latest = undefined;
  });
}

/**
 * Starts picking up the sockets `net.connect` makes (once per process; a function call per new
 * client socket, nothing kept past the synchronous run that made it).
 */
export function watchConnectingSockets(): void {
  if (watching) return;
  watching = true;
  diagnosticsChannel.subscribe('net.client.socket', onSocket);
}

/**
 * Inside a socket's `lookup`, called by `net.connect` in the same synchronous run that made the
 * socket: that socket, once (undefined anywhere else, or if it is not connecting).
 */
export function takeConnectingSocket(): net.Socket | undefined {
  const socket = latest;
  latest = undefined;
  return socket !== undefined && socket.connecting && !socket.destroyed ? socket : undefined;
}

/**
 * Destroys `socket` with `timeoutError()` if, `ms` from now, it has received nothing and
 * `unreported()` still holds (its dial was neither a success nor a failure yet). `timeoutError`
 * may answer a number instead: wait that many ms more and ask again (a stage with a longer
 * bound has begun). The timer is unref'd and cleared when the socket closes.
 */
export function boundHandshake(socket: net.Socket, ms: number, unreported: () => boolean, timeoutError: () => Error | number): void {
  if (socket.destroyed) return;
  let timer: NodeJS.Timeout;
  const stop = (): void => {
    clearTimeout(timer);
  };
  const arm = (after: number): void => {
    timer = setTimeout(() => {
      if (socket.bytesRead !== 0 || socket.destroyed || !unreported()) {
        socket.off('close', stop);
        return;
      }
      const answer = timeoutError();
      if (typeof answer === 'number') return arm(answer);
      socket.off('close', stop);
      socket.destroy(answer);
    }, Math.max(0, after));
    timer.unref();
  };
  arm(ms);
  socket.once('close', stop);
}
