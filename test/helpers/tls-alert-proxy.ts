/**
 * A TCP proxy in front of a TLS server that sends a plaintext fatal `internal_error` alert record
 * (`15 03 03 00 02 02 50`) where a test wants it: in answer to a connection's ClientHello (a
 * terminator whose backend is restarting: the handshake fails with
 * ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR), or into a live session (`inject()`: the client fails with
 * ERR_SSL_BAD_RECORD_TYPE, a code a handshake also fails with).
 */
import net from 'node:net';

/** A fatal internal_error alert, unencrypted. */
const ALERT = Buffer.from('15030300020250', 'hex');

export interface AlertProxy {
  readonly port: number;
  /** Connections accepted so far (refused handshakes included). */
  readonly accepted: number;
  /** Writes the alert into every live piped connection, towards the client. */
  inject(): void;
  close(): Promise<void>;
}

/**
 * Proxies to `127.0.0.1:upstream`; connection number `i` (from 0) whose `refuse(i)` is true gets
 * the alert for its ClientHello and is closed.
 */
export async function alertProxy(upstream: number, refuse: (i: number) => boolean = () => false): Promise<AlertProxy> {
  const links: net.Socket[] = [];
  let accepted = 0;
  const server = net.createServer((down) => {
    down.on('error', () => {});
    links.push(down);
    if (refuse(accepted++)) {
      down.once('data', () => down.end(ALERT));
      return;
    }
    const up = net.connect(upstream, '127.0.0.1');
    up.on('error', () => {}).on('close', () => down.destroy());
    down.on('close', () => up.destroy());
    down.pipe(up).pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get accepted() {
      return accepted;
    },
    inject: () => {
      for (const link of links) if (!link.destroyed) link.write(ALERT);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const link of links) link.destroy();
        server.close(() => resolve());
      }),
  };
}
