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
 * connection that received nothing `connectTimeout` after its dial began is a failed dial,
 * `ConnectTimeoutError` phase 'handshake'), so the client redials in rounds; ioredis fails its
 * waiting commands after `maxRetriesPerRequest`, node-redis keeps them queued unless
 * `disableOfflineQueue`. Not covered: a cluster's node clients (their handshake stays unbounded),
 * and a connection that froze after 'ready' (not a dial: give a reply timeout, e.g. node-redis's
 * `socket.socketTimeout`).
 *
 * @module
 */
import dns from 'node:dns';
import net from 'node:net';
import { type PeerCertificate, checkServerIdentity as tlsCheck } from 'node:tls';
import { ConnectTimeoutError, HostUnavailableError } from '../../core/errors.js';
import { checkDuration, checkFunction, opt, show } from '../../core/validate.js';
import { sharedBreaker } from '../../guard/dial.js';
import { type DialPermit, HostBreaker } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { boundHandshake, takeConnectingSocket, watchConnectingSockets } from './handshake.js';
import { RedialRounds, type RoundOutcome, type RoundPolicy } from './redial.js';

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
   * Bound on one connect, ms, given to the client as its `connectTimeout`. Default 2 000: a cache
   * node on the same network connects in milliseconds, and a cache is worth less than a long wait
   * (node-redis's own default is 5 000, ioredis's 10 000).
   */
  connectTimeout?: number;
  /**
   * Longest spacing of a failing node's redial rounds while the breaker has not opened it, ms
   * (rounds are shared by the clients of that node of every guard on the same breaker: see
   * `redial.ts`; the spacing is equal jitter from 25-50 ms doubling up to this; the guard whose
   * dial failed spaces the next round). Default 2 000, as ioredis's own cap: once the
   * breaker opens, its window decides the wait instead.
   */
  maxBackoff?: number;
  /** Uniform [0, 1) source for the jitter. Default `Math.random`. */
  random?: () => number;
}

/**
 * Longest single wait the guard hands node-redis, ms. node-redis cannot cancel a reconnect wait:
 * a client destroyed during one keeps its timer (and the process) until it ends, so a 30 s open
 * window is waited out in waits of at most this, each ending in a refusal that costs no I/O.
 * node-redis's own strategy waits up to ~2.2 s.
 */
const NODE_REDIS_LONGEST_WAIT = 2_000;

/** What the guard needs of a client: node-redis and ioredis are both event emitters. */
export interface EventClient {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the clients' own listener type
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/** node-redis `createClient` options, the parts the guard reads and sets. */
export interface NodeRedisOptions {
  url?: string;
  socket?: Record<string, unknown> & { host?: string; port?: number; tls?: unknown; lookup?: unknown; connectTimeout?: number; reconnectStrategy?: unknown };
  [key: string]: unknown;
}

/** ioredis options, the parts the guard reads and sets. */
export interface IoredisOptions {
  host?: string;
  port?: number;
  connectTimeout?: number;
  retryStrategy?: unknown;
  Connector?: unknown;
  lazyConnect?: boolean;
  tls?: unknown;
  [key: string]: unknown;
}

/** One client's dial bookkeeping. */
class ClientState {
  permit: DialPermit | undefined;
  /** When the permitted dial began (the rounds' clock). */
  dialAt = 0;
  lastError: unknown;
  /**
   * @param key - the node's breaker key.
   * @param rounds - whether the client's redials go in the breaker's shared rounds (every client
   *   does: single-node clients and a cluster's node connections alike).
   */
  constructor(
    readonly key: string,
    readonly rounds = true,
  ) {}
}

/** Whether `err` is a reply the server sent (so the node is alive), for node-redis and ioredis. */
function serverReplied(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const name = err.constructor?.name;
  return name === 'ErrorReply' || name === 'ReplyError' || name === 'SimpleError' || name === 'BlobError';
}

/** ioredis's connector interface, as far as the guard uses it. */
interface IoredisConnector {
  firstError?: unknown;
  /** Set by connect(), cleared by disconnect(). */
  connecting?: boolean;
  stream?: unknown;
  connect(emitter: unknown): Promise<unknown>;
}
type ConnectorClass = new (options: unknown) => IoredisConnector;

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

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: RedisGuardOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    const breaker = opt(options.breaker, undefined) ?? sharedBreaker();
    if (!(breaker instanceof HostBreaker)) throw new TypeError(`breaker must be a HostBreaker, got ${show(breaker)}`);
    this.breaker = breaker;
    this.#timeout = checkDuration('connectTimeout', opt(options.connectTimeout, 2_000), 1);
    this.#maxBackoff = checkDuration('maxBackoff', opt(options.maxBackoff, 2_000));
    this.#random = checkFunction('random', opt(options.random, Math.random));
    this.#rounds = roundsFor(breaker);
    this.#policy = { maxBackoff: this.#maxBackoff, leadFor: this.#timeout + 1_000, random: this.#random };
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
    const { host, port } = nodeRedisTarget(options);
    const state = new ClientState(hostKey(host, port));
    const socket: NonNullable<NodeRedisOptions['socket']> = { ...(options.socket ?? {}) };
    const tls = socket.tls === true || (typeof options.url === 'string' && options.url.startsWith('rediss:'));
    const bare = host.startsWith('[') ? host.slice(1, -1) : host;
    const byIp = net.isIP(bare) !== 0;
    socket.host = byIp ? `${bare.replaceAll(':', '-')}.dialguard.invalid` : bare;
    socket.port = port;
    socket.lookup = this.#gatedLookup(state, byIp ? bare : undefined, socket.lookup as net.LookupFunction | undefined);
    if (byIp && tls) {
      // Node checks the certificate against `servername ?? host`: the gated name is not the
      // node's, so the check is handed the address the client asked for (Node sends no SNI for a
      // `host` alone, so the name never leaves the process).
      const check = (socket.checkServerIdentity as typeof tlsCheck | undefined) ?? tlsCheck;
      const identity = typeof socket.servername === 'string' ? socket.servername : bare;
      socket.checkServerIdentity = (_name: string, cert: PeerCertificate) => check(identity, cert);
    }
    socket.connectTimeout = this.#timeout;
    watchConnectingSockets();
    const own = socket.reconnectStrategy;
    let client: C | undefined;
    socket.reconnectStrategy = (retries: number, cause: unknown) => {
      // destroy() or close() during a dial: the caller's own cancellation, never a failed dial (rule 2).
      if ((client as { isOpen?: boolean } | undefined)?.isOpen === false) this.#abandon(state);
      const delay = Math.min(this.#next(state, retries, cause), NODE_REDIS_LONGEST_WAIT);
      // The client's own strategy still decides whether to go on, and may ask for a longer wait.
      if (own === undefined) return delay;
      const theirs: unknown = typeof own === 'function' ? (own as (r: number, c: unknown) => unknown)(retries, cause) : own;
      return typeof theirs === 'number' ? Math.max(theirs, delay) : theirs;
    };
    const guarded = { ...withoutUrl(options, socket), socket };
    client = createClient(guarded as O);
    this.#watch(client, state);
    return client;
  }

  /**
   * An ioredis client (v5) whose every dial asks the breaker first:
   * `guard.ioredis(Redis, { host: 'cache', port: 6379 })`. The gate is its `Connector`: a refusal
   * is a connect that failed at once, with no packet sent, and `retryStrategy` schedules the next.
   */
  ioredis<O, C extends EventClient>(Redis: new (options: O) => C, clientOptions?: O): C {
    const options = (clientOptions ?? {}) as IoredisOptions;
    const state = new ClientState(hostKey(options.host ?? 'localhost', options.port ?? 6379));
    const guarded: IoredisOptions = {
      ...options,
      connectTimeout: this.#timeout,
      retryStrategy: (times: number) => {
        const cause = state.lastError;
        state.lastError = undefined;
        const delay = this.#next(state, times, cause);
        // The client's own strategy still decides whether to go on, and may ask for a longer wait.
        if (typeof options.retryStrategy !== 'function') return options.retryStrategy === null ? null : delay;
        const theirs: unknown = (options.retryStrategy as (t: number) => unknown)(times);
        return typeof theirs === 'number' ? Math.max(theirs, delay) : theirs;
      },
      Connector: this.#gatedConnector(Redis as unknown as new (options: IoredisOptions) => EventClient, state, options.Connector as ConnectorClass | undefined),
    };
    const client = new Redis(guarded as O);
    this.#watch(client, state);
    return client;
  }

  /**
   * Options for an ioredis `Cluster` (v5) whose dials to every node ask the breaker first, keyed by
   * that node's address: `new Cluster(nodes, guard.ioredisCluster(Redis, { redisOptions }))`.
   * A dead node's slots fail at once (`HostUnavailableError`, no packet) while it is open; the other
   * nodes keep serving. Each node connection reports its own dials: TCP (or TLS) connected is a
   * success, an error or a close before that a failure. ioredis cluster nodes do not redial by
   * themselves (the cluster refreshes its slots instead), so there is no strategy to replace; but
   * each cluster dials a dead node anew for each batch of commands its slots send there, so those
   * dials go in the node's shared redial rounds (with every other client of that address on this
   * breaker): 5 Clusters reading a killed node for 1.5 s made ~106 dials to it, guarded 5-7.
   *
   * @param Redis - ioredis's `Redis` class (its default connector is the base of the gate).
   */
  ioredisCluster<O extends object>(Redis: new (options: IoredisOptions) => EventClient, clusterOptions?: O): O {
    const options = (clusterOptions ?? {}) as O & { redisOptions?: IoredisOptions };
    const redisOptions: IoredisOptions = { ...(options.redisOptions ?? {}) };
    const Base: ConnectorClass =
      (redisOptions.Connector as ConnectorClass | undefined) ??
      ((new Redis({ lazyConnect: true }) as unknown as { connector: IoredisConnector }).connector.constructor as ConnectorClass);
    const guard = this;
    class GuardedNodeConnector extends Base {
      /** This node connection's dials, in the node's shared redial rounds. */
      #state: ClientState | undefined;
      override connect(emitter: unknown): Promise<unknown> {
        const target = (this as unknown as { options: IoredisOptions }).options;
        const state = (this.#state ??= new ClientState(hostKey(target.host ?? 'localhost', target.port ?? 6379)));
        // Each Cluster dials a dead node anew for every batch of commands its slots send there:
        // in rounds, every connection of every cluster in the process makes one dial per round.
        this.connecting = true;
        const gate = guard.#gate(state, () => this.connecting === true);
        return gate instanceof Promise ? gate.then((refusal) => this.#dial(emitter, state, target, refusal)) : this.#dial(emitter, state, target, gate);
      }

      #dial(emitter: unknown, state: ClientState, target: IoredisOptions, refusal: RoundOutcome): Promise<unknown> {
        if (refusal !== undefined) {
          const dead = new net.Socket();
          dead.destroy();
          this.firstError = refusal;
          this.stream = undefined; // see the single-node connector
          return Promise.resolve(dead);
        }
        this.firstError = undefined;
        return super.connect(emitter).then((stream) => {
          const socket = stream as net.Socket;
          const event = target.tls ? 'secureConnect' : 'connect';
          const done = (err?: unknown): void => {
            socket.off(event, onConnect);
            socket.off('error', done);
            socket.off('close', onClose);
            if (err === undefined) guard.#succeeded(state);
            else guard.#settle(state, err);
          };
          const onConnect = (): void => {
            done();
            // Once connected, a close is a lost connection (the clusters' node connections do not
            // redial, each cluster dials anew): from then on the node's redials go in rounds, and
            // the first redials of every cluster are one round, not one dial per cluster. A close
            // the client asked for costs nothing: the next dial leads a round, and its success
            // forgets the node.
            socket.once('close', () => guard.#rounds.lost(state.key, new Error(`the connection to ${state.key} was lost`)));
          };
          const onClose = (): void => done(new Error('the connection closed before it connected'));
          if (socket.destroyed) done(this.firstError ?? new Error('the connection closed before it connected'));
          else {
            socket.once(event, onConnect);
            socket.once('error', done);
            socket.once('close', onClose);
          }
          return stream;
        });
      }
    }
    redisOptions.Connector = GuardedNodeConnector;
    redisOptions.connectTimeout = this.#timeout;
    return { ...options, redisOptions };
  }

  /**
   * A node-redis cluster (v4/v5, `createCluster`) whose dials to every node ask the breaker first,
   * keyed by that node's address: `guard.nodeRedisCluster(createCluster, { rootNodes })`. A dead
   * node's commands fail at once (`HostUnavailableError`, no packet) while it is open, and its
   * client waits out the window before redialling; the other nodes keep serving. Set
   * `defaults.disableOfflineQueue` if commands for a dead node should fail rather than wait.
   * Every node client's redials go in the node's shared redial rounds (with every other client of
   * that address on this breaker): 5 clusters, a killed node, 1.5 s: ~30 dials to it, guarded 4-6.
   * Each dial is reported from its socket (TCP connected is a success), since the cluster says
   * 'node-ready' only once per node client: a node back after a restart was otherwise never
   * reported, its round held until its lead's bound (5 clusters reading again: 4.6 s to over 10 s,
   * now 2.1-2.6 s, unguarded ~2 s).
   *
   * Node addresses are given to Node as names under `.invalid` that only the guard's `lookup`
   * resolves (it carries the port, which a lookup is not told), so TLS clusters, whose names must
   * match certificates, are not supported here.
   */
  nodeRedisCluster<O, C extends EventClient>(createCluster: (options: O) => C, clusterOptions: O): C {
    const options = clusterOptions as unknown as ClusterShape;
    const pending = new Map<string, ClientState[]>();
    const mapAddress = options.nodeAddressMap;
    const defaults = { ...(options.defaults ?? {}) };
    const socket: Record<string, unknown> = { ...(defaults.socket ?? {}) };
    if (socket.tls !== undefined && socket.tls !== false) throw new TypeError('dialguard: nodeRedisCluster does not support TLS clusters');
    const own = socket.reconnectStrategy;
    socket.connectTimeout = this.#timeout;
    socket.lookup = this.#clusterLookup(pending, socket.lookup as net.LookupFunction | undefined);
    watchConnectingSockets();
    socket.reconnectStrategy = (retries: number, cause: unknown) => {
      const delay = Math.min(this.#delayFor(cause instanceof HostUnavailableError ? cause.host : undefined, retries), NODE_REDIS_LONGEST_WAIT);
      if (own === undefined) return delay;
      const theirs: unknown = typeof own === 'function' ? (own as (r: number, c: unknown) => unknown)(retries, cause) : own;
      return typeof theirs === 'number' ? Math.max(theirs, delay) : theirs;
    };
    defaults.socket = socket;
    const rootNodes = (options.rootNodes ?? []).map((root) => {
      const { host, port } = nodeRedisTarget(root);
      const socket = { ...(root.socket ?? {}) };
      return { ...withoutUrl(root, socket), socket: { ...socket, host: gateName(host, port), port } };
    });
    const nodeAddressMap = (address: string): { host: string; port: number } => {
      const mapped = typeof mapAddress === 'function' ? mapAddress(address) : mapAddress?.[address];
      const at = address.lastIndexOf(':');
      const host = mapped?.host ?? address.slice(0, at);
      const port = mapped?.port ?? Number(address.slice(at + 1));
      return { ...(mapped ?? {}), host: gateName(host, port), port };
    };
    const cluster = createCluster({ ...options, rootNodes, defaults, nodeAddressMap } as unknown as O);
    const settle = (info: unknown, err?: unknown): void => {
      const target = ungateName(String((info as { host?: unknown } | undefined)?.host ?? ''));
      if (target === undefined) return;
      const state = pending.get(target.key)?.shift();
      if (state === undefined) {
        // An error with no dial of the node's in flight: a lost connection (or a dial failed at
        // the gate). From now on the node's redials go in rounds, so the first redials of every
        // cluster's node client are one round (a no-op if they already are).
        if (err !== undefined) this.#rounds.lost(target.key, err);
        return;
      }
      if (err === undefined) this.#succeeded(state);
      else this.#settle(state, err);
    };
    cluster.on('node-ready', (info: unknown) => settle(info));
    cluster.on('node-error', (err: unknown, info: unknown) => settle(info, err ?? new Error('node error')));
    return cluster;
  }

  /**
   * The cluster's lookup: decodes a gated name, takes the node's turn in its shared redial rounds
   * and asks the breaker (as a single-node client's lookup), then resolves the real host. Each
   * lookup is its own dial in the rounds (a lookup does not say which node client asked); its
   * outcome comes from its socket ({@link takeConnectingSocket}), or failing that from the
   * cluster's node events, in order per node (`pending`).
   */
  #clusterLookup(pending: Map<string, ClientState[]>, lookup: net.LookupFunction | undefined): net.LookupFunction {
    const resolve = (lookup ?? dns.lookup) as (h: string, o: dns.LookupOptions, c: (...a: unknown[]) => void) => void;
    return ((hostname: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void) => {
      const target = ungateName(hostname);
      if (target === undefined) {
        resolve(hostname, opts, cb);
        return;
      }
      const state = new ClientState(target.key);
      const socket = takeConnectingSocket();
      const go = (refusal: RoundOutcome): void => {
        if (refusal !== undefined) {
          process.nextTick(cb, refusal);
          return;
        }
        if (socket !== undefined) this.#watchNodeDial(state, socket);
        else {
          const list = pending.get(target.key) ?? [];
          list.push(state);
          pending.set(target.key, list);
        }
        const family = net.isIP(target.host);
        if (family === 0) resolve(target.host, opts, cb);
        else if (opts?.all === true) process.nextTick(cb, null, [{ address: target.host, family }]);
        else process.nextTick(cb, null, target.host, family);
      };
      // As for a single-node client: node-redis's connect timeout runs during a wait.
      const askedAt = this.#rounds.now();
      const gate = this.#gate(state, () => this.#rounds.now() - askedAt < this.#timeout);
      if (gate instanceof Promise) void gate.then(go);
      else go(gate);
    }) as net.LookupFunction;
  }

  /**
   * A cluster node client's dial, reported from its socket (node-redis's cluster says 'node-ready'
   * only for a node client's first connection, so a redial that succeeded would go unreported):
   * TCP connected is a success, an error before that a failure, a close with no error (the
   * cluster destroyed) abandoned. Once connected, a close is a lost connection: the node's
   * redials go in rounds from then on.
   */
  #watchNodeDial(state: ClientState, socket: net.Socket): void {
    const done = (outcome: 'connected' | 'abandoned' | Error): void => {
      socket.off('connect', onConnect);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (outcome === 'connected') this.#succeeded(state);
      else if (outcome === 'abandoned') this.#abandon(state);
      else this.#settle(state, outcome);
    };
    const onConnect = (): void => {
      done('connected');
      socket.once('close', () => this.#rounds.lost(state.key, new Error(`the connection to ${state.key} was lost`)));
    };
    const onError = (err: Error): void => done(err);
    const onClose = (): void => done('abandoned');
    socket.once('connect', onConnect);
    socket.once('error', onError);
    socket.once('close', onClose);
  }

  /**
   * When to redial a node: after its open window (jittered), soon while a probe is out, else at
   * its next shared round (`rounds`), else a backoff of the client's own.
   */
  #delayFor(key: string | undefined, attempt: number, rounds = false): number {
    const backoff = Math.floor(this.#random() * Math.min(this.#maxBackoff, 50 * 2 ** Math.min(attempt, 16)));
    const snapshot = key === undefined ? undefined : this.breaker.state(key);
    const round = rounds && key !== undefined ? this.#rounds.delay(key) : undefined;
    if (snapshot === undefined || snapshot.retryAfter === 0) return round === undefined ? backoff : Math.ceil(round);
    if (snapshot.state === 'open') return Math.ceil(snapshot.retryAfter * (1 + 0.1 * this.#random()));
    return Math.min(snapshot.retryAfter, Math.max(50, backoff));
  }

  /** Reports the client's dials: 'ready' is a success; errors are kept for the strategy. */
  #watch(client: EventClient, state: ClientState): void {
    client.on('ready', () => {
      state.lastError = undefined;
      this.#succeeded(state);
    });
    client.on('error', (err: unknown) => {
      state.lastError = err;
    });
  }

  /**
   * For a single-node client's dial about to start: its turn in the node's shared rounds (see
   * `redial.ts`: it may wait for the round in flight, or fail at once between rounds), then the
   * breaker. Undefined lets the dial go (its permit kept); an error fails it with no I/O.
   * `wanted`, asked after a wait, says whether the client still wants the dial (not closed meanwhile).
   */
  #gate(state: ClientState, wanted?: () => boolean): RoundOutcome | Promise<RoundOutcome> {
    this.#settle(state, new Error('a new dial started before the last one was reported'));
    const turn = this.#rounds.turn(state.key, state, this.#policy);
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
    const answer = this.breaker.tryAdmit(state.key);
    if (answer instanceof HostUnavailableError) {
      if (state.rounds) this.#rounds.refused(state.key, state, answer);
      return answer;
    }
    state.permit = answer;
    state.dialAt = this.#rounds.now();
    return undefined;
  }

  /** The dial in flight succeeded: reported, and the node's rounds end (its waiters dial). */
  #succeeded(state: ClientState): void {
    state.permit?.succeeded();
    state.permit = undefined;
    if (state.rounds) this.#rounds.succeeded(state.key);
  }

  /** The client gave the dial in flight up: abandoned, and the clients waiting for it dial. */
  #abandon(state: ClientState): void {
    const permit = state.permit;
    state.permit = undefined;
    if (permit === undefined) return;
    permit.abandoned();
    if (state.rounds) this.#rounds.released(state.key, state);
  }

  /** The dial in flight ended without 'ready': failed, unless the server answered. */
  #settle(state: ClientState, cause: unknown): void {
    const permit = state.permit;
    state.permit = undefined;
    if (permit === undefined) return;
    if (serverReplied(cause)) {
      permit.succeeded();
      if (state.rounds) this.#rounds.succeeded(state.key);
    } else {
      (permit.failed as (error?: unknown) => void)(cause);
      if (state.rounds) this.#rounds.failed(state.key, state, cause, state.dialAt, this.#policy);
    }
  }

  /** A lookup that asks the breaker first, then resolves (an IP address: to itself). */
  #gatedLookup(state: ClientState, ip: string | undefined, lookup: net.LookupFunction | undefined): net.LookupFunction {
    const resolve = lookup ?? dns.lookup;
    return ((hostname: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void) => {
      const go = (refusal: RoundOutcome): void => {
        if (refusal !== undefined) {
          process.nextTick(cb, refusal);
          return;
        }
        if (ip === undefined) {
          (resolve as (h: string, o: dns.LookupOptions, c: (...a: unknown[]) => void) => void)(hostname, opts, cb);
          return;
        }
        const family = net.isIP(ip);
        if (opts?.all === true) process.nextTick(cb, null, [{ address: ip, family }]);
        else process.nextTick(cb, null, ip, family);
      };
      // node-redis arms its connect timeout (ours) as this lookup starts: a wait that outlives it
      // finds the socket destroyed, and must not take a permit no dial will report.
      const askedAt = this.#rounds.now();
      const socket = takeConnectingSocket();
      const gate = this.#gate(state, () => this.#rounds.now() - askedAt < this.#timeout);
      const bounded = (refusal: RoundOutcome): void => {
        // node-redis's handshake has no bound of its own: the guard's, from when the dial began.
        if (refusal === undefined && socket !== undefined) this.#boundHandshake(state, state.permit, socket);
        go(refusal);
      };
      if (gate instanceof Promise) void gate.then(bounded);
      else bounded(gate);
    }) as net.LookupFunction;
  }

  /** ioredis's connector (the given one, or its default), asking the breaker before each dial. */
  #gatedConnector(Redis: new (options: IoredisOptions) => EventClient, state: ClientState, given: ConnectorClass | undefined): ConnectorClass {
    // ioredis does not export its default connector: a lazy client (which never connects) shows it.
    const Base: ConnectorClass = given ?? ((new Redis({ lazyConnect: true }) as unknown as { connector: IoredisConnector }).connector.constructor as ConnectorClass);
    const guard = this;
    return class GuardedConnector extends Base {
      override connect(emitter: unknown): Promise<unknown> {
        const go = (refusal: RoundOutcome): Promise<unknown> => {
          if (refusal === undefined) {
            this.firstError = undefined;
            const permit = state.permit;
            return super.connect(emitter).then((stream) => {
              guard.#boundHandshake(state, permit, stream);
              return stream;
            });
          }
          // A stream already dead with its first error: ioredis reports the error and runs its
          // retryStrategy, as for a refused connect (a rejected connect would end the client).
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
    };
  }

  /**
   * Bounds the handshake of the dial `permit` stands for on `socket` (see `handshake.ts`): if
   * nothing was received `connectTimeout` after the dial began and the dial is still unreported,
   * the socket is destroyed with a `ConnectTimeoutError` (phase 'handshake'), a failed dial.
   */
  #boundHandshake(state: ClientState, permit: DialPermit | undefined, stream: unknown): void {
    if (permit === undefined || stream === undefined) return;
    const left = this.#timeout - (this.#rounds.now() - state.dialAt);
    boundHandshake(
      stream as net.Socket,
      left,
      () => state.permit === permit,
      () => new ConnectTimeoutError(state.key, this.#timeout, 'handshake'),
    );
  }

  /**
   * The strategy: settle the dial that just ended, then say when to dial next. While the node is
   * open, when its window ends (a jittered bit past it, so a fleet does not wake together); while
   * a probe is out, soon (a refused dial costs no I/O, and the probe may bring the node back);
   * otherwise a short jittered backoff.
   */
  #next(state: ClientState, attempt: number, cause: unknown): number {
    const dialled = state.permit !== undefined;
    this.#settle(state, cause);
    // No dial of its own ended: a lost connection (or a dial failed at the gate); from now on the
    // node's redials go in rounds (a no-op if they already do).
    if (!dialled) this.#rounds.lost(state.key, cause);
    return this.#delayFor(state.key, attempt, true);
  }
}

/** Host and port of a node-redis client: its url's, or `socket.host`/`socket.port`. */
function nodeRedisTarget(options: NodeRedisOptions): { host: string; port: number } {
  if (typeof options.url === 'string') {
    const url = new URL(options.url);
    return { host: url.hostname || 'localhost', port: Number(url.port) || 6379 };
  }
  return { host: options.socket?.host ?? 'localhost', port: options.socket?.port ?? 6379 };
}

/**
 * The options without `url`, its credentials, database and scheme moved into options (as node-redis
 * reads them; explicit options win), so the url's host cannot override the guarded `socket.host`.
 */
function withoutUrl(options: NodeRedisOptions, socket: Record<string, unknown>): NodeRedisOptions {
  const { url, ...rest } = options;
  if (typeof url !== 'string') return rest;
  const u = new URL(url);
  if (u.username !== '' && rest.username === undefined) rest.username = decodeURIComponent(u.username);
  if (u.password !== '' && rest.password === undefined) rest.password = decodeURIComponent(u.password);
  if (u.pathname.length > 1 && rest.database === undefined) rest.database = Number(u.pathname.slice(1));
  if (u.protocol === 'rediss:') socket.tls = true;
  return rest;
}

/** node-redis `createCluster` options, the parts the guard reads and sets. */
interface ClusterShape {
  rootNodes?: NodeRedisOptions[];
  defaults?: { socket?: Record<string, unknown>; [key: string]: unknown };
  nodeAddressMap?: ((address: string) => { host: string; port: number } | undefined) | Record<string, { host: string; port: number }>;
  [key: string]: unknown;
}

const GATE = /^(.*)\.dialguard-(\d+)\.invalid$/;

/** The name the cluster's nodes are dialled by: only the guard's lookup resolves it. */
function gateName(host: string, port: number): string {
  return `${host.startsWith('[') ? host.slice(1, -1) : host}.dialguard-${port}.invalid`;
}

/** The host, port and breaker key a {@link gateName} stands for, or undefined for any other name. */
function ungateName(name: string): { host: string; port: number; key: string } | undefined {
  const m = GATE.exec(name);
  if (m === null) return undefined;
  const host = m[1]!;
  const port = Number(m[2]);
  return { host, port, key: hostKey(host, port) };
}
