/**
 * undici's connector, replaced by a guarded dial: every connection undici opens (Agent, Pool,
 * Client) goes through dialguard's `dial()`, so TCP connect and TLS handshake run under one
 * timeout and the per-origin {@link HostBreaker} sees the outcome of every dial, and of nothing
 * else. Responses never reach the breaker: a 500 or a 403 arrives on a connection that dialled
 * fine, which proves the host alive.
 *
 * A refusal by the breaker fails the connect at once, without a socket; undici then fails every
 * request queued for that connection with the {@link HostUnavailableError}.
 *
 * @module
 */
import net from 'node:net';
import tls from 'node:tls';
import { type buildConnector, errors as undiciErrors } from 'undici';
import { ConnectTimeoutError, ErrorCodes } from '../../core/errors.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { asError, checkDuration, checkFunction, checkInteger, opt, show } from '../../core/validate.js';
import { DEFAULT_CONNECT_TIMEOUT } from '../../core/connect-timeout.js';
import { type DialContext, breakerOption, dial } from '../../guard/dial.js';
import { connect, openSocket } from '../../guard/connect.js';
import { HostBreaker, tlsTransport } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { TlsSessionCache } from '../../guard/tls-sessions.js';
import { DialScout } from './dial-scout.js';
import { watchErrors } from './tls-alert.js';
import { type OptionNames, checkOptionNames, optionNames } from '../../core/option-names.js';

/** The option names guardedConnector() takes (a GuardedAgent takes them too, but `closing`): any other is warned about (see checkOptionNames). @internal */
export const CONNECTOR_OPTION_NAMES: OptionNames<GuardedConnectorOptions> = { connectTimeout: true, socket: true, socketPath: true, connector: true, breaker: true, tls: true, maxCachedSessions: true, keepAliveInitialDelay: true, allowH2: true, clock: true, closing: true };
const CONNECTOR_OPTIONS = optionNames(CONNECTOR_OPTION_NAMES);

/** An undici connector: what the `connect` option of an Agent, Pool or Client accepts. */
export type UndiciConnector = buildConnector.connector;

/**
 * TLS options for `https:` origins: `tls.connect`'s, but those the connector sets itself per dial
 * (the session from its cache, ALPN from `allowH2`, the socket, host and port). The servername
 * defaults to the origin's host name.
 */
export type GuardedTlsOptions = Pick<
  tls.ConnectionOptions,
  | 'ca'
  | 'cert'
  | 'key'
  | 'pfx'
  | 'passphrase'
  | 'rejectUnauthorized'
  | 'checkServerIdentity'
  | 'ciphers'
  | 'minVersion'
  | 'maxVersion'
  | 'secureContext'
  | 'servername'
  | 'sigalgs'
  | 'ecdhCurve'
  | 'honorCipherOrder'
  | 'secureOptions'
  | 'secureProtocol'
  | 'sessionIdContext'
  | 'ticketKeys'
  | 'sessionTimeout'
  | 'crl'
  | 'dhparam'
  | 'privateKeyEngine'
  | 'privateKeyIdentifier'
  | 'clientCertEngine'
  | 'minDHSize'
  | 'enableTrace'
  | 'pskCallback'
>;

/**
 * `net.connect` options a guarded dial passes on: how to resolve and reach the host, where to
 * leave from (`localAddress`, `localPort`: a port pinned for a pool of several connections fails
 * every dial after the first with EADDRINUSE, the client's own error, never the host's), and the
 * socket's buffer (`highWaterMark`, both directions).
 */
export type GuardedSocketOptions = Pick<
  net.TcpNetConnectOpts,
  'lookup' | 'family' | 'hints' | 'autoSelectFamily' | 'autoSelectFamilyAttemptTimeout' | 'localAddress' | 'localPort' | 'noDelay'
> & { highWaterMark?: number | undefined };

/** Options of {@link guardedConnector}; every one has a default. */
export interface GuardedConnectorOptions {
  /**
   * Bound on one dial, TCP connect and TLS handshake together, ms; 0 for no limit (as undici's
   * `connectTimeout: 0`; the dial is then bounded by the longest timer Node can arm, about 24.8
   * days). Default 2 500
   * (`DEFAULT_CONNECT_TIMEOUT`, every entry point's): never fires on a live host, while a blackholed one costs 2.5 s
   * a dial, so a call's three default attempts (with their backoff) cost less than undici's
   * single 10 s connect timeout (or the kernel's ~130 s without one).
   */
  connectTimeout?: number;
  /**
   * How sockets resolve and reach the host: `lookup`, `family`, `autoSelectFamily`,
   * `autoSelectFamilyAttemptTimeout`, `localAddress`... as `net.connect` takes them. Default
   * Node's (dns.lookup). With a breaker, a name is resolved here (`lookup`, `family`, `hints`)
   * and its addresses dialled one by one, each its own breaker entry (as `connect()`'s
   * `perAddress`), `autoSelectFamilyAttemptTimeout` pacing them (default 250 ms, Node's).
   */
  socket?: GuardedSocketOptions;
  /**
   * A unix socket (or Windows pipe) every dial connects to instead of the origin's host and port,
   * as undici's `socketPath`. The breaker files outcomes by the socket's path, never by the
   * origin: a stopped daemon on one socket must not get a TCP server (or another socket) named by
   * the same origin refused. Default none (TCP).
   */
  socketPath?: string;
  /**
   * An undici connector that opens the sockets instead of dialguard's own (undici's `connect`
   * given as a function). Its dials are still bounded by `connectTimeout`, reported to the
   * breaker and scouted one at a time to an unproven host; `tls`, `socket` and `socketPath` are
   * then its business. Default none.
   */
  connector?: UndiciConnector;
  /**
   * Offer HTTP/2 in every TLS handshake (ALPN `h2`, then `http/1.1`), as undici's
   * `connect.allowH2`. Default false: undici's Client passes its own `allowH2` with each dial,
   * which is honoured either way.
   */
  allowH2?: boolean;
  /**
   * The breaker every dial asks and reports to. Default the process-wide `sharedBreaker()`, so
   * every client in the process learns from every other's dials; `null` dials without one.
   */
  breaker?: HostBreaker | null;
  /** TLS for `https:` origins. Default none (Node's defaults and CA store). */
  tls?: GuardedTlsOptions;
  /**
   * TLS sessions kept for resumption, one per servername (or address). Default 100 (undici's):
   * a reconnect to a recent origin skips a full handshake; 0 keeps none.
   */
  maxCachedSessions?: number;
  /**
   * Delay before TCP keep-alive probes on an idle connection, ms; 0 disables them. Default
   * 60 000 (undici's): the kernel notices a peer that vanished from an idle pooled connection.
   */
  keepAliveInitialDelay?: number;
  /** Time source for the dial timeout. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * Its owner's closing: once aborted, every dial in flight is abandoned (it rejects with the
   * signal's reason; a socket that lands later is destroyed) and a new one rejects at once.
   * Default none: only `connectTimeout` ends a dial (a `GuardedAgent` passes its own, so its
   * `close()` is bounded even with `connectTimeout: 0`).
   */
  closing?: AbortSignal;
}

/** The TLS options the connector takes (its `tls`, and the TLS keys of undici's `connect` object). */
export const TLS_KEYS: ReadonlySet<string> = new Set([
  'ca',
  'cert',
  'key',
  'pfx',
  'passphrase',
  'rejectUnauthorized',
  'checkServerIdentity',
  'ciphers',
  'minVersion',
  'maxVersion',
  'secureContext',
  'servername',
  'sigalgs',
  'ecdhCurve',
  'honorCipherOrder',
  'secureOptions',
  'secureProtocol',
  'sessionIdContext',
  'ticketKeys',
  'sessionTimeout',
  'crl',
  'dhparam',
  'privateKeyEngine',
  'privateKeyIdentifier',
  'clientCertEngine',
  'minDHSize',
  'enableTrace',
  'pskCallback',
]);

/** The socket options the connector passes to `net.connect` (its `socket`, and those keys of undici's `connect` object). */
export const SOCKET_KEYS: ReadonlySet<string> = new Set([
  'lookup',
  'family',
  'hints',
  'autoSelectFamily',
  'autoSelectFamilyAttemptTimeout',
  'localAddress',
  'localPort',
  'noDelay',
  'highWaterMark',
]);

/** `connectTimeout: 0`: the longest timer Node can arm (about 24.8 days), as good as none. */
const NO_LIMIT = 2 ** 31 - 1;

/** The connector's options, checked and with their defaults. */
interface ConnectorSettings {
  timeout: number;
  breaker: HostBreaker | null;
  tls: GuardedTlsOptions;
  sessions: TlsSessionCache;
  keepAliveDelay: number;
  socket: GuardedSocketOptions;
  socketPath: string | undefined;
  connector: UndiciConnector | undefined;
  allowH2: boolean;
  clock: Clock;
  closing: AbortSignal | undefined;
}

/**
 * Checks connector options.
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
function settings(options: GuardedConnectorOptions): ConnectorSettings {
  if (typeof options !== 'object' || options === null) throw new TypeError(`connector options must be an object, got ${show(options)}`);
  const breaker = breakerOption(options.breaker);
  const tlsOptions = opt(options.tls, {});
  if (typeof tlsOptions !== 'object' || tlsOptions === null) throw new TypeError(`tls must be an object, got ${show(tlsOptions)}`);
  for (const key of Object.keys(tlsOptions)) {
    if (!TLS_KEYS.has(key)) throw new TypeError(`tls.${key} is not supported (supported: ${[...TLS_KEYS].join(', ')})`);
  }
  const clock = opt(options.clock, systemClock);
  if (typeof clock !== 'object' || clock === null) throw new TypeError(`clock must be a Clock, got ${show(clock)}`);
  checkFunction('clock.now', clock.now);
  checkFunction('clock.setTimeout', clock.setTimeout);
  checkFunction('clock.clearTimeout', clock.clearTimeout);
  const socket = opt<GuardedSocketOptions>(options.socket, {});
  if (typeof socket !== 'object' || socket === null) throw new TypeError(`socket must be an object, got ${show(socket)}`);
  for (const key of Object.keys(socket)) {
    if (!SOCKET_KEYS.has(key)) throw new TypeError(`socket.${key} is not supported (supported: ${[...SOCKET_KEYS].join(', ')})`);
  }
  if (socket.lookup !== undefined) checkFunction('socket.lookup', socket.lookup);
  checkSocketNumbers('socket', socket);
  const socketPath = options.socketPath;
  if (socketPath !== undefined && (typeof socketPath !== 'string' || socketPath === '')) {
    throw new TypeError(`socketPath must be a non-empty string, got ${show(socketPath)}`);
  }
  const timeout = checkDuration('connectTimeout', opt(options.connectTimeout, DEFAULT_CONNECT_TIMEOUT));
  // 0 is undici's "no limit"; a fraction of a millisecond is no timeout a dial can keep (it was
  // taken here and every request then failed with the dial's RangeError: an outside review).
  if (timeout > 0 && timeout < 1) throw new RangeError(`connectTimeout must be 0 (no limit) or at least 1 ms, got ${show(timeout)}`);
  const closing = options.closing;
  if (closing !== undefined && !(closing instanceof AbortSignal)) throw new TypeError(`closing must be an AbortSignal, got ${show(closing)}`);
  return {
    timeout: timeout === 0 ? NO_LIMIT : timeout,
    socket,
    socketPath,
    connector: options.connector === undefined ? undefined : checkFunction<UndiciConnector>('connector', options.connector),
    allowH2: checkBoolean('allowH2', opt(options.allowH2, false)),
    breaker,
    tls: tlsOptions,
    sessions: new TlsSessionCache(checkInteger('maxCachedSessions', opt(options.maxCachedSessions, 100), 0)),
    keepAliveDelay: checkDuration('keepAliveInitialDelay', opt(options.keepAliveInitialDelay, 60_000)),
    clock,
    closing,
  };
}

/**
 * Builds an undici connector whose every dial is bounded end to end and guarded by a
 * {@link HostBreaker}. Use it as the `connect` option of any undici Agent, Pool or Client:
 *
 * ```ts
 * const agent = new Agent({ connect: guardedConnector({ connectTimeout: 2_000 }) });
 * ```
 *
 * The connector passes undici, through its callback: `HostUnavailableError` (breaker refused,
 * no socket), `ConnectTimeoutError` (naming the stalled phase, `tcp` or `tls`), or the socket's
 * own error (`ECONNREFUSED`...). While a host is unproven (never connected, or its last dial
 * failed), concurrent dials to it wait for the first one's outcome instead of dialling too.
 * Proxy tunnels (`httpSocket`) are not supported; a unix socket is the `socketPath` option.
 *
 * @throws TypeError/RangeError naming the option, for any invalid option.
 */
export function guardedConnector(options: GuardedConnectorOptions = {}): UndiciConnector {
  checkOptionNames('guardedConnector', options, CONNECTOR_OPTIONS);
  const s = settings(options);
  const scout = new DialScout();
  const plainOptions = { timeout: s.timeout, breaker: s.breaker, clock: s.clock, dispose: destroy, signal: s.closing, transport: 'plain' as const };
  return (opts, callback) => {
    let key: string;
    let scoutKey: string;
    let open: () => Promise<net.Socket>;
    try {
      if (opts.httpSocket !== undefined) throw new TypeError('dialguard: tunnelling through a proxy (httpSocket) is not supported by the guarded connector');
      const secure = opts.protocol === 'https:';
      const host = opts.hostname;
      // Port 0 is the port the caller named (undici dials it, refused): never the default port,
      // where `|| 443` sent `http://127.0.0.1:0/` to port 80 (an outside review).
      const port = opts.port === undefined || opts.port === null || opts.port === '' ? (secure ? 443 : 80) : Number(opts.port);
      const path = opts.socketPath ?? s.socketPath;
      // A unix socket is its own host: filed by its path (no host name holds a '/').
      key = path ? hostKey(path) : hostKey(host, port);
      // One scout per transport: a TLS dial that fails its handshake says nothing of a plain one.
      scoutKey = secure ? `tls|${key}` : key;
      const tlsOptions = secure ? tlsFor(s, opts, host) : undefined;
      // The buffer undici's own connector gives a socket (64 KiB plain, 16 KiB TLS, which Node
      // caps there anyway) unless the caller set one: Node's default of 16 KiB handed a slow
      // `stream()` writer 32 KiB pieces where plain undici hands 64 KiB, 512 writes for 16 MiB
      // against 258, and twice the time (an outside review, r148).
      const socket = { highWaterMark: secure ? 16_384 : 65_536, ...s.socket, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}), ...(path ? { path } : {}) };
      const establish =
        s.connector === undefined ? (ctx: DialContext) => openSocket({ host, port }, { tls: tlsOptions, socket }, ctx) : viaConnector(s.connector, opts);
      // A name dialled by dialguard itself over TCP is guarded per address (see connect's
      // `perAddress`): resolved with the user's lookup, each address its own breaker entry.
      const perAddress = s.connector === undefined && !path && s.breaker !== null && !isLiteral(host);
      open = () =>
        (perAddress
          ? connect(
              { host, port },
              {
                timeout: s.timeout,
                breaker: s.breaker,
                clock: s.clock,
                dispose: destroy,
                signal: s.closing,
                tls: tlsOptions,
                socket,
                // Node's happy-eyeballs delay, when given, paces the addresses here too.
                ...(socket.autoSelectFamilyAttemptTimeout === undefined ? {} : { attemptDelay: socket.autoSelectFamilyAttemptTimeout }),
              },
            )
          : // A TLS dial names its server name: a host hanging up on another client's wrong name stays open to this one.
            dial(key, establish, tlsOptions === undefined ? plainOptions : { ...plainOptions, transport: tlsTransport(tlsOptions.servername) })
        ).then((sock) => {
          // As undici's own connector does: the kernel probes an idle pooled connection.
          if (s.keepAliveDelay > 0) sock.setKeepAlive(true, s.keepAliveDelay);
          if (tlsOptions !== undefined && s.connector === undefined) s.sessions.remember(tlsOptions.servername ?? host, sock as tls.TLSSocket);
          watchErrors(sock);
          return sock;
        });
    } catch (err) {
      queueMicrotask(() => callback(err as Error, null));
      return;
    }
    scout.run(scoutKey, open).then(
      (socket) => callback(null, socket),
      (err: unknown) => callback(asUndiciError(err), null),
    );
  };
}

/**
 * The error undici is handed for a failed dial: the dial's own, except that a timeout is undici's
 * `ConnectTimeoutError` (`UND_ERR_CONNECT_TIMEOUT`, `instanceof errors.ConnectTimeoutError`), as
 * undici's own connector fails, with dialguard's (`host`, `timeout`, `phase`) as its `cause`.
 * Handed over as dialguard's, `err.code === 'UND_ERR_CONNECT_TIMEOUT'` in code written for undici
 * silently stopped matching (an outside review). One per caller: a scout's waiters each get theirs.
 */
function asUndiciError(err: unknown): Error {
  if ((err as { code?: unknown } | null)?.code !== ErrorCodes.CONNECT_TIMEOUT) return asError(err);
  const detail = err instanceof ConnectTimeoutError ? `attempted address: ${err.host}, timeout: ${err.timeout}ms, stalled in ${err.phase}` : (err as Error).message;
  const mapped = new undiciErrors.ConnectTimeoutError(`Connect Timeout Error (${detail})`);
  Object.defineProperty(mapped, 'cause', { value: err, configurable: true, writable: true, enumerable: false });
  return mapped;
}

/** An establishment through the caller's own undici connector. */
function viaConnector(connector: UndiciConnector, opts: buildConnector.Options): () => Promise<net.Socket> {
  return () =>
    new Promise<net.Socket>((resolve, reject) => {
      connector(opts, (err, socket) => (err === null ? resolve(socket) : reject(err)));
    });
}

/** Whether `host` is an IP address (undici brackets IPv6 ones). */
function isLiteral(host: string): boolean {
  return host.startsWith('[') || net.isIP(host) !== 0;
}

/**
 * Checks the numeric socket options where they are given (`prefix` names where, as the user
 * spelt it): Node refuses them only at the dial, one failed request at a time.
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
export function checkSocketNumbers(prefix: string, socket: { localPort?: unknown; highWaterMark?: unknown }): void {
  if (socket.localPort !== undefined) checkInteger(`${prefix}.localPort`, socket.localPort, 0, 65_535);
  if (socket.highWaterMark !== undefined) checkInteger(`${prefix}.highWaterMark`, socket.highWaterMark, 0);
}

function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${show(value)}`);
  return value;
}

function destroy(socket: net.Socket): void {
  socket.destroy();
}

/** `tls.connect` options for one dial: the configured ones, the servername, ALPN, a cached session. */
function tlsFor(s: ConnectorSettings, opts: buildConnector.Options, host: string): tls.ConnectionOptions {
  const servername = opts.servername || s.tls.servername || (net.isIP(host) === 0 ? host : undefined);
  const allowH2 = s.allowH2 || (opts as { allowH2?: boolean }).allowH2 === true;
  const session = s.sessions.get(servername ?? host);
  return {
    ...s.tls,
    ...(servername === undefined ? {} : { servername }),
    ...(session === undefined ? {} : { session }),
    ALPNProtocols: allowH2 ? ['http/1.1', 'h2'] : ['http/1.1'],
  };
}
