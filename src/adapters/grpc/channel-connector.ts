/**
 * How the grpc adapter opens, watches and closes grpc-js channels for its ConnectionPool.
 *
 * - connect: a new channel (its own subchannel, so its own connection), asked to connect and
 *   watched until READY (open-channel), inside the pool's bounded, breaker-guarded dial.
 * - per address: a target naming a DNS name (see address-target) is resolved here and its
 *   addresses dialled by `connectAddresses` (the piece `connect()`, the undici connector and
 *   Http2Client share), each as a channel of its own to that address inside a dial against the
 *   address's own breaker entry: open addresses are skipped, a probe goes to one address at a
 *   time, and the target is refused only when every address is open. The first channel READY
 *   is the pooled one; a later one is closed. The pool then adds no dial of its own
 *   (`guardsItself`).
 * - watch: a channel that leaves READY is never used again. grpc-js would reconnect it on its own,
 *   with no bound, for the next call queued on it: that queue is exactly seed 003's stall. A closed
 *   transport under it makes it gone (everything riding it released); otherwise (a GOAWAY) it is
 *   retired and its calls finish. Either way it is closed at once, which fails any call waiting
 *   for a pick on it as never sent, so those go back for a fresh channel.
 * - close: `channel.close()`, once. Calls on the wire finish or fail on their own.
 * - reconnect backoff: after a failed connect a new one may start only after grpc's reconnect
 *   backoff (the channel's `grpc.initial_reconnect_backoff_ms`, default 1 s, times 1.6 per
 *   failure, ±20 % jitter, up to `grpc.max_reconnect_backoff_ms`, default 120 s), as a grpc-js
 *   channel in TRANSIENT_FAILURE would; see {@link ChannelConnector.retryAt}. Nothing reconnects
 *   on its own: a caller asks (`getConnectivityState(true)`, a wait-for-ready call).
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type net from 'node:net';
import type { Clock } from '../../core/clock.js';
import type { DialContext } from '../../guard/dial.js';
import { ConnectTimeoutError, HostUnavailableError, TransportClosedError } from '../../core/errors.js';
import { addressesRetryAfter, connectAddresses, refuseFromMemory } from '../../guard/addresses.js';
import { isLiteral } from '../../guard/connect.js';
import { type HostBreaker, type Transport, tlsTransport } from '../../guard/host-breaker.js';
import type { ConnectionWatch, Connector } from '../../pool/connection-pool.js';
import { type NamedTarget, addressOptions, addressTarget, namedTarget, picksFirst } from './address-target.js';
import { clientMistake } from './call-retry.js';
import { ChannelConnectError } from './connect-error.js';
import { type PooledChannel, closeChannel, keepAliveReader, disposeLate, openChannel } from './open-channel.js';
import { type ChannelSpec, type SpecTable, grpcHostKey } from './target.js';

export type { PooledChannel } from './open-channel.js';

const { READY, IDLE, CONNECTING, TRANSIENT_FAILURE } = grpc.connectivityState;

/** Where a spec's channel stands, for `getConnectivityState` of the clients using it. */
interface Standing {
  live: PooledChannel | undefined;
  connecting: number;
  failed: boolean;
  /** Failed reconnect rounds in a row (0 after a success): connects made during a backoff do not count. */
  failures: number;
  /** When the next connect may start, on the clock (0: at once); a connect before it is no new round. */
  retryAt: number;
  /**
   * The last connect's failure when it was the client's own configuration's (see clientMistake:
   * a wrong CA or server name, not an HTTP/2 server); undefined otherwise. Until `retryAt`, a
   * connect fails at once with it, as a grpc-js channel in TRANSIENT_FAILURE fails its calls:
   * the breaker never paces such a client (its host answered), and it dialled per call, a TLS
   * handshake each (an outside review: 249 connections in 3 s where plain grpc-js made 3).
   */
  mistake: unknown;
  listeners: Set<() => void>;
}

/** Lingering standings (see ChannelConnector.#lingering) that start a sweep, at the least. */
const MIN_LINGER_SWEEP = 64;

/** grpc's reconnect backoff defaults (grpc-js `backoff-timeout`): 1 s initial, 1.6 x, ±20 %, 120 s max. */
const INITIAL_RECONNECT_BACKOFF = 1_000;
const MAX_RECONNECT_BACKOFF = 120_000;
const RECONNECT_MULTIPLIER = 1.6;
const RECONNECT_JITTER = 0.2;

/** A positive finite number option, else `fallback`. */
function msOption(options: grpc.ChannelOptions, key: string, fallback: number): number {
  const v: unknown = options[key];
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fallback;
}

/** The wait after `failures` failed connects in a row, as grpc computes it for a channel with `options`. */
export function reconnectDelay(options: grpc.ChannelOptions, failures: number, random: () => number = Math.random): number {
  const initial = msOption(options, 'grpc.initial_reconnect_backoff_ms', INITIAL_RECONNECT_BACKOFF);
  const max = Math.max(initial, msOption(options, 'grpc.max_reconnect_backoff_ms', MAX_RECONNECT_BACKOFF));
  const base = Math.min(max, initial * RECONNECT_MULTIPLIER ** Math.min(Math.max(0, failures - 1), 64));
  return base * (1 - RECONNECT_JITTER + 2 * RECONNECT_JITTER * random());
}

/** How the connector dials a name per address: the guard's breaker, bound and resolver. */
export interface AddressDialing {
  /** The guard's breaker: each address is its own entry in it. */
  readonly breaker: HostBreaker;
  /** Bound on the whole connect (lookup and every address's dial), ms. */
  readonly timeout: number;
  /** Resolves names; undefined: `dns.lookup`. */
  readonly lookup: net.LookupFunction | undefined;
  /** ms before the next address is dialled beside one not READY yet. */
  readonly attemptDelay: number;
  /** The breaker key of a target (the name's own entry: its lookups, and its refusal). */
  readonly hostOf: (target: string) => string;
}

/** Opens grpc-js channels for the pool. */
export class ChannelConnector implements Connector<PooledChannel> {
  readonly #specs: SpecTable;
  readonly #clock: Clock;
  readonly #standing = new Map<string, Standing>();
  /**
   * Unused standings kept only for a backoff still running. Nothing else looks at a target no
   * client calls again, so these are forgotten in a sweep (when a new standing is made and there
   * are enough of them): a process meeting many short-lived failing targets (pods come and go)
   * would otherwise keep one per target for good.
   */
  readonly #lingering = new Set<string>();
  /** How many lingering standings a new standing's arrival lets accumulate before a sweep. */
  #lingerLimit = MIN_LINGER_SWEEP;
  readonly #dialing: AddressDialing | undefined;
  /** Each spec's name, when it is dialled per address (null: it is not). */
  readonly #names = new WeakMap<ChannelSpec, (NamedTarget & { readonly key: string }) | null>();

  /** @param dialing - how to dial names per address; undefined: every target is one dial, by name. */
  constructor(specs: SpecTable, clock: Clock, dialing?: AddressDialing) {
    this.#specs = specs;
    this.#clock = clock;
    this.#dialing = dialing;
  }

  /** A channel with secure credentials dials over TLS; an insecure one in the clear. */
  transport(key: string): Transport | undefined {
    const spec = this.#specs.get(key);
    return spec === undefined ? undefined : channelTransport(spec);
  }

  /**
   * Whether `key`'s channel is one transport: under `pick_first` (grpc-js's default) it uses one
   * subchannel at a time, so a call cut by a dead connection proves the channel dead. Under
   * another policy (`round_robin`) it holds a subchannel per backend: one backend's death fails
   * its own calls only, grpc-js keeps the channel READY, and the channel's state (watched) says
   * when all are gone (an outside review: a rolling restart of 3 backends failed 85-94 calls
   * where grpc-js alone failed 40-49, the healthy backends' calls released with the channel).
   */
  oneTransport(key: string): boolean {
    const spec = this.#specs.get(key);
    return spec === undefined || picksFirst(spec.options['grpc.service_config']);
  }

  /**
   * Whether `key`'s target is a name this connector dials per address (each address its own
   * breaker entry, each dial bounded): the pool then leaves guarding and bounding to it.
   */
  guardsItself(key: string): boolean {
    const spec = this.#specs.get(key);
    return spec !== undefined && this.#nameOf(spec) !== undefined;
  }

  /**
   * ms until `spec`'s name may be dialled again when every address it last resolved to is
   * refused now; 0 otherwise, and for a target guarded by name.
   */
  addressWait(spec: ChannelSpec): number {
    const named = this.#nameOf(spec);
    return named === undefined ? 0 : addressesRetryAfter(this.#dialing!.breaker, named.key, this.#clock, channelTransport(spec), this.#dialing!);
  }

  connect(key: string, ctx: DialContext): Promise<PooledChannel> {
    const spec = this.#specs.get(key);
    if (spec === undefined) return Promise.reject(new Error(`no client holds channel ${key} any more`));
    const named = this.#nameOf(spec);
    const own = spec.keepAlive === undefined ? spec.options : { ...spec.options, 'grpc.keepalive_time_ms': spec.keepAlive };
    let attempt: Promise<PooledChannel>;
    if (named === undefined) {
      attempt = openChannel(spec, spec.target, own, ctx, this.#clock);
    } else {
      const dialing = this.#dialing!;
      const name = named.key;
      // Every address open: refused from memory, with no lookup and no change of standing (as
      // the pool's own refusal of a target guarded by name never reaches the connector).
      const transport = channelTransport(spec);
      const refusal = refuseFromMemory(dialing.breaker, name, this.#clock, transport, dialing);
      if (refusal !== undefined) return Promise.reject(refusal);
      const options = addressOptions(own, named);
      attempt = connectAddresses<PooledChannel>(
        named.host,
        named.port,
        name,
        (address, inner) => openChannel(spec, addressTarget(address, named.port), options, inner, this.#clock),
        {
          timeout: dialing.timeout,
          signal: ctx.signal,
          breaker: dialing.breaker,
          clock: this.#clock,
          attemptDelay: dialing.attemptDelay,
          transport,
          lookup: dialing.lookup,
          family: undefined,
          hints: undefined,
        },
        disposeLate,
      ).catch((err: unknown) => {
        throw eachAddressFailed(spec.target, err);
      });
    }
    const standing = this.#standingOf(key);
    // A connect made while a backoff runs (an ordinary call's, which does not wait for it) is
    // not a new reconnect round: its failure takes no backoff step. Counted per connect, 5
    // ordinary calls and their retries pushed the next round ~2 minutes out, and a waitForReady
    // call missed a server back seconds later (an outside review); grpc-js steps once per round.
    const round = standing.retryAt <= this.#clock.now();
    standing.connecting++;
    standing.failed = false;
    this.#notify(standing);
    return attempt.then(
      (pooled) => {
        standing.connecting--;
        standing.failures = 0;
        standing.retryAt = 0;
        standing.mistake = undefined;
        standing.live = pooled;
        this.#notify(standing);
        return pooled;
      },
      (err: unknown) => {
        standing.connecting--;
        // Refused (every address open): the breaker paces the next connect, not grpc's backoff.
        if (!(err instanceof HostUnavailableError)) {
          standing.failed = true;
          // Abandoned by the pool (its caller left, the guard closed): no evidence against the host.
          if (round && (!ctx.signal.aborted || ctx.signal.reason instanceof ConnectTimeoutError)) {
            standing.failures++;
            standing.retryAt = this.#clock.now() + reconnectDelay(spec.options, standing.failures);
          }
          standing.mistake = clientMistake(err) ? err : undefined;
        }
        this.#notify(standing);
        this.#forgetIfUnused(key, standing);
        throw err;
      },
    );
  }

  /**
   * Keeps the keep-alive interval the server taught `pooled`'s channel for the spec's next
   * channels. grpc-js doubles it at each GOAWAY `too_many_pings` (a server whose ping policy the
   * interval breaks, as Go's and C-core's defaults do for pings while idle), but each pooled
   * channel has a subchannel of its own and is closed once it leaves READY: without this, every
   * new channel pinged at the configured interval again and drew the same GOAWAY (and grpc-js's
   * ERROR log line) every few pings for good, where raw grpc-js backs off and goes quiet.
   */
  #learnKeepAlive(pooled: PooledChannel, read: () => number | undefined): void {
    const spec = this.#specs.get(pooled.key);
    if (spec === undefined) return;
    const configured = spec.options['grpc.keepalive_time_ms'];
    if (typeof configured !== 'number' || configured <= 0) return; // keep-alive off: nothing to learn
    // grpc-js doubles the interval right after telling the channel it left READY (this call).
    queueMicrotask(() => {
      const ms = read();
      if (ms !== undefined && ms > (spec.keepAlive ?? configured)) spec.keepAlive = ms;
    });
  }

  /** The name `spec`'s target is dialled per address through (with its breaker key), if it is. */
  #nameOf(spec: ChannelSpec): (NamedTarget & { readonly key: string }) | undefined {
    if (this.#dialing === undefined || !this.#dialing.breaker.enabled) return undefined;
    let named = this.#names.get(spec);
    if (named === undefined) {
      const found = namedTarget(spec.target, spec.options);
      named = found === undefined ? null : { ...found, key: this.#dialing.hostOf(spec.target) };
      this.#names.set(spec, named);
    }
    return named ?? undefined;
  }

  close(pooled: PooledChannel): void {
    closeChannel(pooled);
    const standing = this.#standing.get(pooled.key);
    if (standing?.live === pooled) {
      standing.live = undefined;
      this.#notify(standing);
      this.#forgetIfUnused(pooled.key, standing);
    }
  }

  watch(pooled: PooledChannel, watch: ConnectionWatch): () => void {
    const { channel, tracker } = pooled;
    let watching = true;
    /** Acts on the channel having left READY; `mayBeGone`: may mark it gone (not for a caller riding it). */
    // Taken while READY: grpc-js lets go of the subchannel before the channel is seen leaving.
    const keepAlive = keepAliveReader(channel);
    const leave = (mayBeGone: boolean): void => {
      watching = false;
      pooled.retireIfNotReady = undefined;
      this.#learnKeepAlive(pooled, keepAlive);
      if (mayBeGone && tracker.transportClosed) watch.gone(new TransportClosedError(channel.getTarget(), 'grpc channel'));
      else watch.retire('goaway');
      closeChannel(pooled);
      const standing = this.#standing.get(pooled.key);
      if (standing !== undefined) this.#notify(standing);
    };
    const onChange = (): void => {
      if (!watching || pooled.closed) return;
      const state = channel.getConnectivityState(false);
      if (state === READY) channel.watchConnectivityState(state, Infinity, onChange);
      else leave(true);
    };
    pooled.retireIfNotReady = () => {
      if (watching && !pooled.closed && channel.getConnectivityState(false) !== READY) leave(false);
    };
    onChange();
    return () => {
      // The pending watcher fires once more when the channel closes, and returns at once.
      watching = false;
      pooled.retireIfNotReady = undefined;
    };
  }

  /**
   * Where the channel for `key` stands, as a grpc connectivity state: READY with a live channel,
   * CONNECTING while a dial runs, TRANSIENT_FAILURE after a failed one, IDLE otherwise.
   */
  stateOf(key: string): grpc.connectivityState {
    const s = this.#standing.get(key);
    if (s === undefined) return IDLE;
    if (s.live !== undefined && !s.live.closed) return s.live.channel.getConnectivityState(false) === READY ? READY : IDLE;
    if (s.connecting > 0) return CONNECTING;
    return s.failed ? TRANSIENT_FAILURE : IDLE;
  }

  /**
   * The failure of `key`'s last connect while grpc's reconnect backoff after it runs, when it was
   * the client's own configuration's (see `Standing.mistake`); otherwise undefined. A call made
   * meanwhile fails at once with it, dialling nothing.
   */
  mistake(key: string): unknown {
    const s = this.#standing.get(key);
    return s?.mistake !== undefined && s.retryAt > this.#clock.now() ? s.mistake : undefined;
  }

  /**
   * When a new connect for `key` may start, on the clock: 0 (at once) unless the last ones failed,
   * then after grpc's reconnect backoff (see the module docs).
   */
  retryAt(key: string): number {
    return this.#standing.get(key)?.retryAt ?? 0;
  }

  /** Tells the listeners of `key` to look again (a connect was asked for and may not have started). */
  notify(key: string): void {
    const s = this.#standing.get(key);
    if (s !== undefined) this.#notify(s);
  }

  /** The live channel for `key`, if any. */
  liveChannel(key: string): grpc.Channel | undefined {
    const live = this.#standing.get(key)?.live;
    return live === undefined || live.closed ? undefined : live.channel;
  }

  /** Calls `listener` whenever the standing of `key` may have changed; returns the stopper. */
  onChange(key: string, listener: () => void): () => void {
    const standing = this.#standingOf(key);
    standing.listeners.add(listener);
    return () => {
      standing.listeners.delete(listener);
      this.#forgetIfUnused(key, standing);
    };
  }

  /** Whether anyone waits on the standing of `key` (a waitForReady call, a channel watcher). */
  waiting(key: string): boolean {
    return (this.#standing.get(key)?.listeners.size ?? 0) > 0;
  }

  /** Tells every listener to look again (the guard closed). */
  notifyAll(): void {
    for (const s of [...this.#standing.values()]) this.#notify(s);
  }

  #standingOf(key: string): Standing {
    let s = this.#standing.get(key);
    if (s === undefined) {
      if (this.#lingering.size >= this.#lingerLimit) this.#sweepLingering();
      s = { live: undefined, connecting: 0, failed: false, failures: 0, retryAt: 0, mistake: undefined, listeners: new Set() };
      this.#standing.set(key, s);
    }
    return s;
  }

  #forgetIfUnused(key: string, s: Standing): void {
    if (s.live !== undefined || s.connecting !== 0 || s.listeners.size !== 0 || this.#standing.get(key) !== s) return;
    // A backoff still running is kept: forgetting it would let the next asker dial at once.
    if (s.retryAt > this.#clock.now()) this.#lingering.add(key);
    else this.#standing.delete(key);
  }

  /**
   * Forgets the lingering standings whose backoff is over and that nobody took up again. The next
   * sweep waits for twice as many as are left, so a sweep costs O(1) per standing made.
   */
  #sweepLingering(): void {
    const keys = [...this.#lingering];
    this.#lingering.clear();
    for (const key of keys) {
      const s = this.#standing.get(key);
      if (s !== undefined) this.#forgetIfUnused(key, s);
    }
    this.#lingerLimit = Math.max(MIN_LINGER_SWEEP, 2 * this.#lingering.size);
  }

  /** @internal For tests: how many targets this connector keeps a standing for. */
  get standings(): number {
    return this.#standing.size;
  }

  #notify(s: Standing): void {
    for (const listener of [...s.listeners]) listener();
  }
}


/**
 * The failure of a connect every address of which failed (an AggregateError of each one's
 * {@link ChannelConnectError}) as one ChannelConnectError for the target, as a channel by name
 * reports it: the first address's status, the count in the details, the AggregateError as cause.
 * Anything else unchanged.
 */
function eachAddressFailed(target: string, err: unknown): unknown {
  if (!(err instanceof AggregateError) || err.errors.length === 0 || !err.errors.every((e) => e instanceof ChannelConnectError)) return err;
  const first = err.errors[0] as ChannelConnectError;
  const details = `${first.details} (each of ${err.errors.length} addresses failed)`;
  return new ChannelConnectError(target, { code: first.code, details, metadata: first.metadata }, err);
}

const transports = new WeakMap<ChannelSpec, Transport>();

/**
 * How `spec`'s channel reaches its host: over TLS with secure credentials, naming the server name
 * grpc-js sends (`grpc.ssl_target_name_override`, else the target's host when it is a name), so
 * that a client with a wrong override does not get the host refused for the others. Once per spec.
 */
export function channelTransport(spec: ChannelSpec): Transport {
  let transport = transports.get(spec);
  if (transport === undefined) {
    transport = spec.credentials._isSecure() ? tlsTransport(serverNameOf(spec)) : 'plain';
    transports.set(spec, transport);
  }
  return transport;
}

function serverNameOf(spec: ChannelSpec): string | undefined {
  const override: unknown = spec.options['grpc.ssl_target_name_override'];
  if (typeof override === 'string' && override !== '') return override;
  let key: string;
  try {
    key = grpcHostKey(spec.target);
  } catch {
    return undefined;
  }
  if (/^(?:unix|unix-abstract|vsock):/.test(key)) return undefined; // a socket has no name to send
  const host = key.slice(0, key.lastIndexOf(':'));
  // A list of addresses is keyed with '/'; an address sends no name.
  return host === '' || host.includes('/') || isLiteral(host) ? undefined : host;
}
