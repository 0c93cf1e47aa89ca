/**
 * A TCP or TLS connect bounded end to end: DNS lookup, TCP connect, TLS handshake and an optional
 * protocol handshake, all under one timeout, guarded by a {@link HostBreaker}.
 *
 * @module
 */
import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import { DEFAULT_ATTEMPT_DELAY, connectAddresses, refuseFromMemory, tlsForName } from './addresses.js';
import { systemClock } from '../core/clock.js';
import { TransportClosedError } from '../core/errors.js';
import { DEFAULT_CONNECT_TIMEOUT, type DialContext, type DialOptions, breakerOption, dialWith, sharedBreaker, watchAddress } from './dial.js';
import { localFailure, noAddressOfOwnChoice } from './dial-outcome.js';
import { type Transport, tlsTransport } from './host-breaker.js';
import { hostKey } from './host-key.js';
import { checkDuration, checkFunction, opt, show } from '../core/validate.js';
import { caughtIdentityCheck } from './identity-check.js';

/** Where to connect. */
export interface ConnectTarget {
  host: string;
  port: number;
}

/** Options of {@link connect}: those of `dial` plus the socket's. */
export interface ConnectOptions extends Omit<DialOptions<net.Socket>, 'transport'> {
  /**
   * TLS: `true` for defaults, or `tls.connect` options (reuse one `secureContext` per target
   * rather than building one per dial). The handshake runs inside the timeout, phase `tls`.
   * `servername` defaults to the host when it is a name, not an IP address.
   */
  tls?: boolean | tls.ConnectionOptions;
  /**
   * A protocol handshake to run on the connected socket, inside the same timeout (phase
   * `handshake`). Reject to fail the dial; watch `ctx.signal` to stop when the dial is given up.
   */
  handshake?: (socket: net.Socket, ctx: DialContext) => Promise<void>;
  /** Other `net.connect` options (family, localAddress, lookup, keepAlive, ...). */
  socket?: Omit<net.TcpNetConnectOpts, 'host' | 'port' | 'timeout'>;
  /**
   * Guard each address of a name apart (default `true`): the name is resolved (with the
   * `lookup` given, if any), each dial is recorded against its address's own breaker entry
   * (`address:port`), open addresses are skipped, and the name is refused only when all of its
   * addresses are open. Why: one dead pod or record must neither cost every request a timeout nor
   * open the name for its live siblings. `false`: the name is one entry and Node resolves it (as
   * before). An IP literal is always its own single entry.
   */
  perAddress?: boolean;
  /**
   * With `perAddress`, ms before the next address is dialled alongside one that has not
   * connected yet. Default {@link DEFAULT_ATTEMPT_DELAY} (250, Node's and RFC 8305's): a live
   * address connects within it, so a dead one costs a request at most this, until it opens.
   */
  attemptDelay?: number;
}

/**
 * Connects to `target` and resolves with the connected socket (a `TLSSocket` when `tls` is set).
 * The socket is destroyed on any failure; on success the caller owns it and must attach its own
 * `'error'` listener.
 *
 * Rejects with `HostUnavailableError` (breaker refused, no I/O), `ConnectTimeoutError` (naming the
 * stalled phase), the caller's `signal.reason`, or the socket's own error (e.g. `ECONNREFUSED`).
 */
export function connect(target: ConnectTarget, options: ConnectOptions = {}): Promise<net.Socket> {
  let key: string;
  try {
    // Checked whichever way the dial goes: an IP literal, `breaker: null` and `perAddress: false`
    // never read it, but a wrong value is still the caller's to hear of.
    if (options.attemptDelay !== undefined) checkDuration('attemptDelay', options.attemptDelay);
    checkTypes(target, options);
    // Where Http2Client and GrpcGuard take it: here it was ignored, and the system's DNS asked.
    if ((options as { lookup?: unknown }).lookup !== undefined) throw new TypeError('lookup is not a connect() option: pass it as socket: { lookup } (or tls: { lookup })');
    // One colon is never an IPv6 address (`host:port`, a URL): refused before the breaker admits
    // a dial, which was traced and counted abandoned for a call that opened no socket (an outside
    // review). Two scans; a spelling with more colons is checked when its dial starts (checkedHost).
    const host = target.host;
    // Stryker disable next-line ConditionalExpression,LogicalOperator,StringLiteral,UnaryOperator: equivalent: the same checkedHost runs when the dial starts, so checking more spellings here (every one, or every IPv6 address) only costs a refusal its net.isIP; the mutant that checks none is the one the test kills
    if (typeof host === 'string' && host.indexOf(':') !== -1 && host.indexOf(':') === host.lastIndexOf(':')) checkedHost(target);
    // An IP literal (bracketed IPv6 included) is one address: one entry, asked for by its
    // spelling and port, so a warm one's refusal makes no key (the breaker's own index finds it).
    if (options.perAddress === false || options.breaker === null || (typeof target.host === 'string' && isLiteral(target.host))) {
      return dialWith(target.host, (ctx) => openSocket(checkedHost(target), options, ctx), options, options.dispose ?? destroy, false, target.port, transportOf(options, target.host));
    }
    key = hostKey(target.host, target.port);
  } catch (err) {
    return Promise.reject(err);
  }
  return byAddress(target, key, options);
}

/**
 * The options whose type connect() would otherwise read loosely or trip on inside: a TypeError
 * naming each, before any dial is admitted. `perAddress: 'no'` read as true, `tls: 'yes'` as
 * true, a string `breaker` or `handshake` failed from inside ("breaker.tryAdmit is not a
 * function"), and a missing port reached Node after a dial was admitted (an outside review).
 */
function checkTypes(target: ConnectTarget, options: ConnectOptions): void {
  if (typeof target !== 'object' || target === null) throw new TypeError(`target must be { host, port }, got ${show(target)}`);
  const port = (target as { port?: unknown }).port;
  if (typeof port !== 'number' && typeof port !== 'string') {
    // A URL or `host:port` given as the host, its port with it: that is the mistake to name (it
    // was "port must be a number, got undefined": an outside review).
    if (port === undefined) checkedHost(target);
    throw new TypeError(`port must be a number, got ${show(port)}`);
  }
  // Node's own rule: an empty (or blank) string is no port. It was admitted and keyed as the bare
  // host, and failed ERR_SOCKET_BAD_PORT inside the dial (an outside review).
  if (typeof port === 'string' && port.trim() === '') throw new TypeError(`port must be a number, got ${show(port)}`);
  if (options.breaker !== undefined) breakerOption(options.breaker);
  if (options.perAddress !== undefined && typeof options.perAddress !== 'boolean') throw new TypeError(`perAddress must be a boolean, got ${show(options.perAddress)}`);
  if (options.handshake !== undefined) checkFunction('handshake', options.handshake);
  const t = options.tls;
  if (t !== undefined && typeof t !== 'boolean' && (typeof t !== 'object' || t === null)) throw new TypeError(`tls must be true, false or tls.connect options, got ${show(t)}`);
}

/** {@link connect} for a name: resolve it, dial its addresses, each guarded apart. */
function byAddress(target: ConnectTarget, key: string, options: ConnectOptions): Promise<net.Socket> {
  let timeout: number;
  let attemptDelay: number;
  try {
    timeout = checkDuration('timeout', opt(options.timeout, DEFAULT_CONNECT_TIMEOUT), 1);
    attemptDelay = checkDuration('attemptDelay', opt(options.attemptDelay, DEFAULT_ATTEMPT_DELAY));
  } catch (err) {
    return Promise.reject(err);
  }
  const breaker = options.breaker ?? sharedBreaker();
  // A disabled breaker guards nothing: Node resolves and dials the name, as without perAddress.
  if (!breaker.enabled) return dialWith(key, (ctx) => openSocket(target, options, ctx), options, options.dispose ?? destroy, false, undefined, transportOf(options, target.host));
  // The refusal before anything is built: it is the hot path of a dead name.
  const clock = options.clock ?? systemClock;
  const transport = transportOf(options, target.host);
  const tlsObject = typeof options.tls === 'object' ? (options.tls as tls.ConnectionOptions & { family?: number; hints?: number }) : undefined;
  const lookup = tlsObject?.lookup ?? options.socket?.lookup;
  const family = tlsObject?.family ?? options.socket?.family;
  const hints = tlsObject?.hints ?? options.socket?.hints;
  // The addresses this caller's resolver gave (another client's lookup or family may give others).
  const refusal = refuseFromMemory(breaker, key, clock, transport, { lookup, family, hints });
  if (refusal !== undefined) return Promise.reject(refusal);
  const perDial = { tls: tlsForName(options.tls, target.host), handshake: options.handshake, socket: options.socket };
  return connectAddresses(target.host, target.port, key, (address, ctx) => openSocket({ host: address, port: target.port }, perDial, ctx), {
    timeout,
    signal: options.signal,
    breaker,
    clock,
    attemptDelay,
    transport,
    lookup,
    family,
    hints,
  });
}

/**
 * `target`, once its host is known to be something Node can dial: a host with a colon is taken for
 * an IPv6 literal, so a `host:port` or a URL (`127.0.0.1:8080`, `http://127.0.0.1`) reached Node,
 * failed ENOTFOUND, and was filed under the key it normalises to, the healthy host's own: one
 * client's typo got that host refused for every client. Checked when a dial starts (a throw there
 * is this process's failure, never the host's), not on the refusal path.
 */
function checkedHost(target: ConnectTarget): ConnectTarget {
  const host = target.host;
  if (typeof host === 'string' && host.includes(':') && net.isIP(host.startsWith('[') ? host.slice(1, -1) : host) === 0) {
    throw new TypeError(`host must be a name or an IP address (the port goes in port), got ${JSON.stringify(host)}`);
  }
  return target;
}

/**
 * How a connect reaches its host: over TLS when `tls` is set, naming the server name it sends
 * (`tls.servername`, else the host when it is a name, as `tls.connect` sends it).
 */
function transportOf(options: ConnectOptions, host: unknown): Transport {
  const t = options.tls;
  if (t === undefined || t === false) return 'plain';
  return tlsTransportFor(t === true ? undefined : t.servername, typeof host === 'string' ? host : '');
}

/**
 * The transport of a TLS dial to `host` sending `servername` (given, else the host when it is a
 * name, as `tls.connect` sends it): one rule for every entry point that names its TLS dials.
 *
 * @internal
 */
export function tlsTransportFor(servername: string | undefined, host: string): Transport {
  if (servername !== undefined && servername !== '') return tlsTransport(servername);
  return host === '' || isLiteral(host) ? 'tls' : tlsTransport(host);
}

/**
 * Whether `host` is an IP literal: bracketed IPv6, anything with a colon (a name never has one,
 * so it is a bare IPv6 address), or a dotted quad exactly as `net.isIPv4` accepts it. A scan, no
 * regular expression and no memo: `net.isIP` would cost more than the rest of a refusal, and a
 * memo cleared when full made every refusal pay it again past its size (bench/scale).
 *
 * @internal Exported for its tests.
 */
export function isLiteral(host: string): boolean {
  return host.includes(':') || isDottedQuad(host); // a bracketed IPv6 address has colons too
}

/** Four decimal parts of 0-255, no leading zero, separated by dots: what `net.isIPv4` accepts. */
function isDottedQuad(host: string): boolean {
  const n = host.length;
  let parts = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= n; i++) {
    const c = i === n ? 46 /* an end is a dot */ : host.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      // A leading zero is the whole part ("0"), never the start of one ("01").
      if (digits === 1 && value === 0) return false;
      value = value * 10 + (c - 48);
      if (++digits > 3 || value > 255) return false;
    } else if (c === 46 /* . */ && digits > 0) {
      parts++;
      value = 0;
      digits = 0;
    } else {
      return false;
    }
  }
  return parts === 4; // "1.2.3.4.5" counted five
}

function destroy(socket: net.Socket): void {
  socket.destroy();
}

/**
 * Opens the socket for one dial: TCP, then TLS if asked, then `options.handshake`, watching
 * `ctx.signal` and keeping `ctx.phase` current. The breaker and the timeout are the caller's
 * (`dial`). Exported for connectors that run inside a dial of their own (the HTTP/2 client).
 *
 * @internal
 */
export function openSocket(
  target: ConnectTarget,
  options: Pick<ConnectOptions, 'tls' | 'handshake' | 'socket'>,
  ctx: DialContext,
): Promise<net.Socket> {
  const host = target.host.startsWith('[') ? target.host.slice(1, -1) : target.host;
  const byName = net.isIP(host) === 0;
  const tlsOptions = options.tls === true ? {} : options.tls || undefined;
  const opts: tls.ConnectionOptions = { noDelay: true, ...options.socket, ...tlsOptions, host, port: target.port };
  if (typeof opts.checkServerIdentity === 'function') opts.checkServerIdentity = caughtIdentityCheck(opts.checkServerIdentity);
  if (byName) {
    // The phase leaves 'lookup' when the resolver answers. Seen through the lookup itself, not
    // the socket's 'lookup' event: a resolver that answers synchronously (a cache) does so inside
    // net.connect(), before a listener could be attached, and the stall would be misnamed.
    opts.lookup = phaseAfterLookup(opts.lookup ?? dns.lookup, ctx);
  }
  ctx.phase = byName ? 'lookup' : 'tcp';
  let socket: net.Socket;
  try {
    if (tlsOptions !== undefined) {
      if (byName) opts.servername ??= host; // SNI carries names only, never an IP address
      socket = tls.connect(opts);
      // tls.connect() drops the `noDelay` net.connect() takes: Nagle stayed on, and each HTTPS
      // request with a streamed body waited ~44 ms for the server's delayed ACK (raw undici, which
      // sets it itself, 1-2 ms; an outside review). Set before connecting, Node applies it then.
      if (options.socket?.noDelay !== false) socket.setNoDelay(true);
    } else {
      socket = net.connect(opts as net.TcpNetConnectOpts);
    }
  } catch (err) {
    // Our own options refused before any I/O (a key or certificate that does not parse, a `pfx`
    // that is not one): one client's setup must never count against the host.
    return Promise.reject(localFailure(err));
  }
  watchAddress(ctx, socket); // dialled by name as one entry: learns the address it connects to

  return new Promise<net.Socket>((resolve, reject) => {
    const cleanup = (): void => {
      socket.off('connect', onConnect);
      socket.off('secureConnect', onSecure);
      socket.off('error', onError);
      socket.off('close', onHangUp);
      ctx.signal.removeEventListener('abort', onAbort);
    };
    let settled = false;
    const fail = (err: unknown): void => {
      settled = true;
      // Bytes from the peer before the failure (a protocol answer to the handshake), or the
      // certificate it presented (refused by our own check, `checkServerIdentity` say): alive.
      // (The certificate only while TLS is being set up: after it, a handshake's failure is the
      // host's, whatever certificate a client that accepts any saw.)
      if (socket.bytesRead > 0 || (ctx.phase === 'tls' && presentedCertificate(socket))) ctx.answered = true;
      cleanup();
      socket.destroy();
      const { family, hints } = opts as net.TcpNetConnectOpts;
      reject(byName ? noAddressOfOwnChoice(err, family, hints) : err);
    };
    const onError = (err: Error): void => fail(err);
    const onAbort = (): void => fail(ctx.signal.reason);
    // The peer hung up (a FIN, no error: the socket closes) while the handshake ran: a handshake
    // that does not listen for the close waited out the whole timeout, and the dial failed as
    // stalled in 'handshake' (an outside review: a TLS terminator in front of a dead memcached,
    // 2 s a dial, where a reset failed in 20 ms). Counted as the host's unless it sent something
    // first (see fail); a handshake that reads nothing never sees the FIN, as before. A turn
    // later: a handshake that hears the close itself fails the dial with its own error first.
    const onHangUp = (): void => {
      setImmediate(() => {
        if (!settled) fail(new TransportClosedError(`${host}:${target.port}`, 'connection (in its handshake)', { handshake: true }));
      });
    };
    const onConnect = (): void => {
      if (tlsOptions !== undefined) {
        ctx.phase = 'tls';
        return;
      }
      connected();
    };
    const onSecure = (): void => connected();
    const connected = (): void => {
      if (options.handshake === undefined) {
        cleanup();
        resolve(socket);
        return;
      }
      ctx.phase = 'handshake';
      socket.once('close', onHangUp);
      let shaking: Promise<unknown>;
      try {
        shaking = Promise.resolve(options.handshake(socket, ctx));
      } catch (err) {
        // Thrown at once: the dial fails with it now, never an uncaught exception; the caller's
        // own handshake code threw, so it says nothing of the host (another client is not refused).
        fail(localFailure(err));
        return;
      }
      shaking.then(() => {
        if (settled) return; // already failed (onAbort, a hang-up)
        settled = true;
        cleanup();
        resolve(socket);
      }, fail);
    };
    socket.once('connect', onConnect);
    socket.once('secureConnect', onSecure);
    socket.on('error', onError);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Whether `socket` is a TLS socket whose peer has presented a certificate our checks refused
 * (`authorizationError` is set only once the peer's chain is in: a CA we do not trust, a name or
 * a pin that does not match).
 *
 * @internal also used by the node:http agents' dial.
 */
export function presentedCertificate(socket: net.Socket): boolean {
  return ((socket as tls.TLSSocket).authorizationError as unknown) != null; // undefined on a plain socket
}

/** `lookup`, reporting its answer (or error) by moving `ctx.phase` from 'lookup' to 'tcp'. */
function phaseAfterLookup(lookup: net.LookupFunction, ctx: DialContext): net.LookupFunction {
  return ((hostname: string, opts: dns.LookupOptions, callback: (...answer: unknown[]) => void) =>
    (lookup as (h: string, o: dns.LookupOptions, cb: (...answer: unknown[]) => void) => void)(hostname, opts, (...answer) => {
      if (ctx.phase === 'lookup') ctx.phase = 'tcp';
      callback(...answer);
    })) as net.LookupFunction;
}
