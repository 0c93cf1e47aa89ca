/**
 * What the Redis guard's two halves share: a client's dial bookkeeping ({@link ClientState}),
 * the clients' option shapes, and {@link GuardInternals}, the guard's dial steps as the cluster
 * factories (`cluster.ts`) use them. Internal: not exported from `dialguard/redis` (except the
 * option types, re-exported by `index.ts`).
 *
 * @module
 */
import { MAX_DURATION, isError, show } from '../../core/validate.js';
import type { DialPermit, Transport } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import type { RedialRounds, RoundOutcome, RoundPolicy } from './redial.js';

/**
 * Longest single wait the guard hands node-redis, ms. node-redis cannot cancel a reconnect wait:
 * a client destroyed during one keeps its timer (and the process) until it ends, so a 30 s open
 * window is waited out in waits of at most this, each ending in a refusal that costs no I/O.
 * node-redis's own strategy waits up to ~2.2 s.
 */
export const NODE_REDIS_LONGEST_WAIT = 2_000;

/** What the guard needs of a client: node-redis and ioredis are both event emitters. */
export interface EventClient {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the clients' own listener type
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/** node-redis `createClient` options, the parts the guard reads and sets. */
export interface NodeRedisOptions {
  url?: string;
  socket?: Record<string, unknown> & { host?: string; port?: number; tls?: unknown; lookup?: unknown; connectTimeout?: number; reconnectStrategy?: unknown };
  /** node-redis 5.9+: the endpoint type its maintenance notifications name ('auto': resolved from `socket.host`). */
  maintEndpointType?: unknown;
  [key: string]: unknown;
}

/**
 * The node-redis options that make a client send commands of its own as it connects (node-redis
 * 5's handshake: HELLO for any `RESP`, AUTH, CLIENT SETNAME, SELECT, READONLY, CLIENT SETINFO
 * unless `disableClientInfo`, CLIENT TRACKING). A `url` may carry credentials or a database.
 */
const HANDSHAKE_OPTIONS = ['RESP', 'username', 'password', 'credentialsProvider', 'name', 'database', 'readonly', 'clientSideCache', 'emitInvalidate', 'url'] as const;

/**
 * Whether a node-redis client with `options` sends nothing as it connects, so its server sends
 * nothing until the first command: `disableClientInfo: true` and none of {@link HANDSHAKE_OPTIONS}.
 * Unsure is false (a handshake is then waited for, as before).
 */
export function nodeRedisSilentOnConnect(options: Record<string, unknown>): boolean {
  if (options.disableClientInfo !== true) return false;
  // Truthiness, as node-redis reads them (`database: 0` selects nothing).
  for (const key of HANDSHAKE_OPTIONS) if (options[key]) return false;
  return true;
}

/** ioredis options, the parts the guard reads and sets. */
export interface IoredisOptions {
  host?: string;
  port?: number;
  /** A unix socket, dialled instead of host and port. */
  path?: string;
  connectTimeout?: number;
  retryStrategy?: unknown;
  Connector?: unknown;
  lazyConnect?: boolean;
  tls?: unknown;
  sentinels?: unknown;
  [key: string]: unknown;
}

/** One client's dial bookkeeping. */
export class ClientState {
  /**
   * The node's breaker key. Fixed for a client of one node; a Sentinel client's is the master
   * (or replica) address its sentinels resolved for the dial in flight, so it moves with a failover.
   */
  key: string;
  permit: DialPermit | undefined;
  /** When the permitted dial began (the rounds' clock). */
  dialAt = 0;
  /**
   * The permitted dial's socket, where the guard sees it (ioredis: its connector's stream;
   * node-redis: the plain TCP socket its lookup was asked for), for what the node sent on it.
   */
  socket: { readonly bytesRead: number } | undefined;
  lastError: unknown;
  /** The client's last connect was refused at the gate: nothing was sent (ioredis: see its retryStrategy). */
  gated = false;
  /**
   * ioredis with its default pace: when that pace has the client's next dial due (the rounds'
   * clock), counted from its first failure after a connection, so a late dial does not push the
   * rest of its schedule. Undefined before the first.
   */
  dueAt: number | undefined;
  /** The retries its plain self has counted by now (see dueAt), for ioredis's `maxRetriesPerRequest`. */
  count = 0;
  /**
   * The client's bound on one dial, ms: its own `connectTimeout` when it gave one, else 0 (the
   * guard's). With it, the rounds' lead bound for this client's dials.
   */
  timeout = 0;
  policy: RoundPolicy | undefined;
  /**
   * @param key - the node's breaker key.
   * @param rounds - whether the client's redials go in the breaker's shared rounds (every client
   *   does: single-node clients and a cluster's node connections alike).
   * @param tls - whether the client dials the node with TLS: its rounds are not shared with
   *   plain clients of the same address (see {@link roundKey}).
   */
  constructor(
    key: string,
    readonly rounds = true,
    readonly tls = false,
  ) {
    this.key = key;
  }

  /** How the client reaches the node, as the breaker is told (see `Transport`). */
  get transport(): Transport {
    return this.tls ? 'tls' : 'plain';
  }

  /**
   * The key of the client's shared redial rounds: the node's, and how it is dialled. A client
   * without TLS against a TLS-only port is reset without a byte, a failure the breaker counts;
   * sharing its rounds handed that error to the TLS clients (failed at once, no dial).
   */
  get roundKey(): string {
    return roundKey(this.key, this.tls);
  }
}

/** The redial rounds' key of the clients of node `key` dialling it with TLS or not. */
export function roundKey(key: string, tls: boolean): string {
  return tls ? `${key} tls` : key;
}

/** Whether `err` is a reply the server sent (so the node is alive), for node-redis and ioredis. */
export function serverReplied(err: unknown): boolean {
  if (!isError(err)) return false;
  const name = err.constructor?.name;
  return name === 'ErrorReply' || name === 'ReplyError' || name === 'SimpleError' || name === 'BlobError';
}

/** ioredis's connector interface, as far as the guard uses it. */
export interface IoredisConnector {
  firstError?: unknown;
  /** Set by connect(), cleared by disconnect(). */
  connecting?: boolean;
  stream?: unknown;
  connect(emitter: unknown): Promise<unknown>;
  /** Ends the connection or the connect in progress (the client's `disconnect()`). */
  disconnect(): void;
  /** ioredis's `SentinelConnector` only: asks one sentinel for the node's address (null: none). */
  resolve?(endpoint: unknown): Promise<{ host: string; port: number } | null | undefined>;
}
export type ConnectorClass = new (options: unknown) => IoredisConnector;

/**
 * The guard's dial steps, for its cluster factories (`cluster.ts`): each is the `RedisGuard`
 * method of the same name (see there). Not public API: the guard hands it to the factories only.
 */
export interface GuardInternals {
  /** The guard's `connectTimeout`, ms. */
  readonly timeout: number;
  /** The redial rounds of the guard's breaker. */
  readonly rounds: RedialRounds;
  /** A dial about to start: its turn in the node's rounds, then the breaker (undefined: go). */
  gate(state: ClientState, wanted?: () => boolean): RoundOutcome | Promise<RoundOutcome>;
  /** The dial in flight succeeded. */
  succeeded(state: ClientState): void;
  /** The dial in flight ended without success: failed, unless the server answered. */
  settle(state: ClientState, cause: unknown): void;
  /** The client gave the dial in flight up. */
  abandon(state: ClientState): void;
  /**
   * When to redial a node (`key`), after `attempt` failed dials; at the next round of `rounds` (a
   * round key) if given, the breaker asked for `transport`'s dials, never sooner than `floor`.
   */
  delayFor(key: string | undefined, attempt: number, rounds?: string, transport?: Transport, floor?: number): number;
  /** Bounds the handshake of the dial `permit` stands for on `stream` (see `handshake.ts`). */
  boundHandshake(state: ClientState, permit: DialPermit | undefined, stream: unknown, pipelined?: boolean): void;
}

/**
 * The connector ioredis picks for `options` (no `Connector` of the user's: its standalone one, or
 * its `SentinelConnector` given `sentinels`). Neither is exported, so a lazy client made with the
 * same options (it never connects) shows it.
 */
export function defaultConnector(Redis: new (options: IoredisOptions) => EventClient, options: IoredisOptions = {}): ConnectorClass {
  const { Connector: _ignored, ...rest } = options;
  return (new Redis({ ...rest, lazyConnect: true }) as unknown as { connector: IoredisConnector }).connector.constructor as ConnectorClass;
}

/**
 * What `new Redis(...args)` may be given, as ioredis v5 and v6 take it: an options object; a port;
 * a URL (`redis://`, `rediss://`) or a unix socket path; a port and a host; any of these followed
 * by an options object.
 */
export type IoredisArguments = [options?: object | null] | [portOrUrl: number | string, options?: object | null] | [port: number, host: string, options?: object | null];

/**
 * The options of an ioredis client made with `args`, as ioredis itself reads them (its own
 * parser: a URL's host, port, database, credentials and `rediss:`, a path, a port, the first
 * given value of a key winning), without its defaults: only what the arguments said. One options
 * object is returned as it is. Before, anything but an object was spread as options, so
 * `guard.ioredis(Redis, 'redis://cache:6380/2')` or `guard.ioredis(Redis, 6380)` dialled
 * localhost:6379 (an outside review), a server the user never named.
 *
 * @throws TypeError for an argument ioredis does not take, or more than three; or a URL or port
 *   given to an ioredis whose client has no `parseOptions` to read it with.
 */
export function ioredisOptions(Redis: abstract new (...args: never[]) => unknown, args: readonly unknown[]): IoredisOptions {
  if (args.length > 3) throw new TypeError(`ioredis takes at most three arguments (port, host, options), got ${args.length}`);
  for (const arg of args) {
    if (arg != null && typeof arg !== 'object' && typeof arg !== 'string' && typeof arg !== 'number') {
      throw new TypeError(`an ioredis argument must be a port, a URL or path, a host or an options object, got ${show(arg)}`);
    }
  }
  const given = args.filter((arg) => arg != null);
  if (given.length === 0) return {};
  if (given.length === 1 && typeof given[0] === 'object') return given[0] as IoredisOptions;
  const probe = Object.create(Redis.prototype as object) as { parseOptions?: (...a: unknown[]) => void; options?: Record<string, unknown> };
  if (typeof probe.parseOptions !== 'function') {
    throw new TypeError('dialguard: this ioredis client has no parseOptions() to read a port or URL with; pass one options object: guard.ioredis(Redis, { host, port })');
  }
  probe.parseOptions(...args); // ioredis's own reading (and its own error for what it refuses)
  const parsed = probe.options ?? {};
  const defaults = ((Redis as unknown as { defaultOptions?: Record<string, unknown> }).defaultOptions ?? {}) as Record<string, unknown>;
  const own = new Set(given.flatMap((arg) => (typeof arg === 'object' ? Object.keys(arg as object) : [])));
  const options: IoredisOptions = {};
  for (const [key, value] of Object.entries(parsed)) if (own.has(key) || value !== defaults[key]) options[key] = value;
  return options;
}

/**
 * The breaker key of an ioredis client of one node: its unix socket's path when it has one (a
 * socket is its own host; no host name holds a '/'), else its host and port. A path client was
 * filed under localhost:6379, and refused when that TCP node was open (an outside review).
 */
export function ioredisKey(options: IoredisOptions): string {
  if (typeof options.path === 'string' && options.path !== '') return hostKey(options.path);
  return hostKey(options.host ?? 'localhost', options.port ?? 6379);
}

/** Host and port of a node-redis client: its url's, or `socket.host`/`socket.port`. */
export function nodeRedisTarget(options: NodeRedisOptions): { host: string; port: number } {
  if (typeof options.url === 'string') {
    const url = new URL(options.url);
    return { host: url.hostname || 'localhost', port: Number(url.port) || 6379 };
  }
  return { host: options.socket?.host ?? 'localhost', port: options.socket?.port ?? 6379 };
}

/**
 * The options without `url`, its credentials, database and scheme moved into options as
 * node-redis moves them (the url's win over explicit options: node-redis assigns what it parsed
 * over them; a `socket.tls` that contradicts the scheme, a scheme not `redis:`/`rediss:` or a
 * database that is no number are node-redis's own TypeErrors), so the url's host cannot override
 * the guarded `socket.host`. Before, explicit options won: `{ url: 'redis://h/3', database: 0 }`
 * wrote to db 0 where node-redis writes to db 3, and a url's password lost to a stale `password`.
 */
export function withoutUrl(options: NodeRedisOptions, socket: Record<string, unknown>): NodeRedisOptions {
  const { url, ...rest } = options;
  if (typeof url !== 'string') return rest;
  const u = new URL(url);
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new TypeError('Invalid protocol');
  const tls = u.protocol === 'rediss:';
  if (socket.tls !== undefined && socket.tls !== tls) {
    throw new TypeError(`tls socket option is set to ${String(socket.tls)} which is mismatch with protocol or the URL ${url} passed`);
  }
  socket.tls = tls;
  if (u.username !== '' || u.password !== '') delete rest.credentialsProvider; // node-redis makes one from the url's
  if (u.username !== '') rest.username = decodeURIComponent(u.username);
  if (u.password !== '') rest.password = decodeURIComponent(u.password);
  if (u.pathname.length > 1) {
    const database = Number(u.pathname.slice(1));
    if (Number.isNaN(database)) throw new TypeError('Invalid pathname');
    rest.database = database;
  }
  return rest;
}

/**
 * Whether node-redis's own default reconnect strategy gives up on `cause`: a socket timeout
 * (`socketTimeout` passed with no reply), told by its class's name or its message (the guard
 * does not import redis). A guarded client with no strategy of its own gives up there too: it
 * answered a delay, so it redialled and stayed open where the plain client closed (an outside
 * review).
 */
export function nodeRedisGivesUp(cause: unknown): boolean {
  return isError(cause) && (cause.constructor.name === 'SocketTimeoutError' || cause.message.startsWith('Socket timeout timeout.'));
}

/**
 * What a guarded client's reconnect strategy answers, given what the client's own strategy
 * answered (`theirs`) and the guard's wait (`delay`, ms): a number is a wait, no shorter than the
 * guard's; anything else (false, null, an Error) is the client's own decision to stop, passed on.
 * A number no timer can wait (NaN, Infinity, 2^31 ms or more) is the guard's wait: the client
 * hands its answer to `setTimeout`, which fires those after 1 ms, and `Math.max` kept them, so a
 * strategy answering NaN redialled (or was refused) every millisecond, ~1 200 times in a 1.5 s
 * outage, and spent ioredis's 20 retries per command in 20 ms of the guard's refusals after the
 * restart, where the plain client's own 1 ms redials found the node back (an outside review).
 */
export function strategyAnswer(theirs: unknown, delay: number): unknown {
  if (typeof theirs !== 'number') return theirs;
  return theirs >= 0 && theirs <= MAX_DURATION ? Math.max(theirs, delay) : delay;
}
