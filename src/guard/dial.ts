/**
 * One bounded dial: ask the breaker, establish under one timeout, report the outcome.
 *
 * `dial()` is protocol-agnostic. The `establish` callback does the whole job (TCP, TLS, any
 * protocol handshake such as HTTP/2 SETTINGS) and watches `ctx.signal`; `dial()` bounds it end to
 * end, settles the breaker permit exactly once, and hands a connection that arrives after the
 * dial was given up to `dispose` (give one, or an `establish` that ignores its signal leaks it;
 * `connect()` passes its own, which destroys the socket).
 *
 * @module
 */
import net from 'node:net';
import { markLeftRefusing } from '../core/classify.js';
import { type Clock, type TimerHandle, checkedClock, systemClock } from '../core/clock.js';
import { DEFAULT_CONNECT_TIMEOUT } from '../core/connect-timeout.js';
import { type ConnectPhase, ConnectTimeoutError, HostUnavailableError } from '../core/errors.js';
import { EventHub } from '../core/events.js';
import { checkDuration, checkSignal, opt, show, thrownText } from '../core/validate.js';
import { warnOnce } from '../core/warn-once.js';
import { type DialTraceMessage, dialTrace, traced } from '../observe/tracing.js';
import { dialFailureOutcome, localFailure } from './dial-outcome.js';
import { type DialPermit, HostBreaker, type Transport } from './host-breaker.js';
import { hostKey } from './host-key.js';
import { onCallerAbort } from '../core/shared-signal.js';

export { DEFAULT_CONNECT_TIMEOUT };

let shared: HostBreaker | undefined;

/**
 * The breaker that {@link dial} and `connect` use when given none: one per process, with default
 * options, so every client in the process shares what it learned about dead hosts.
 */
export function sharedBreaker(): HostBreaker {
  shared ??= new HostBreaker();
  return shared;
}

/**
 * An adapter's `breaker` option: left out, {@link sharedBreaker}; `null`, none; a `HostBreaker`,
 * itself. Checked when given: anything else was taken by one adapter (grpc), and then every call
 * failed UNAVAILABLE, `breaker.tryAdmit is not a function` (an outside review).
 *
 * @throws TypeError naming `breaker` for anything else.
 */
export function breakerOption(value: unknown): HostBreaker | null {
  if (value === undefined) return sharedBreaker();
  if (value === null || value instanceof HostBreaker) return value;
  throw new TypeError(`breaker must be a HostBreaker or null, got ${show(value)}`);
}

/** What `establish` gets from {@link dial}. */
export interface DialContext {
  /**
   * Aborted when the dial times out (reason: {@link ConnectTimeoutError}) or the caller aborts
   * (reason: the caller's). Establishment must stop and release what it holds.
   */
  readonly signal: AbortSignal;
  /** The breaker's permit for this dial (settled by `dial()`, not by `establish`). */
  readonly permit: DialPermit;
  /** The stage establishment is in; named by {@link ConnectTimeoutError} if it stalls. Update it. */
  phase: ConnectPhase;
  /**
   * Set it when the peer sent anything before establishment failed (a protocol answer, an
   * alert): the host is alive, so the failure is settled as a success for the breaker and never
   * counts against the host (the caller still gets the error). Starts false (`dial` sets it).
   */
  answered?: boolean;
}

/** Options of {@link dial}. */
export interface DialOptions<C = unknown> {
  /**
   * Bound on the whole establishment, ms. Default {@link DEFAULT_CONNECT_TIMEOUT}. A dial still
   * in `tcp` at the bound while another dial of the same address reached it (its TCP connection
   * came up) since this one began waits longer, once: the host is up and its accept queue was
   * full, and the kernel resends the dropped SYN 1 s, 3 s, 7 s... after the first. It waits until
   * 500 ms past the next resend, at most a second bound (2 500 ms: until 3 500). Its
   * `ConnectTimeoutError` then gives the whole wait. A dial by name never does: its siblings
   * may have reached another of the name's addresses.
   */
  timeout?: number;
  /** The caller's cancellation. Aborting it abandons the dial: never counted against the host. */
  signal?: AbortSignal;
  /**
   * The breaker to consult and feed. Default {@link sharedBreaker}; `null` dials without one.
   */
  breaker?: HostBreaker | null;
  /** Time source for the timeout. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * How the dial reaches the host, `'tls'` or `'plain'`. Default none (any). Given, a host opened
   * only by dials of the other transport (one client's plain dial to a TLS-only port) still lets
   * this one through: see {@link Transport}.
   */
  transport?: Transport;
  /**
   * Closes a connection that `establish` delivers after the dial was given up. Default none (the
   * connection is dropped unclosed). One that throws is reported as a process warning: the dial
   * has already settled, so there is no caller left to hand the error to.
   */
  dispose?: (connection: C) => void;
}

const noBreaker = new HostBreaker({ failureThreshold: 0 });

/**
 * The {@link DialContext} of one dial: its phase moving past `tcp` (to `tls`, `handshake`, a
 * protocol's own) tells the permit the host was reached ({@link DialPermit.progressed}), and
 * whoever asked through {@link whenReached}.
 */
class Context implements DialContext {
  #phase: ConnectPhase = 'tcp';
  #answered = false;
  /** Set by {@link whenReached}. */
  reached: (() => void) | undefined = undefined;
  /**
   * Reaches counted ({@link reaches}) when this dial began; undefined before it starts, and once it
   * reached its address or ended.
   */
  since: number | undefined = undefined;
  /**
   * The address (`address:port`, as {@link hostKey} spells it) its socket is connecting to: its
   * host's own key when that is an address; dialled by name, the one its socket names (see
   * {@link watchAddress}), undefined until then.
   */
  at: string | undefined = undefined;
  /** Stops listening to its socket for the addresses it connects to (see {@link watchAddress}). */
  unwatch: (() => void) | undefined = undefined;
  /**
   * @param outer - the context of the dial this one is the own of (see {@link OuterDial}): where
   *   it gets, and whether the host answered, are the outer dial's too. A pool's connector using
   *   `connect()` stalled in its protocol handshake was reported stalled in `tcp` when the pool's
   *   timeout fired first (an outside review), and its permit never heard that the host was reached.
   */
  constructor(
    readonly signal: AbortSignal,
    readonly permit: DialPermit,
    readonly outer: Context | undefined,
  ) {}
  get phase(): ConnectPhase {
    return this.#phase;
  }
  set phase(phase: ConnectPhase) {
    this.#phase = phase;
    if (phase !== 'tcp' && phase !== 'lookup') {
      this.reachedHost();
      this.permit.progressed();
      this.reached?.();
      if (this.outer !== undefined) this.outer.phase = phase;
    }
  }
  /** Its TCP connection is up: remembered once for the address it connected to (see {@link lastReached}). */
  reachedHost(): void {
    if (this.since === undefined) return;
    this.since = undefined;
    const seq = ++reaches;
    if (this.at !== undefined) remember(this.at, seq);
  }
  /**
   * Whether another dial reached the address this one is connecting to since this one began: the
   * address is up (its accept queue was full, and this SYN was dropped).
   */
  siblingReached(): boolean {
    // No address known (nothing was remembered under undefined), or this one reached it already
    // (`since` undefined): a comparison with undefined is false.
    return (lastReached.get(this.at!) ?? 0) > this.since!;
  }
  get answered(): boolean {
    return this.#answered;
  }
  set answered(answered: boolean) {
    this.#answered = answered;
    if (answered && this.outer !== undefined) this.outer.answered = true;
  }
}

/**
 * @internal Calls `reached` each time the phase of the dial `ctx` belongs to moves past `tcp`
 * (its TCP connection is up); a context not made by {@link dial}: never.
 */
export function whenReached(ctx: DialContext, reached: () => void): void {
  if (ctx instanceof Context) ctx.reached = reached;
}

/**
 * A dial in progress, as a dial made inside it sees it: one made there to the same host on the
 * same breaker (a pool's connector calling `connect()`, the natural way to write one) is that
 * dial's own, not a second one. It takes no permit of its own: asked again, the breaker refused
 * it while the outer dial held the probe, and that refusal failed the probe, so a host back from
 * an outage was never dialled again. Found by the outer dial's signal (`ctx.signal`, which a
 * connector passes on to be cancelled with it), or as the establishment running synchronously
 * (an inner call made before the connector's first await). No AsyncLocalStorage: in Node 20 one
 * turns on promise hooks for the whole process, a cost on every call of every client.
 */
interface OuterDial {
  readonly breaker: HostBreaker;
  readonly key: string;
  open: boolean;
  readonly ctx: Context;
}
const dialsBySignal = new WeakMap<AbortSignal, OuterDial>();

/** How many dials have reached their address (their TCP connection came up) in this process: a sequence. */
let reaches = 0;

/**
 * The addresses dials reached lately, each with the {@link reaches} count of its latest reach,
 * oldest first; at most {@link REACHED_KEPT}. An address reached since a dial began is up (see
 * {@link Context.siblingReached}). Kept past the dials in flight: dialled by name, a dial learns
 * its address only after the lookup, by when the first of a burst may have connected and ended
 * (3 of 6 dials by name failed at their bound while records lived only as long as their dials).
 */
const lastReached = new Map<string, number>();

/**
 * Addresses {@link lastReached} keeps: more than a process dials within one connect timeout
 * unless it dials a fleet, and then an address forgotten only costs its dials the longer wait.
 */
const REACHED_KEPT = 1_024;

function remember(address: string, seq: number): void {
  lastReached.delete(address); // to the back: the oldest is first
  lastReached.set(address, seq);
  if (lastReached.size > REACHED_KEPT) lastReached.delete(lastReached.keys().next().value!);
}

/**
 * @internal Tells the dial `ctx` belongs to which address `socket` connects to, as Node's
 * `'connectionAttempt'` event (`'lookup'` before Node 20.12) names it, so that a dial by name
 * stalled in TCP at an address another dial reached waits past the kernel's SYN resend as a dial
 * of that address does: by name, of 6 requests at a live server whose accept queue was full, 3
 * failed at the bound where Node's agent served all 6. A dial keyed by an address, or a context
 * not made by {@link dial}: nothing to learn. Stops listening when the dial ends.
 */
export function watchAddress(ctx: DialContext, socket: net.Socket): void {
  // `at` is already the dial's own key when that key is an address (set as the dial began).
  if (!(ctx instanceof Context) || ctx.since === undefined || ctx.at !== undefined) return;
  const key = ctx.permit.host;
  const port = key.slice(key.lastIndexOf(':') + 1); // the dial's own: the socket connects to no other
  // Anything but an address (a lookup that failed, a caller's resolver answering nonsense) names
  // none, and never throws inside an event listener.
  const onAttempt = (address: unknown): void => {
    if (net.isIP(address as string) !== 0) ctx.at = hostKey(address as string, port);
  };
  const onLookup = (err: unknown, address: unknown): void => {
    if (err == null) onAttempt(address); // 'connectionAttempt', where Node has it, follows and may name another
  };
  socket.on('connectionAttempt', onAttempt);
  socket.on('lookup', onLookup);
  ctx.unwatch = () => {
    socket.off('connectionAttempt', onAttempt);
    socket.off('lookup', onLookup);
  };
}

/**
 * When the kernel resends a SYN nothing answered, ms after the first one went: Linux starts at an
 * initial RTO of 1 s and doubles it, so 1 000, 3 000, 7 000, 15 000...; the first one after `ms`.
 */
function nextSynResend(ms: number): number {
  let at = 1_000;
  while (at <= ms) at = 2 * at + 1_000;
  return at;
}

/**
 * How long past a resent SYN a dial of a live but flooded address waits for its answer, ms: the
 * resend goes a little after its time (the first SYN left after the dial began), and the
 * handshake's own round trip follows it.
 */
const SYN_ANSWER_MARGIN = 500;

/** Whether the host key `key` (`host:port`) names one address (an IP literal), not a name. */
function namesAnAddress(key: string): boolean {
  const host = key.startsWith('[') ? key.slice(1, key.indexOf(']')) : key.slice(0, key.lastIndexOf(':'));
  return net.isIP(host) !== 0;
}

/** @internal For tests: how many addresses {@link lastReached} holds (at most {@link REACHED_KEPT}). */
export function addressesReachedKept(): number {
  return lastReached.size;
}
/** The dial whose `establish` is being called (synchronously), if any. */
let establishing: OuterDial | undefined;

/** Payloads of dial events (on `dialguard:dial:<event>`). */
export interface DialEvents {
  /**
   * A dial that was admitted ended. Fires per dial (and costs nothing unless someone listens):
   * for metrics such as dial time by outcome, not for logs.
   */
  settled: { host: string; outcome: 'succeeded' | 'failed' | 'abandoned'; duration: number; phase: string };
}

/**
 * Payloads of lookup events (on `dialguard:lookup:<event>`). A name guarded per address
 * (`connect`) resolves it under the breaker first, as one establishment: that is a DNS lookup,
 * not a dial, so it is published here and never on `dialguard:dial:settled` (no dial metric
 * counts it). `host` is the name's key, `phase` is `lookup`.
 */
export interface LookupEvents {
  /** A name's lookup ended (per lookup, for metrics only). */
  settled: DialEvents['settled'];
}

const events = new EventHub<DialEvents>('dial', { settled: true });
const lookupEvents = new EventHub<LookupEvents>('lookup', { settled: true });

/**
 * Dials `host` with `establish`, bounded by one timeout and guarded by a {@link HostBreaker}.
 *
 * Rejects with {@link HostUnavailableError} at once (no I/O) when the breaker refuses;
 * {@link ConnectTimeoutError} when establishment outlives `timeout` (a failed dial); the caller's
 * `signal.reason` when it aborts (an abandoned dial); otherwise `establish`'s own error, unchanged.
 * That error counts against the host only if the host did not answer (see `dialFailureOutcome`):
 * a certificate, hostname or ALPN error, a TLS alert or any answer (`ctx.answered`) proves it
 * alive, and EMFILE, ENFILE, EADDRNOTAVAIL or ENOBUFS are this process's own failures.
 *
 * @param host - the breaker key (anything `hostKey` accepts, e.g. `host:port`).
 */
export function dial<C>(host: string, establish: (ctx: DialContext) => Promise<C>, options: DialOptions<C> = {}): Promise<C> {
  return dialWith(host, establish, options, options.dispose);
}

/**
 * {@link dial} with `dispose` apart from the options, so a caller supplying its own (connect)
 * need not copy the options object on every call, refused ones included. `lookup`: the
 * establishment is a name's DNS lookup, reported as one ({@link LookupEvents}, trace `kind`).
 * `port`: given with `host` to the breaker as is, so a caller holding a host and a port (connect)
 * need not make their key: the breaker finds a warm host by its spelling.
 *
 * @internal
 */
export function dialWith<C>(
  host: string,
  establish: (ctx: DialContext) => Promise<C>,
  options: DialOptions<C>,
  dispose: ((connection: C) => void) | undefined,
  lookup = false,
  port?: number,
  transport: Transport | undefined = options.transport,
): Promise<C> {
  let permit: DialPermit;
  let breaker: HostBreaker;
  let timeout: number;
  let signal: AbortSignal | undefined;
  let clock: Clock;
  let ownOf: Context | undefined; // the outer dial's context, when this one is its own
  try {
    timeout = checkDuration('timeout', opt(options.timeout, DEFAULT_CONNECT_TIMEOUT), 1);
    // Before the breaker is asked: a permit taken for a dial that cannot start is never settled.
    signal = checkSignal('signal', options.signal);
    clock = checkedClock(options.clock);
    breaker = options.breaker === undefined ? sharedBreaker() : (options.breaker ?? noBreaker);
    const outer = (signal === undefined ? undefined : dialsBySignal.get(signal)) ?? establishing;
    if (outer !== undefined && outer.open && outer.breaker === breaker && outer.key === hostKey(host, port)) {
      breaker = noBreaker; // the outer dial's own: no permit, and nothing published of its own
      ownOf = outer.ctx;
    }
    const answer = breaker.tryAdmit(host, port, transport); // a refusal as a value: no throw on the hot path
    if (answer instanceof HostUnavailableError) return Promise.reject(answer);
    permit = answer;
  } catch (err) {
    return Promise.reject(err);
  }
  if (signal?.aborted) {
    permit.abandoned(); // never started: no dial to report
    return Promise.reject(signal.reason);
  }
  const controller = new AbortController();
  const ctx = new Context(controller.signal, permit, ownOf);
  const own = ownOf !== undefined;
  const scope: OuterDial = { breaker, key: permit.host, open: true, ctx };
  dialsBySignal.set(controller.signal, scope);
  const started = clock.now();
  // A trace only when someone listens (dialguard:dial): otherwise the dial runs as is. The outer
  // dial's own is neither traced nor reported: the outer dial is (a pool whose connector used
  // connect() counted every dial twice in dial:settled, the metrics and the spans; an outside review).
  const trace: DialTraceMessage | undefined = !own && traced(dialTrace) ? { host: permit.host, probe: permit.probe, kind: lookup ? 'lookup' : 'dial' } : undefined;
  const hub: EventHub<DialEvents> = lookup ? lookupEvents : events;
  const report = (outcome: DialEvents['settled']['outcome']): void => {
    if (own) return;
    if (trace !== undefined) {
      trace.outcome = outcome;
      trace.phase = String(ctx.phase);
    }
    if (hub.active('settled')) hub.emit('settled', { host: permit.host, outcome, duration: clock.now() - started, phase: String(ctx.phase) });
  };
  // The breaker hears how the dial ended, then the listeners. A breaker or clock that throws
  // (a caller's clock) is a warning: the dial still settles (it was lost, never settled, or
  // thrown from its timer as an uncaught exception; an outside review).
  const settle = (outcome: DialEvents['settled']['outcome'], err?: unknown): void => {
    try {
      if (outcome === 'failed') {
        permit.failed(err);
        if (breaker !== noBreaker && refusing(breaker, permit.host, transport)) markLeftRefusing(err);
      } else if (outcome === 'succeeded') permit.succeeded();
      else permit.abandoned();
    } catch (thrown) {
      warnOnce('a breaker threw while settling a dial (its clock?; contained, reported once)', breaker, thrown);
    }
    try {
      report(outcome);
    } catch (thrown) {
      warnOnce("a dial's clock threw while reporting it (contained, reported once)", clock, thrown);
    }
  };

  const run = (): Promise<C> => new Promise<C>((resolve, reject) => {
    let done = false;
    let timer: TimerHandle | undefined;
    ctx.since = reaches;
    if (namesAnAddress(permit.host)) ctx.at = permit.host; // else learned from its socket, if at all (watchAddress)
    const end = (): void => {
      done = true;
      scope.open = false;
      if (timer !== undefined) clock.clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      release();
    };
    const release = (): void => {
      ctx.since = undefined;
      ctx.unwatch?.();
      ctx.unwatch = undefined;
    };
    const onAbort = (): void => {
      if (done) return;
      end();
      settle('abandoned');
      controller.abort(signal!.reason);
      reject(signal!.reason);
    };
    try {
      if (signal !== undefined) onCallerAbort(signal, onAbort);
    } catch (err) {
      // A signal-like that cannot be listened to: the dial never starts, and no timer is armed.
      done = true;
      release();
      permit.abandoned();
      reject(err);
      return;
    }
    let waited = timeout;
    /** The timer fired and a poll of I/O is awaited before deciding (see expire). */
    let polling = false;
    const expire = (): void => {
      if (done) return;
      // Node runs expired timers before it polls for I/O: a connect the kernel completed while a
      // long tick blocked the loop is heard only after this timer, and the dial failed though its
      // socket was up (870 of a 4 000-connection burst, the client busy with it). Decided after
      // one poll (the check phase follows it): a connect heard there has ended the dial.
      if (!polling) {
        polling = true;
        setImmediate(expire);
        return;
      }
      polling = false;
      // Stalled in TCP while another dial reached its address since it began: the address is up
      // and its accept queue was full, so this SYN was dropped and the kernel resends it (after
      // 1 s, then 2 s more). Once, a little longer: a burst of 4 000 new connections to a live
      // loopback server failed 1 974 of them at 2.5 s, where Node's agent, with no bound, served
      // all 4 000 by 3.1 s. A dead host reaches no dial, and a stalled handshake is past TCP:
      // neither waits longer. By address, never by name: a sibling dialled by name may have
      // reached another of its addresses, which says nothing of this one's (a dead pod's among
      // live ones: seed 000); a dial by name is judged by the address its socket connects to.
      if (waited === timeout && ctx.siblingReached()) { // false once it reached its address: past tcp, it is a handshake stalled
        // Until the kernel's next resend has had time to be answered, and never more than a
        // second bound: an address whose dials a balancer splits between a live backend and a
        // dead one looks the same, and its dead share should cost no more than it must.
        waited = Math.min(2 * timeout, nextSynResend(timeout) + SYN_ANSWER_MARGIN);
        timer = clock.setTimeout(expire, Math.max(0, started + waited - clock.now())); // from the dial's start: the poll above took a turn
        return;
      }
      end();
      const err = new ConnectTimeoutError(permit.host, waited, ctx.phase);
      settle('failed', err);
      controller.abort(err);
      reject(err);
    };
    timer = clock.setTimeout(expire, timeout);

    let attempt: Promise<C>;
    try {
      // A value that is not a promise is taken as the connection, as `await` would.
      const previous = establishing;
      establishing = scope;
      try {
        attempt = Promise.resolve(establish(ctx));
      } finally {
        establishing = previous;
      }
    } catch (err) {
      // Thrown before any I/O could start: this process's failure, not the host's.
      attempt = Promise.reject(localFailure(err));
    }
    attempt.then(
      (connection) => {
        if (done) {
          disposeLate(dispose, connection);
          return;
        }
        ctx.reachedHost(); // before end() lets go of it: a plain dial never moves past tcp
        end();
        settle('succeeded');
        resolve(connection);
      },
      (err: unknown) => {
        if (done) return;
        end();
        // Only the host's failures count: a certificate it presented, an alert it sent or any
        // answer proves it alive; a failure local to this process says nothing about it.
        settle(dialFailureOutcome(err, ctx.answered === true), err);
        controller.abort(err);
        reject(err);
      },
    );
  });
  return trace === undefined ? run() : dialTrace.tracePromise(run, trace);
}

/**
 * Whether `breaker` refuses a `transport` dial to `key` now: open inside its window (isolated, or
 * a stranger's own window), or half-open with its probe out; read without touching its recency
 * or counters. One check for the dial's mark (leftHostRefusing) and a name's refusal from memory.
 *
 * @internal
 */
export function refusing(breaker: HostBreaker, key: string, transport: Transport | undefined): boolean {
  const s = breaker.state(key, undefined, transport);
  return s !== undefined && s.state !== 'closed' && s.retryAfter > 0;
}

/** Calls the user's `dispose` on a late connection; a throw becomes a warning, never an unhandled rejection. */
function disposeLate<C>(dispose: ((connection: C) => void) | undefined, connection: C): void {
  if (dispose === undefined) return;
  try {
    dispose(connection);
  } catch (err) {
    process.emitWarning(`dialguard: dispose threw while closing a connection that arrived after its dial was given up: ${thrownText(err)}`);
  }
}

/**
 * `permit`, reporting the dial it stands for as {@link dial} reports its own: a `dial:settled`
 * event and a `dialguard:dial` trace, each only when someone listens. For an adapter that admits
 * a client's dials itself, with no promise to hand {@link dial} (RedisGuard: the client dials, the
 * guard hears its events): those dials were on no event, metric nor span (an outside review).
 * `phase` is read when the dial settles.
 *
 * @internal
 */
export function reportingPermit(permit: DialPermit, now: () => number, phase: () => ConnectPhase): DialPermit {
  const tracing = traced(dialTrace);
  if (!tracing && !events.active('settled')) return permit;
  const started = now();
  const trace: DialTraceMessage = { host: permit.host, probe: permit.probe, kind: 'dial' };
  let end: ((err?: unknown) => void) | undefined;
  if (tracing) {
    const ended = new Promise<void>((resolve, reject) => {
      end = (err) => (err === undefined ? resolve() : reject(err));
    });
    dialTrace.tracePromise(() => ended, trace).catch(() => {}); // the trace's copy: the client has the error
  }
  // The breaker hears how the dial ended, then the listeners, as for dial()'s own.
  const settle = (outcome: DialEvents['settled']['outcome'], err?: unknown): void => {
    if (permit.settled) return; // settled before: nothing new to report
    if (outcome === 'failed') permit.failed(err);
    else if (outcome === 'succeeded') permit.succeeded();
    else permit.abandoned();
    const at = String(phase());
    trace.outcome = outcome;
    trace.phase = at;
    if (events.active('settled')) events.emit('settled', { host: permit.host, outcome, duration: now() - started, phase: at });
    end?.(outcome === 'failed' ? (err ?? new Error('dial failed')) : undefined);
  };
  return {
    host: permit.host,
    probe: permit.probe,
    get settled() {
      return permit.settled;
    },
    succeeded: () => settle('succeeded'),
    failed: (error?: unknown) => settle('failed', error),
    abandoned: () => settle('abandoned'),
    progressed() {
      permit.progressed();
    },
  };
}
