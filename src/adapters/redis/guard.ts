/**
 * {@link RedisGuard}: node-redis and ioredis clients whose every dial asks a {@link HostBreaker}
 * keyed by the node's address, so a dead node costs at most one dial per breaker window per
 * process, however many clients point at it (seed 002's storm in its commonest form).
 *
 * The clients keep their own connect code. The guard adds three things:
 * - a gate at dial time (node-redis: the socket's `lookup`; ioredis: its `Connector`): while the
 *   breaker refuses the node, the dial fails at once with `HostUnavailableError`, no packet sent;
 * - a `connectTimeout`, and a reconnect strategy (node-redis `socket.reconnectStrategy`, ioredis
 *   `retryStrategy`) that waits out the node's open window instead of redialling every 50-2 000 ms
 *   (the client's own strategy, if given, still decides whether to go on and may wait longer);
 * - before the breaker opens (it waits for a minimum outage, so that a blip never opens a node),
 *   one redial per round for all of a node's clients instead of one loop per client
 *   ({@link RedialRounds}): a client that comes to dial while a round is out waits for its outcome;
 * - the outcome of each admitted dial, from the client's events: 'ready' is a success; the
 *   strategy's next call means the dial ended without 'ready', a failure unless the server
 *   answered (a Redis error reply, e.g. a wrong password, proves the node alive, rule 1).
 * A node that comes back is used again after one probe: the others, refused while it was out,
 * retry soon (a refusal costs no I/O) and find the node closed.
 *
 * A node frozen after accepting (SIGSTOP), or any accept-and-hold peer, completes TCP from the
 * kernel's backlog. The clients then wait outside their own `connectTimeout` (ioredis for its INFO
 * ready check, node-redis for its handshake), forever: the guard bounds it (`handshake.ts`: a
 * connection that received nothing `connectTimeout` (the guard's, or the client's own if longer)
 * after its dial began is a failed dial,
 * `ConnectTimeoutError` phase 'handshake'), so the client redials in rounds; ioredis fails its
 * waiting commands after `maxRetriesPerRequest`, node-redis keeps them queued unless
 * `disableOfflineQueue`. The cluster factories are in `cluster.ts`.
 * Not covered: a connection that froze after 'ready' (not a dial: give a reply timeout, e.g. node-redis's
 * `socket.socketTimeout`).
 *
 * @module
 */
import dns from 'node:dns';
import net from 'node:net';
import { type PeerCertificate, checkServerIdentity as tlsCheck } from 'node:tls';
import { ConnectTimeoutError, HostUnavailableError, TransportClosedError } from '../../core/errors.js';
import { unitRandom } from '../../core/backoff.js';
import { checkDuration, checkFunction, MAX_DURATION, opt, show } from '../../core/validate.js';
import { reportingPermit, sharedBreaker } from '../../guard/dial.js';
import { dialFailureOutcome } from '../../guard/dial-outcome.js';
import { type DialPermit, HostBreaker, type Transport } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { answerLookup, ioredisCluster, nodeRedisCluster, resolverOf } from './cluster.js';
import { boundHandshake, takeConnectingSocket, watchConnectingSockets } from './handshake.js';
import {
  ClientState,
  type ConnectorClass,
  type EventClient,
  type GuardInternals,
  type IoredisArguments,
  type IoredisOptions,
  NODE_REDIS_LONGEST_WAIT,
  type NodeRedisOptions,
  defaultConnector,
  ioredisKey,
  ioredisOptions,
  nodeRedisGivesUp,
  nodeRedisTarget,
  serverReplied,
  strategyAnswer,
  withoutUrl,
} from './internals.js';
import { gatedHost, poolMemberOptions, withEndpointType } from './pool.js';
import { FIRST_ROUND_CAP, RedialRounds, type RoundOutcome, type RoundPolicy } from './redial.js';
import { checkOptionNames, optionNames } from '../../core/option-names.js';

export type { EventClient, IoredisArguments, IoredisOptions, NodeRedisOptions } from './internals.js';

/** The option names a RedisGuard takes: any other is warned about (see checkOptionNames). */
const GUARD_OPTIONS = optionNames<RedisGuardOptions>({ breaker: true, connectTimeout: true, maxBackoff: true, random: true });

/**
 * The redial rounds of each breaker: rounds belong with the breaker's keys, one per node per
 * breaker, so every guard on one breaker (the process-wide shared one by default) redials a node
 * as one. Weak: a breaker dropped takes its rounds with it.
 */
const roundsOf = new WeakMap<HostBreaker, RedialRounds>();

function roundsFor(breaker: HostBreaker): RedialRounds {
  let rounds = roundsOf.get(breaker);
  if (rounds === undefined) {
    // Every guard passes its own policy; these are never used.
    rounds = new RedialRounds(2_000, 3_000, Math.random);
    roundsOf.set(breaker, rounds);
  }
  return rounds;
}

/** Options of a {@link RedisGuard}; every one has a default. */
export interface RedisGuardOptions {
  /**
   * The breaker every client's dials ask and report to, keyed by the node's `host:port`. Default
   * the process-wide `sharedBreaker()`, so every client in the process shares what one learned.
   */
  breaker?: HostBreaker;
  /**
   * Bound on one connect, ms (TCP, TLS and the client's handshake), given to each client that
   * sets no `connectTimeout` of its own (node-redis: `socket.connectTimeout`; 0, "none", and null
   * count as unset); a client's own bounds what it bounds itself (TCP and TLS), and the handshake
   * after it, which neither client bounds, has the longer of the two. A cluster's node connections
   * all take this one. Default 2 000: a cache node on the same network connects in
   * milliseconds, and a cache is worth less than a long wait (node-redis's own default is 5 000,
   * ioredis's 10 000).
   */
  connectTimeout?: number;
  /**
   * Longest spacing of a failing node's redial rounds while the breaker has not opened it, ms
   * (rounds are shared by the clients of that node of every guard on the same breaker: see
   * `redial.ts`; the spacing is equal jitter from 25-50 ms growing by 50 ms a round up to this;
   * the guard whose dial failed spaces the next round). Default 2 000, as ioredis's own cap: once the
   * breaker opens, its window decides the wait instead. At least 50 (the first round's cap): 0
   * spaced the rounds by nothing, hundreds of redials a second against a failing node.
   */
  maxBackoff?: number;
  /**
   * Uniform [0, 1) source for the jitter. Default `Math.random`. An answer outside [0, 1) (NaN, a
   * negative number, a string) is replaced by `Math.random()`'s, and so is a throw (reported once
   * as a process warning): a bad source must not space redials by nothing nor crash a client.
   */
  random?: () => number;
}

/**
 * `client`, whose `duplicate()` makes a guarded client of its own through `guarded`. The clients'
 * own duplicate() copies the options this guard gave the client, whose gate and strategy are
 * bound to its state: the copies' dials were reported as the parent's, so a 300 ms restart
 * opened the breaker and subscribers came back in 2.5-3.7 s (unguarded: ~0.3 s).
 *
 * node-redis v5 also makes proxies of the client (`withTypeMapping()`, `withCommandOptions()`,
 * `asap()`...) on the instance underneath (`_self`), so the override goes there too, and a copy
 * made from a proxy keeps its command options (`_commandOptions`), as node-redis's own does.
 */
function guardedDuplicates<C extends EventClient>(client: C, guarded: (overrides: object) => C): C {
  if (typeof (client as { duplicate?: unknown }).duplicate !== 'function') return client;
  const duplicate = function (this: { _commandOptions?: unknown } | undefined, overrides?: object): C {
    const commandOptions = this?._commandOptions;
    return guarded(commandOptions === undefined ? (overrides ?? {}) : { commandOptions, ...overrides });
  };
  const self = (client as { _self?: unknown })._self;
  for (const target of [client, self]) {
    if (typeof target !== 'object' || target === null) continue;
    Object.defineProperty(target, 'duplicate', { value: duplicate, configurable: true, writable: true });
  }
  return client;
}

/**
 * `client`, whose `createPool()` builds a pool through `pool` (see `pool.ts`). node-redis's own
 * builds every member from this client's options, whose gate is bound to this client's state:
 * 10 members connecting to a healthy node settled each other's dials as failed and opened it.
 * On the instance underneath too (`_self`), as for {@link guardedDuplicates}.
 */
function guardedPools<C extends EventClient>(client: C, pool: (poolOptions: unknown) => unknown): void {
  if (typeof (client as { createPool?: unknown }).createPool !== 'function') return;
  const createPool = (poolOptions?: unknown): unknown => pool(poolOptions);
  const self = (client as { _self?: unknown })._self;
  for (const target of [client, self]) {
    if (typeof target !== 'object' || target === null) continue;
    Object.defineProperty(target, 'createPool', { value: createPool, configurable: true, writable: true });
  }
}

/**
 * Longest a client is told to wait for an open node before asking again: 2 s, as ioredis's own
 * strategy caps its waits (and node-redis's, see NODE_REDIS_LONGEST_WAIT). A refusal costs no
 * I/O, and what the client was told goes stale: the node may close meanwhile by another client's
 * dial (a server moved from plain to TLS, a TLS client's trial) or be released from an isolation.
 * At 30 s (the default window's cap) ioredis clients of a server moved to TLS came back 7-35 s
 * after it did, their plain selves within 4.5 s (an outside review).
 */
const OPEN_POLL = 2_000;

/** Gives node-redis and ioredis clients breaker-gated dials and reconnects. See the module docs. */
export class RedisGuard {
  /** The breaker the clients' dials ask and report to. */
  readonly breaker: HostBreaker;
  readonly #timeout: number;
  readonly #maxBackoff: number;
  readonly #random: () => number;
  /** The clients' redials per node, in rounds shared by every guard on this breaker. */
  readonly #rounds: RedialRounds;
  /** This guard's spacing of the rounds and bound on a round's lead. */
  readonly #policy: RoundPolicy;
  /** The dial steps the cluster factories (`cluster.ts`) use: this guard's own, not public API. */
  readonly #internals: GuardInternals;

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: RedisGuardOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    checkOptionNames('RedisGuard', options, GUARD_OPTIONS);
    // null is refused, not taken as "the shared one": every other adapter reads null as "no
    // breaker", and a guard with none has nothing to gate (use the plain client for that).
    const breaker = options.breaker === undefined ? sharedBreaker() : options.breaker;
    if (!(breaker instanceof HostBreaker)) throw new TypeError(`breaker must be a HostBreaker (left out: the shared one), got ${show(breaker)}`);
    this.breaker = breaker;
    this.#timeout = checkDuration('connectTimeout', opt(options.connectTimeout, 2_000), 1);
    // At least the first round's cap: 0 (or a fraction) spaced the rounds by nothing, a redial storm.
    this.#maxBackoff = checkDuration('maxBackoff', opt(options.maxBackoff, 2_000), FIRST_ROUND_CAP);
    // Checked on every draw, as retry() and the breaker check theirs: a NaN or negative answer
    // spaced redials by nothing (~17x the plain clients' dials in a 300 ms restart), and a throw
    // escaped ioredis's retryStrategy as an uncaught exception (an outside review).
    this.#random = options.random === undefined ? Math.random : unitRandom(checkFunction<() => number>('random', options.random), Math.random, "a RedisGuard's");
    this.#rounds = roundsFor(breaker);
    // Capped: a timer past 2^31-1 ms fires after 1 ms, and the round would hold no one.
    this.#policy = { maxBackoff: this.#maxBackoff, leadFor: Math.min(this.#timeout + 1_000, MAX_DURATION), random: this.#random };
    this.#internals = {
      timeout: this.#timeout,
      rounds: this.#rounds,
      gate: (state, wanted) => this.#gate(state, wanted),
      succeeded: (state) => this.#succeeded(state),
      settle: (state, cause) => this.#settle(state, cause),
      abandon: (state) => this.#abandon(state),
      delayFor: (key, attempt, rounds, transport, floor) => this.#delayFor(key, attempt, rounds, transport, floor),
      boundHandshake: (state, permit, stream, pipelined) => this.#boundHandshake(state, permit, stream, pipelined),
    };
  }

  /**
   * A node-redis client (v4/v5) whose every dial asks the breaker first:
   * `guard.nodeRedis(createClient, { url: 'redis://cache:6379' })`. Call `connect()` as usual.
   *
   * The gate is the socket's `lookup` (Node calls it at each TCP attempt): a refusal fails the
   * dial at once, with no packet sent, as a `HostUnavailableError` the client's 'error' carries.
   * An IP address is given to Node as a name under `.dialguard.invalid` that only this lookup
   * resolves (back to the address), since Node skips the lookup for an IP literal; with TLS, the
   * certificate is still checked against the address (or `socket.servername` if given).
   */
  nodeRedis<O, C extends EventClient>(createClient: (options: O) => C, clientOptions?: O): C {
    const options = (clientOptions ?? {}) as NodeRedisOptions;
    const { socket, state } = this.#nodeRedisSocket(options);
    const gated = gatedHost(socket.host ?? 'localhost');
    let client: C | undefined;
    // Destroyed or closed while its dial waited for a round: it takes no permit when the round ends.
    const open = (): boolean => (client as { isOpen?: boolean } | undefined)?.isOpen !== false;
    socket.lookup = this.#gatedLookup(state, gated.ip, socket.lookup as net.LookupFunction | undefined, open);
    socket.host = gated.name;
    watchConnectingSockets();
    const own = socket.reconnectStrategy;
    socket.reconnectStrategy = (retries: number, cause: unknown) => {
      // destroy() or close() during a dial: the caller's own cancellation, never a failed dial (rule 2).
      if ((client as { isOpen?: boolean } | undefined)?.isOpen === false) this.#abandon(state);
      if (own === undefined && nodeRedisGivesUp(cause)) return false; // as node-redis's default
      // Where the breaker and the rounds say nothing (a node that answers every dial with an
      // error, a wrong password), no sooner than node-redis's own default would redial: the
      // guard's jitter alone redialled such a node twice as often as plain clients (10 against 5
      // dials a second for 10 clients).
      const floor = own === undefined ? Math.min(2 ** Math.min(retries, 16) * 50, NODE_REDIS_LONGEST_WAIT) : 0;
      const delay = Math.min(this.#next(state, retries, cause, floor), NODE_REDIS_LONGEST_WAIT);
      // The client's own strategy still decides whether to go on, and may ask for a longer wait.
      if (own === undefined) return delay;
      const theirs: unknown = typeof own === 'function' ? (own as (r: number, c: unknown) => unknown)(retries, cause) : own;
      return strategyAnswer(theirs, delay);
    };
    const guarded = withEndpointType({ ...withoutUrl(options, socket), socket }, gated.ip);
    client = createClient(guarded as O);
    this.#watch(client, state, false); // its reconnectStrategy hears each dial's error itself
    // node-redis builds a duplicate from this client's options, as `{ ...options, ...overrides }`,
    // and a pool's members from them as they are: each gets gates of its own.
    guardedPools(client, (poolOptions) => {
      // A client that never connects, made only to build the pool from its options: node-redis's
      // own createPool() is `RedisClientPool.create(options, poolOptions)`, a class not given here.
      const template = createClient(this.#poolMemberOptions(options) as O) as unknown as { createPool(p: unknown): unknown };
      return template.createPool(poolOptions);
    });
    return guardedDuplicates(client, (overrides) => this.nodeRedis(createClient, { ...options, ...overrides } as O));
  }

  /**
   * A node-redis client pool (v5, `createClientPool`) whose members' dials each ask the breaker
   * first: `guard.nodeRedisPool(createClientPool, { url: 'redis://cache:6379' }, { minimum: 4 })`.
   * Call `connect()` as usual. A guarded client's `createPool()` makes the same pool.
   *
   * A pool builds all its members from one options object, so each dial is gated and reported on
   * its own, from its socket: the node's first byte is a success, an error before it a failure, a
   * close with no error abandoned. The redials of all members, and of every other client of the
   * node on this breaker, go in the node's shared rounds. Members with TLS are not gated (Node
   * publishes no TLS socket to report from): such a pool is node-redis's own.
   *
   * @param createClientPool - node-redis's `createClientPool` (from `redis` or `@redis/client`).
   * @param clientOptions - each member's options, as for {@link RedisGuard.nodeRedis}.
   * @param poolOptions - the pool's own (`minimum`, `maximum`, `acquireTimeout`...), passed as given.
   */
  nodeRedisPool<O, P, C>(createClientPool: (clientOptions: O, poolOptions?: P) => C, clientOptions?: O, poolOptions?: P): C {
    return createClientPool(this.#poolMemberOptions((clientOptions ?? {}) as NodeRedisOptions) as O, poolOptions);
  }

  /** See `pool.ts`. */
  #poolMemberOptions(options: NodeRedisOptions): NodeRedisOptions {
    const { socket, state } = this.#nodeRedisSocket(options);
    return poolMemberOptions(this.#internals, options, socket, state);
  }

  /**
   * A node-redis client's `socket` options, copied, and a dial state for its node: host and port
   * set from the url or the options, its own `connectTimeout` taken as its bound (or the guard's),
   * and with TLS by IP address, the certificate checked against that address (or
   * `socket.servername`), since Node is given a gated name ({@link gatedHost}) instead.
   */
  #nodeRedisSocket(options: NodeRedisOptions): { socket: NonNullable<NodeRedisOptions['socket']>; state: ClientState } {
    const { host, port } = nodeRedisTarget(options);
    const socket: NonNullable<NodeRedisOptions['socket']> = { ...(options.socket ?? {}) };
    const tls = socket.tls === true || (typeof options.url === 'string' && options.url.startsWith('rediss:'));
    const state = new ClientState(hostKey(host, port), true, tls);
    socket.host = host;
    socket.port = port;
    const { ip } = gatedHost(host);
    if (ip !== undefined && tls) {
      // Node checks the certificate against `servername ?? host`: the gated name is not the
      // node's, so the check is handed the address the client asked for (Node sends no SNI for a
      // `host` alone, so the name never leaves the process).
      const check = (socket.checkServerIdentity as typeof tlsCheck | undefined) ?? tlsCheck;
      const identity = typeof socket.servername === 'string' ? socket.servername : ip;
      socket.checkServerIdentity = (_name: string, cert: PeerCertificate) => check(identity, cert);
    }
    socket.connectTimeout = this.#own(state, socket.connectTimeout, 'socket.connectTimeout');
    return { socket, state };
  }

  /**
   * An ioredis client (v5) whose every dial asks the breaker first:
   * `guard.ioredis(Redis, { host: 'cache', port: 6379 })`. The gate is its `Connector`: a refusal
   * is a connect that failed at once, with no packet sent, and `retryStrategy` schedules the next.
   * After `Redis`, the arguments `new Redis()` takes, read by ioredis itself: options, a port, a URL
   * (`'redis://cache:6380/2'`) or a unix socket path, a port and a host, each with options after it
   * (see {@link IoredisArguments}). A unix socket client is filed by its path.
   *
   * Sentinel (`{ sentinels, name }`) works as unguarded: the sentinels are asked for the master
   * (their own connections are not gated), and the dial to the address they name asks the breaker
   * keyed by that address (after a failover, the new master's). A `Connector` of your own is
   * gated as given (ioredis then ignores `sentinels`, guarded or not).
   *
   * @throws TypeError naming `sentinels` if this ioredis's Sentinel connector has no `resolve()`
   *   to gate (a silent dial to the wrong server is not an option).
   */
  ioredis<C extends EventClient>(Redis: new (...args: never[]) => C, ...args: IoredisArguments): C {
    const options = ioredisOptions(Redis, args);
    const Client = Redis as unknown as new (options: IoredisOptions) => EventClient;
    const given = options.Connector as ConnectorClass | undefined;
    // ioredis picks its SentinelConnector for `sentinels` (unless given a Connector of the user's):
    // the dial to gate is then the one to the address the sentinels resolve, known only at dial time.
    const sentinel = given === undefined && Boolean(options.sentinels);
    const Base = given ?? defaultConnector(Client, options);
    const ownDefault = ioredisDefaultStrategy(Redis);
    if (sentinel && typeof Base.prototype.resolve !== 'function') {
      throw new TypeError(`dialguard: this ioredis's connector for \`sentinels\` (${Base.name}) has no resolve() the guard can gate; use an unguarded client for Sentinel`);
    }
    // A Sentinel client's key is set to the resolved address before each dial (never used before).
    // ioredis dials a Sentinel's master with TLS only given enableTLSForSentinelMode.
    const tls = Boolean(options.tls) && (!sentinel || Boolean(options.enableTLSForSentinelMode));
    const state = new ClientState(sentinel ? `sentinel:${String(options.name)}` : ioredisKey(options), true, tls);
    let client: C | undefined; // made below; its strategy runs only after
    const guarded: IoredisOptions = {
      ...options,
      connectTimeout: this.#own(state, options.connectTimeout, 'connectTimeout'),
      retryStrategy: (times: number) => {
        const cause = state.lastError;
        state.lastError = undefined;
        const gated = state.gated;
        state.gated = false;
        const dialled = state.permit !== undefined; // a dial of its own just ended (#next settles it)
        const own = typeof options.retryStrategy === 'function';
        // ioredis counts each retry toward `maxRetriesPerRequest` and fails its offline queue each
        // time the count lands on a multiple of it + 1. The count here is its plain self's
        // (`state.count`, with `dueAt`: when that one's next retry comes), whatever the retries
        // were here (a dial of its own, a refusal at the gate while another client dialled, a
        // breaker window of seconds): so a queued command fails when plain's would, and the
        // client's own dials wait no less than plain's. History (outside reviews): at the
        // breaker's pace 20 retries went in ~4 s where plain's take ~10.5 s (queued commands
        // failed that plain kept); refusals never counted held a queue for the whole outage once a
        // guard's clients dialled in rounds (`maxRetriesPerRequest: 1`, 10 clients: 7.2 s at p90
        // of an 8 s outage, plain 1.2 s); counted one by one (taking one off where it landed on a
        // multiple), they ran ahead of plain's and failed commands plain served. A refusal waits
        // the breaker's pace, so refused clients are back soon after their node; a dial of its own
        // waits until its plain self's next one.
        let floor = 0;
        if (!own) {
          const now = this.#rounds.now();
          const due = state.dueAt;
          let before = state.count;
          if (due === undefined || (!gated && !dialled)) {
            // Its connection was lost, or its first connect failed: its plain self's schedule starts.
            before = times - 1;
            state.count = times;
            state.dueAt = now + ownDefault(times);
          } else if (gated ? now >= due : state.dialAt >= due - TIMER_SLACK) {
            // Its plain self's next retry has come: counted, and every one after it that would have
            // come by now too (a retry after a breaker window stands for those). The schedule goes
            // on from the due time, not from this retry: a refusal comes up to a breaker window
            // late, a dial may begin late (a round, a window), and counted from each, the
            // lateness added up (3 ioredis 6 clients back 2.8-4.9 s after a ~10 s outage, plain
            // 1.8-2.5 s). A dial of its own counts its own duration, as plain's does.
            let count = before + 1;
            let next = (gated ? due : now - Math.max(0, state.dialAt - due)) + ownDefault(count);
            while (next <= now && count - before < MAX_CATCH_UP) next += ownDefault(++count);
            state.count = count;
            state.dueAt = next;
          }
          setCount(client, before, state.count);
          // To the microsecond: `now + d - now` is not `d` in floating point once the clock is
          // large (a class default of 4 000 ms came back 3 999.999999999998: CI).
          if (!gated) floor = Math.max(0, Math.round((state.dueAt! - now) * 1_000) / 1_000);
        }
        const delay = Math.max(this.#next(state, times, cause, floor), floor);
        // The client's own strategy still decides whether to go on, and may ask for a longer wait.
        // ioredis alone reconnects only through a function: any other value given (null, false,
        // 0) ends the client at its first close (was: only null did; false and 0 reconnected).
        if (typeof options.retryStrategy !== 'function') return options.retryStrategy === undefined ? delay : null;
        const theirs: unknown = (options.retryStrategy as (t: number) => unknown)(times);
        return strategyAnswer(theirs, delay);
      },
      Connector: sentinel ? this.#gatedSentinelConnector(Base, state) : this.#gatedConnector(Base, state),
    };
    client = new Client(guarded) as C; // `Client`: the same class, typed for one options object
    // ioredis tells its own SentinelConnector its client (for its 'failoverSubscribed' and
    // 'sentinelReconnecting' events), not a Connector given in the options.
    const connector = (client as unknown as { connector?: { emitter?: unknown } }).connector;
    if (sentinel && connector !== undefined && connector.emitter == null) connector.emitter = client;
    this.#watch(client, state, true);
    // ioredis builds a duplicate from this client's options, as `{ ...options, ...override }`.
    return guardedDuplicates(client, (override) => this.ioredis(Redis, { ...options, ...override }));
  }

  /**
   * Options for an ioredis `Cluster` (v5) whose dials to every node ask the breaker first, keyed by
   * that node's address: `new Cluster(nodes, guard.ioredisCluster(Redis, { redisOptions }))`.
   * A dead node's slots fail at once (`HostUnavailableError`, no packet) while it is open; the other
   * nodes keep serving. Each node connection reports its own dials: the node's first byte is a
   * success, an error or a close before that a failure, and a connection that received nothing
   * `connectTimeout` after its dial began (a frozen or accept-and-hold node) is ended as a failed
   * dial (`ConnectTimeoutError`, phase 'handshake'). ioredis cluster nodes do not redial by
   * themselves (the cluster refreshes its slots instead), so there is no strategy to replace; but
   * each cluster dials a dead node anew for each batch of commands its slots send there, so those
   * dials go in the node's shared redial rounds (with every other client of that address on this
   * breaker): 5 Clusters reading a killed node for 1.5 s made ~106 dials to it, guarded 5-7.
   *
   * @param Redis - ioredis's `Redis` class (its default connector is the base of the gate).
   */
  ioredisCluster<O extends object>(Redis: new (options: IoredisOptions) => EventClient, clusterOptions?: O): O {
    return ioredisCluster(this.#internals, Redis, clusterOptions);
  }

  /**
   * A node-redis cluster (v4/v5, `createCluster`) whose dials to every node ask the breaker first,
   * keyed by that node's address: `guard.nodeRedisCluster(createCluster, { rootNodes })`. A dead
   * node's commands fail at once (`HostUnavailableError`, no packet) while it is open, and its
   * client waits out the window before redialling; the other nodes keep serving. Set
   * `defaults.disableOfflineQueue` if commands for a dead node should fail rather than wait.
   * Every node client's redials go in the node's shared redial rounds (with every other client of
   * that address on this breaker): 5 clusters, a killed node, 1.5 s: ~30 dials to it, guarded 4-6.
   * Each dial is reported from its socket (the node's first byte is a success; nothing received
   * `connectTimeout` after the dial began is a failed dial, the socket ended with a
   * `ConnectTimeoutError`, phase 'handshake'), since the cluster says
   * 'node-ready' only once per node client: a node back after a restart was otherwise never
   * reported, its round held until its lead's bound (5 clusters reading again: 4.6 s to over 10 s,
   * now 2.1-2.6 s, unguarded ~2 s).
   *
   * Node addresses are given to Node as names under `.invalid` that only the guard's `lookup`
   * resolves (it carries the port, which a lookup is not told), so TLS clusters, whose names must
   * match certificates, are not supported here.
   */
  nodeRedisCluster<O, C extends EventClient>(createCluster: (options: O) => C, clusterOptions: O): C {
    return nodeRedisCluster(this.#internals, createCluster, clusterOptions);
  }

  /**
   * When to redial a node: after its open window (jittered), soon while a probe is out, else at
   * its next shared round (`rounds`: the client's round key), else a backoff of the client's own.
   */
  #delayFor(key: string | undefined, attempt: number, rounds?: string, transport?: Transport, floor = 0): number {
    const backoff = Math.floor(this.#random() * Math.min(this.#maxBackoff, FIRST_ROUND_CAP * 2 ** Math.min(attempt, 16)));
    const snapshot = key === undefined ? undefined : this.breaker.state(key, undefined, transport);
    const round = rounds === undefined ? undefined : this.#rounds.delay(rounds);
    // The floor (the client's own default pace) holds unless the rounds have failed a dial: they
    // pace the node's dials then, one a round for the process, and a client failed at the gate
    // between rounds has dialled nothing. Counted as a retry by node-redis, each such failure
    // doubled its floor: guarded node-redis was back ~430 ms after a 300 ms restart, its
    // unguarded self 84-217 (an outside review). A node whose every dial is answered (a wrong
    // password) only loses connections: the floor still holds there.
    if (snapshot === undefined || snapshot.retryAfter === 0) {
      if (round !== undefined && this.#rounds.failing(rounds!)) return Math.ceil(round);
      return Math.max(round === undefined ? backoff : Math.ceil(round), floor);
    }
    // Never past OPEN_POLL: an isolation until released has no end (Infinity), and a client told
    // to wait that long was told 1 ms by Node's timers, so it spun on refusals; a long window of
    // the user's own is asked about again now and then, at no cost but one refusal.
    if (snapshot.state === 'open') return Math.min(OPEN_POLL, Math.ceil(snapshot.retryAfter * (1 + 0.1 * this.#random())));
    return Math.min(snapshot.retryAfter, Math.max(50, backoff));
  }

  /**
   * Reports the client's dials: 'ready' is a success. With `keepErrors` (ioredis, whose
   * retryStrategy is not told why), errors are kept for the strategy; being a listener must not
   * change what the user sees, so with no listener of their own ioredis's own "Unhandled error
   * event" line is still printed. node-redis gets no listener: one would have silenced the throw
   * it makes when nobody listens.
   */
  #watch(client: EventClient, state: ClientState, keepErrors: boolean): void {
    client.on('ready', () => {
      state.lastError = undefined;
      this.#succeeded(state);
    });
    if (!keepErrors) return;
    const listening = client as EventClient & { listenerCount?: (event: string) => number };
    const onError = (err: unknown): void => {
      state.lastError = err;
      if (listening.listenerCount?.('error') === 1) console.error('[ioredis] Unhandled error event:', err instanceof Error ? err.stack : err);
    };
    client.on('error', onError);
  }

  /**
   * For a single-node client's dial about to start: its turn in the node's shared rounds (see
   * `redial.ts`: it may wait for the round in flight, or fail at once between rounds), then the
   * breaker. Undefined lets the dial go (its permit kept); an error fails it with no I/O.
   * `wanted`, asked after a wait, says whether the client still wants the dial (not closed meanwhile).
   */
  #gate(state: ClientState, wanted?: () => boolean): RoundOutcome | Promise<RoundOutcome> {
    this.#settle(state, new Error('a new dial started before the last one was reported'));
    const turn = this.#rounds.turn(state.roundKey, state, state.policy ?? this.#policy);
    if (turn === undefined) return this.#admit(state);
    if (turn instanceof Error) return turn;
    return turn.then((outcome) => {
      if (outcome !== undefined) return outcome;
      if (wanted !== undefined && !wanted()) return new Error('Connection is closed.');
      return this.#admit(state);
    });
  }

  /** Asks the breaker for the dial about to start; a refusal is returned, a permit kept. */
  #admit(state: ClientState): HostUnavailableError | undefined {
    this.#settle(state, new Error('a new dial started before the last one was reported'));
    const answer = this.breaker.tryAdmit(state.key, undefined, state.transport);
    if (answer instanceof HostUnavailableError) {
      if (state.rounds) this.#rounds.refused(state.roundKey, state, answer);
      return answer;
    }
    state.socket = undefined;
    state.dialAt = this.#rounds.now();
    state.permit = reportingPermit(answer, () => this.#rounds.now(), () => dialPhase(state.socket));
    return undefined;
  }

  /** The dial in flight succeeded: reported, and the node's rounds end (its waiters dial). */
  #succeeded(state: ClientState): void {
    state.permit?.succeeded();
    state.permit = undefined;
    state.socket = undefined;
    if (state.rounds) this.#rounds.succeeded(state.roundKey);
  }

  /**
   * The client disconnects with a dial in flight. ioredis also disconnects itself after the node
   * answered (a wrong password, a failed ready check: `recoverFromFatalError`): such a dial is a
   * success, as the node replied (rule 1); only a dial nothing answered is the client's own
   * cancellation, abandoned (rule 2).
   */
  #givenUp(state: ClientState): void {
    if ((state.socket?.bytesRead ?? 0) > 0 || serverReplied(state.lastError)) this.#settle(state, state.lastError);
    else this.#abandon(state);
  }

  #abandon(state: ClientState): void {
    const permit = state.permit;
    state.permit = undefined;
    if (permit === undefined) return;
    permit.abandoned(); // before the socket is forgotten: the report reads its phase
    state.socket = undefined;
    if (state.rounds) this.#rounds.released(state.roundKey, state);
  }

  /**
   * The dial in flight ended without 'ready': failed, unless the server answered (a reply, any
   * byte on the dial's socket, a certificate it presented, an alert it sent) or the failure was this client's own (its TLS
   * configuration refused before the node said anything, this process out of sockets): one
   * client's wrong CA must never get the node refused for every client (DESIGN rule 1).
   */
  #settle(state: ClientState, cause: unknown): void {
    const permit = state.permit;
    state.permit = undefined;
    if (permit === undefined) return;
    // Any byte the node sent on the dial's socket (a reply before it closed: `-ERR max number of
    // clients reached`, a protocol error) proves it alive, as for every other dial (`connect.ts`).
    // A TLS socket counts only application bytes: a handshake alone (a terminator in front of a
    // dead node) is not an answer.
    const answered = (state.socket?.bytesRead ?? 0) > 0;
    const outcome = serverReplied(cause) ? 'succeeded' : dialFailureOutcome(cause, answered);
    // The permit first, the socket forgotten after: the report reads the dial's phase from it.
    if (outcome === 'succeeded') permit.succeeded();
    else if (outcome === 'abandoned') permit.abandoned();
    else (permit.failed as (error?: unknown) => void)(cause);
    state.socket = undefined;
    if (outcome === 'succeeded') {
      if (state.rounds) this.#rounds.succeeded(state.roundKey);
    } else if (outcome === 'abandoned') {
      if (state.rounds) this.#rounds.released(state.roundKey, state);
    } else {
      if (state.rounds) this.#rounds.failed(state.roundKey, state, cause, state.dialAt, state.policy ?? this.#policy);
    }
  }

  /** A lookup that asks the breaker first, then resolves (an IP address: to itself). */
  #gatedLookup(state: ClientState, ip: string | undefined, lookup: net.LookupFunction | undefined, open: () => boolean): net.LookupFunction {
    const resolve = resolverOf(lookup);
    return ((hostname: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void) => {
      const go = (refusal: RoundOutcome): void => {
        if (refusal !== undefined) {
          process.nextTick(cb, refusal);
          return;
        }
        answerLookup(resolve, ip ?? hostname, opts, cb);
      };
      // node-redis arms its connect timeout (ours) as this lookup starts: a wait that outlives it
      // finds the socket destroyed, and must not take a permit no dial will report.
      const askedAt = this.#rounds.now();
      const socket = takeConnectingSocket();
      const gate = this.#gate(state, () => this.#rounds.now() - askedAt < this.#timeoutOf(state) && open());
      const bounded = (refusal: RoundOutcome): void => {
        // node-redis's handshake has no bound of its own: the guard's, from when the dial began.
        if (refusal === undefined && socket !== undefined) {
          state.socket = socket;
          this.#boundHandshake(state, state.permit, socket, true);
        }
        go(refusal);
      };
      if (gate instanceof Promise) void gate.then(bounded);
      else bounded(gate);
    }) as net.LookupFunction;
  }

  /** ioredis's connector (the given one, or its standalone one), asking the breaker before each dial. */
  #gatedConnector(Base: ConnectorClass, state: ClientState): ConnectorClass {
    const guard = this;
    return class GuardedConnector extends Base {
      override connect(emitter: unknown): Promise<unknown> {
        const go = (refusal: RoundOutcome): Promise<unknown> => {
          if (refusal === undefined) {
            this.firstError = undefined;
            const permit = state.permit;
            return super.connect(emitter).then((stream) => {
              if (permit !== undefined && state.permit === permit) state.socket = stream as net.Socket;
              guard.#boundHandshake(state, permit, stream);
              return stream;
            });
          }
          // A stream already dead with its first error: ioredis reports the error and runs its
          // retryStrategy, as for a refused connect (a rejected connect would end the client).
          state.gated = true;
          const dead = new net.Socket();
          dead.destroy();
          this.firstError = refusal;
          // Not kept as the connector's stream: disconnect() would arm a timer to end it.
          this.stream = undefined;
          return Promise.resolve(dead);
        };
        // While it waits for a round in flight, a disconnect() clears `connecting` (as it does for
        // a connect in progress): the client then must not dial.
        this.connecting = true;
        const gate = guard.#gate(state, () => this.connecting === true);
        return gate instanceof Promise ? gate.then(go) : go(gate);
      }

      /**
       * The client's `disconnect()` gives its dial in flight up: abandoned, which frees the round
       * it leads at once. ioredis runs no retryStrategy after a manual disconnect, so unsaid, the
       * round held every other client of the node until its lead ran out (connectTimeout + 1 s).
       */
      override disconnect(): void {
        guard.#givenUp(state);
        super.disconnect();
      }
    };
  }

  /**
   * ioredis's `SentinelConnector`, asking the breaker before each dial to the node: the sentinels
   * are asked first (their own short-lived clients, not gated), and the address they resolve is
   * the dial's key (a failover moves the client to the new master's key). A refusal is handed to
   * the connector as that address under a name only a lookup failing with the refusal resolves:
   * its connect fails at once, no packet sent, and ioredis runs its retryStrategy as for any
   * failed connect.
   */
  #gatedSentinelConnector(Base: ConnectorClass, state: ClientState): ConnectorClass {
    const guard = this;
    return class GuardedSentinelConnector extends Base {
      override async resolve(endpoint: unknown): Promise<{ host: string; port: number } | null | undefined> {
        const address = await super.resolve!(endpoint);
        if (address == null || !this.connecting) return address;
        guard.#retarget(state, hostKey(address.host, address.port));
        let gate = guard.#gate(state, () => this.connecting === true);
        if (gate instanceof Promise) gate = await gate;
        if (gate === undefined) return address;
        state.gated = true;
        const refusal = gate;
        const lookup = (_name: string, _opts: unknown, cb: (err: Error) => void): void => process.nextTick(cb, refusal);
        return { ...address, host: 'refused.dialguard.invalid', lookup } as { host: string; port: number };
      }

      override connect(emitter: unknown): Promise<unknown> {
        return super.connect(emitter).then(
          (stream) => {
            if (state.permit !== undefined) state.socket = stream as net.Socket;
            guard.#boundHandshake(state, state.permit, stream);
            return stream;
          },
          (err: unknown) => {
            // Closed after the dial was admitted, before it began: nobody's failure.
            guard.#abandon(state);
            throw err;
          },
        );
      }

      /** As the standalone connector's: the client gives its dial in flight up. */
      override disconnect(): void {
        guard.#givenUp(state);
        super.disconnect();
      }
    };
  }

  /**
   * A Sentinel client's next dial goes to `key`: the dial before it (to the old address) is
   * settled first, so that its outcome is filed under the address it went to.
   */
  #retarget(state: ClientState, key: string): void {
    if (state.key === key) return;
    this.#settle(state, new Error('a new dial started before the last one was reported'));
    state.key = key;
  }

  /**
   * The bound on one dial of `state`'s client: `given`, its own `connectTimeout`, when it set one
   * (checked), else the guard's. Before, the guard's replaced the client's silently: a client
   * patient for 5 s with a node busy 3 s failed at 2 s where the plain client was served.
   */
  #own(state: ClientState, given: unknown, name: string): number {
    // 0 is both clients' "no timeout": the guard's bound then, as before a client's own counted
    // (rule 6: every dial is bounded). null is unset to both clients (a config loader's blank):
    // it was a TypeError here where the plain clients connected (an outside review).
    if (given === undefined || given === null || given === 0) return this.#timeout;
    const timeout = checkDuration(name, given, 1);
    if (timeout !== this.#timeout) state.timeout = timeout;
    // A round's leader may take its handshake's bound (the longer of the two, see
    // #boundHandshake): the round waits that long for it, plus a second.
    if (timeout > this.#timeout) state.policy = { ...this.#policy, leadFor: Math.min(timeout + 1_000, MAX_DURATION) };
    return timeout;
  }

  #timeoutOf(state: ClientState): number {
    return state.timeout > 0 ? state.timeout : this.#timeout;
  }

  /**
   * Bounds the handshake of the dial `permit` stands for on `socket` (see `handshake.ts`): if
   * nothing was received `connectTimeout` after the dial began and the dial is still unreported,
   * the socket is destroyed with a `ConnectTimeoutError` (phase 'handshake'), a failed dial.
   *
   * `pipelined`: the client writes its queued commands behind the handshake without waiting for
   * its replies (node-redis does; ioredis waits for its ready check). Those commands were sent,
   * and a busy node (a long script, `DEBUG SLEEP`) runs them once free, so they fail with a
   * `TransportClosedError` (the timeout its cause): maybe sent, never resent as unsent. As a
   * `ConnectTimeoutError` ("nothing sent"), `retry()` ran a non-idempotent INCR twice.
   */
  #boundHandshake(state: ClientState, permit: DialPermit | undefined, stream: unknown, pipelined = false): void {
    if (permit === undefined || stream === undefined) return;
    // The client's own bound ends at its TCP (and TLS) connect: the guard's timer fires there
    // too, so a dial still connecting fails with the guard's typed error. What follows, neither
    // client bounds, so the handshake gets the guard's number unless the client's is longer. A
    // client's 1 ms (a slip for seconds) ended every handshake that had not heard its PONG 1 ms
    // after the dial began: 5-7 failed dials against a healthy node, plain 1 (an outside review).
    const own = this.#timeoutOf(state);
    const whole = Math.max(own, this.#timeout);
    const socket = stream as net.Socket;
    boundHandshake(
      socket,
      own - (this.#rounds.now() - state.dialAt),
      () => state.permit === permit,
      () => {
        // Still connecting: the SYN went unanswered, so nothing was sent (commands a client
        // queued count in `bytesWritten`, but never left). Was 'handshake', maybe sent (review).
        if (socket.connecting) return new ConnectTimeoutError(state.key, own, 'tcp');
        // Connected, its TLS handshake unfinished: nothing of the client's was sent either.
        if (tlsPending(socket)) return new ConnectTimeoutError(state.key, own, 'tls');
        const more = whole - (this.#rounds.now() - state.dialAt);
        if (more > 0) return more;
        const error = new ConnectTimeoutError(state.key, whole, 'handshake');
        return pipelined ? new TransportClosedError(state.key, `connection (its handshake unanswered after ${whole} ms; commands sent behind it may run)`, { cause: error }) : error;
      },
    );
  }

  /**
   * The strategy: settle the dial that just ended, then say when to dial next. While the node is
   * open, when its window ends (a jittered bit past it, so a fleet does not wake together); while
   * a probe is out, soon (a refused dial costs no I/O, and the probe may bring the node back);
   * otherwise a short jittered backoff.
   */
  #next(state: ClientState, attempt: number, cause: unknown, floor = 0): number {
    const dialled = state.permit !== undefined;
    this.#settle(state, cause);
    // No dial of its own ended: a lost connection (or a dial failed at the gate); from now on the
    // node's redials go in rounds (a no-op if they already do).
    if (!dialled) this.#rounds.lost(state.roundKey, cause);
    return this.#delayFor(state.key, attempt, state.roundKey, state.transport, floor);
  }
}

/** Retries a single retry may stand for (its plain self's during a long wait): bounds the catch-up. */
const MAX_CATCH_UP = 1_000;

/**
 * Sets ioredis's count (`retryAttempts`, which it raised before asking the strategy and then
 * checks: a multiple of `maxRetriesPerRequest` + 1 fails its offline queue) for a plain count that
 * went from `before` to `after` with this retry. On a multiple it passed (the queue fails now, as
 * plain's did on reaching it); otherwise off every multiple, so a count that stays (a refusal
 * before its plain self's next retry) never fails the queue a second time. `times` as ioredis
 * gives it is unused after this: the guard keeps the plain count. A client that keeps no such
 * count (another major) is left as it is.
 */
function setCount(client: unknown, before: number, after: number): void {
  const c = client as { retryAttempts?: unknown; options?: { maxRetriesPerRequest?: unknown } } | undefined;
  if (c === undefined || typeof c.retryAttempts !== 'number') return;
  const max = c.options?.maxRetriesPerRequest;
  if (typeof max !== 'number' || max < 0) {
    c.retryAttempts = after;
    return;
  }
  const period = max + 1;
  const reached = Math.floor(after / period) * period; // the last multiple at or under `after`
  if (reached > before && reached > 0) c.retryAttempts = reached;
  else c.retryAttempts = after % period === 0 ? after + 1 : after;
}

/**
 * How much sooner than its due time a client's own dial may begin and still be the retry due then,
 * ms: ioredis's timer fires up to a millisecond before the guard's clock says it should (a dial
 * 0.3 ms early was taken for an extra one, uncounted, and redialled at once).
 */
const TIMER_SLACK = 10;

/**
 * The pace ioredis would keep with no `retryStrategy` given: the class's own default
 * (`Redis.defaultOptions.retryStrategy`), which changed between majors. ioredis 5 waits
 * `min(times * 50, 2000)` ms; ioredis 6 doubles from 50 ms up to 5 s, plus up to 200 ms of
 * jitter. Copying v5's pace made a guarded ioredis 6 client redial a node that answered every
 * dial with WRONGPASS 19 times in 10 s where its plain self redialled 7 (an outside review).
 * Falls back to v5's pace for a class that says nothing usable.
 */
function ioredisDefaultStrategy(Redis: unknown): (times: number) => number {
  const own = (Redis as { defaultOptions?: { retryStrategy?: unknown } } | undefined)?.defaultOptions?.retryStrategy;
  const v5 = (times: number): number => Math.min(times * 50, 2_000);
  if (typeof own !== 'function') return v5;
  return (times) => {
    let answer: unknown;
    try {
      answer = (own as (t: number) => unknown)(times);
    } catch {
      return v5(times);
    }
    return typeof answer === 'number' && Number.isFinite(answer) && answer >= 0 ? answer : v5(times);
  };
}

/**
 * The stage a client's dial ended in, for its report: `tcp` while the socket is connecting, `tls`
 * while its TLS handshake runs (it said `tcp`: an outside review), then `tcp` until the client
 * wrote or read a byte on it, `handshake` after.
 */
function dialPhase(socket: { readonly bytesRead: number; readonly bytesWritten?: number; readonly connecting?: boolean } | undefined): 'tcp' | 'tls' | 'handshake' {
  if (socket === undefined || socket.connecting === true) return 'tcp'; // queued writes count in bytesWritten before they leave
  if (tlsPending(socket)) return 'tls';
  return socket.bytesRead > 0 || (socket.bytesWritten ?? 0) > 0 ? 'handshake' : 'tcp';
}

/**
 * Whether `socket` is a TLS socket whose handshake has not finished. Node's TLSSocket keeps that
 * in `_secureEstablished` (set at 'secureConnect', kept after close; `getProtocol()` names the
 * version before the handshake, so it cannot tell); else no Finished message yet, while open.
 */
function tlsPending(socket: unknown): boolean {
  const s = socket as { encrypted?: unknown; _secureEstablished?: unknown; getFinished?: () => unknown; destroyed?: boolean };
  if (s.encrypted !== true) return false;
  if (typeof s._secureEstablished === 'boolean') return !s._secureEstablished;
  return typeof s.getFinished === 'function' && s.destroyed !== true && s.getFinished() === undefined;
}
