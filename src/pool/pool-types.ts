/**
 * The ConnectionPool's public shapes: what a connector provides, the options, stats and events.
 *
 * @module
 */
import type { Classification, FailureKind } from '../core/classify.js';
import type { Clock, systemClock } from '../core/clock.js';
import type { DEFAULT_CONNECT_TIMEOUT, DialContext } from '../guard/dial.js';
import type { HostBreaker, Transport } from '../guard/host-breaker.js';
import type { RetireReason } from './pooled-connection.js';

/** How the pool learns that a connection's transport died or that its peer wants it retired. */
export interface ConnectionWatch {
  /** The transport is dead (closed, reset, keep-alive unanswered): release everything on it. */
  gone(cause: unknown): void;
  /** The peer asked for no new requests (e.g. HTTP/2 GOAWAY); requests in flight may finish. */
  retire(reason?: RetireReason): void;
}

/** What the pool needs to know about a connection type `C`. */
export interface Connector<C> {
  /**
   * Establishes a connection to `target`: the whole job (TCP, TLS, protocol handshake), inside one
   * bounded, breaker-guarded dial. Watch `ctx.signal`; update `ctx.phase`.
   */
  connect(target: string, ctx: DialContext): Promise<C>;
  /** Closes a connection. Called exactly once per connection; resolve when it is fully closed. */
  close(connection: C, reason: unknown): void | Promise<void>;
  /** Subscribes to the connection's fate; may return a function that unsubscribes. */
  watch?(connection: C, watch: ConnectionWatch, target: string): void | (() => void);
  /**
   * Whether the connector guards and bounds `target`'s establishment itself (a name it dials per
   * address, each address its own breaker entry): the pool then runs `connect` without a dial of
   * its own (no breaker, connect timer or dial event: the connector's dials have them), still one
   * attempt shared by every waiter and stopped by `close()`. Default false: the pool guards every
   * target by its `hostOf` key.
   */
  guardsItself?(target: string): boolean;
  /**
   * How `target`'s dial reaches its host, `'tls'` or `'plain'` (see {@link Transport}): given,
   * one client's dials on the wrong transport never get the host refused to the right one.
   * Default none (the dial counts as any transport).
   */
  transport?(target: string): Transport | undefined;
  /**
   * Whether a connection to `target` is one transport, so that a request's dead-connection
   * failure proves the whole connection dead (everything riding it released). Default true. A
   * connection that balances over several transports of its own (a grpc-js channel with
   * `round_robin`: a subchannel per backend) is not: one backend's death is its own requests'
   * failure, and the connector's `watch` says when the whole connection is gone. Read as true,
   * a call cut by one backend released every call the healthy backends were serving.
   */
  oneTransport?(target: string): boolean;
}

/** What the pool needs from an error's classification. */
export type PoolClassification = Pick<Classification, 'connectionDead' | 'notSent'>;

/** Options of a {@link ConnectionPool}. */
export interface ConnectionPoolOptions<C> {
  /** How to open, close and watch connections. Required. */
  connector: Connector<C>;
  /** Bound on one establishment, ms. Default {@link DEFAULT_CONNECT_TIMEOUT} (2 500). */
  connectTimeout?: number;
  /** Breaker consulted and fed by every connect attempt. Default the shared one; `null`: none. */
  breaker?: HostBreaker | null;
  /** Maps a target to its breaker key. Default `hostKey` (so `https://h` and `h:443` agree). */
  hostOf?: (target: string) => string;
  /**
   * A connection no request has used for this long is closed at the next sweep. Default
   * 600 000 (10 min, seed 003): long enough that a steady client keeps its connections.
   */
  idleTimeout?: number;
  /**
   * The idle sweep runs at most once per this many ms, on any call (not only on a miss: a client
   * whose targets are all connected produces no misses). Default 60 000 (seed 003).
   */
  sweepInterval?: number;
  /**
   * How many times a request may go back for a fresh connection after its connection was retired
   * under it, when its failure carries no server answer: one certainly not sent, or an idempotent
   * one whose connection died under it after a request on it had succeeded (a connection that
   * dies under its first requests may have died of them: those fail, for a retry layer with a
   * backoff and a budget to decide). Default 3 (seed 003: callers failing
   * outright fell from 9.5 % to 0.03 % over three turns while the extra connections opened
   * stopped growing after the second).
   */
  retiredRetries?: number;
  /**
   * Asked before a request that may have been sent goes back for a fresh connection (its
   * connection, which had served requests, died under it): false fails it instead. Never asked
   * for a request certainly not sent. Default: always yes. An adapter with a retry budget passes
   * the budget's withdrawal (GrpcGuard does), so that going back, a resend like any retry, stays
   * inside the budget; one that throws is a no.
   */
  mayResend?: () => boolean;
  /**
   * How long `close()` lets requests in flight finish before releasing them. Default 5 000: a
   * graceful shutdown waits for short requests but not for a long poll.
   */
  closeTimeout?: number;
  /**
   * The longest wait, ms, between a target's failed connect attempt and its next one. After an
   * attempt the host failed (refused, reset, silent: not one the breaker refused, nor an answer
   * the client itself rejects, such as a TLS or certificate mismatch), the next attempt to that
   * target starts 10 ms later, twice that after each further failure in a row, up to this; a
   * caller arriving meanwhile joins that next attempt (bounded by its own signal), and a success
   * ends the pacing. Default 250: the breaker's first open window, so the pool never holds a
   * target longer than the breaker would once open. Without it, before the host opens (its
   * `minOutage`, 1.5 s) a steady caller redialled a node resetting every connection back to
   * back, ~145 dials a second (seed 002's storm, for that span); a 300 ms restart now costs at
   * most one short wait, and callers during it wait for the server instead of failing. 0 dials at
   * once, as before. A pool tracks the pacing of at most 1 024 failing targets (the oldest dropped).
   */
  redialPace?: number;
  /**
   * Decides whether a failure proved the connection dead, and whether the request was sent.
   * Default `classify`. One that throws proves nothing (no eviction, no going back).
   */
  classify?: (err: unknown) => PoolClassification;
  /** Time source for timeouts, idleness and sweeps. Default {@link systemClock}. */
  clock?: Clock;
}

/** Options of one {@link ConnectionPool.use} call. */
export interface UseOptions {
  /** The caller's cancellation: leaves at once (the shared attempt carries on for the others). */
  signal?: AbortSignal;
  /**
   * The request may be repeated safely. Then a request whose connection died under it goes back
   * for a fresh one; otherwise only failures that were certainly not sent do. A failure carrying
   * the server's answer (a status, a reset) never goes back. Default false.
   */
  idempotent?: boolean;
  /**
   * How many times an idempotent request may be sent again after its connection died under it
   * (it may have run on the server each time), 0 to 100. Default the pool's `retiredRetries`.
   * A caller with its own count of attempts passes what is left of it (`maxAttempts - 1`;
   * 0 for retries off): the pool's resends are sends like a retry's, and were not counted in
   * it. Resends of a request certainly not sent are not counted here (`retiredRetries` bounds them).
   */
  resends?: number;
}

/** Counters and gauges of a pool. */
export interface PoolStats {
  /** Targets the pool tracks now (a connection or an attempt): drops to 0 when none is left. */
  targets: number;
  /** Connections open (usable or retired and draining). */
  connections: number;
  /** Connect attempts in flight. */
  attempts: number;
  /** Requests riding connections now. */
  leases: number;
  /** Connections ever opened / closed. */
  opened: number;
  closed: number;
  /** Connections found dead (each released everything riding it). */
  gone: number;
  /** Requests that went back for a fresh connection after a sibling retired theirs. */
  turns: number;
}

/** Payloads of the pool's events (also on `dialguard:pool:<event>`). */
export interface ConnectionPoolEvents {
  opened: { target: string; id: number };
  retired: { target: string; id: number; reason: RetireReason };
  gone: { target: string; id: number; leases: number };
  closed: { target: string; id: number };
  /**
   * A request went back for a fresh connection at once, with no backoff: its connection `id`
   * was retired or found dead under it. `notSent`: it certainly never reached the server (a
   * GOAWAY refused it); otherwise it may have, and went back as an idempotent request's resend.
   * `kind` and `code` are `classify()`'s for the failure. Per resend, for counters: a retry loop
   * above the pool never sees these (they are inside one of its attempts).
   */
  resent: { target: string; id: number; notSent: boolean; kind: FailureKind; code: string | undefined };
}
