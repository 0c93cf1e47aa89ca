/**
 * The cluster factories of {@link RedisGuard}: ioredis's `Cluster` and node-redis's
 * `createCluster`, whose dials to every node ask the guard's breaker, keyed by that node's
 * address, and go in the node's shared redial rounds. The guard hands them its dial steps
 * ({@link GuardInternals}); the public entry points are `RedisGuard.ioredisCluster` and
 * `RedisGuard.nodeRedisCluster`, documented there.
 *
 * @module
 */
import dns from 'node:dns';
import net from 'node:net';
import { HostUnavailableError } from '../../core/errors.js';
import { hostKey } from '../../guard/host-key.js';
import { takeConnectingSocket, watchConnectingSockets } from './handshake.js';
import {
  ClientState,
  type ConnectorClass,
  type EventClient,
  type GuardInternals,
  type IoredisOptions,
  NODE_REDIS_LONGEST_WAIT,
  type NodeRedisOptions,
  defaultConnector,
  nodeRedisGivesUp,
  nodeRedisTarget,
  nodeRedisSilentOnConnect,
  roundKey,
  strategyAnswer,
  withoutUrl,
} from './internals.js';
import type { RoundOutcome } from './redial.js';

/** `RedisGuard.ioredisCluster` (documented there), with the guard's dial steps. */
export function ioredisCluster<O extends object>(guard: GuardInternals, Redis: new (options: IoredisOptions) => EventClient, clusterOptions?: O): O {
  const options = (clusterOptions ?? {}) as O & { redisOptions?: IoredisOptions };
  const redisOptions: IoredisOptions = { ...(options.redisOptions ?? {}) };
  const Base: ConnectorClass = (redisOptions.Connector as ConnectorClass | undefined) ?? defaultConnector(Redis);
  class GuardedNodeConnector extends Base {
    /** This node connection's dials, in the node's shared redial rounds. */
    #state: ClientState | undefined;
    override connect(emitter: unknown): Promise<unknown> {
      const target = (this as unknown as { options: IoredisOptions }).options;
      const state = (this.#state ??= new ClientState(hostKey(target.host ?? 'localhost', target.port ?? 6379), true, Boolean(target.tls)));
      // Each Cluster dials a dead node anew for every batch of commands its slots send there:
      // in rounds, every connection of every cluster in the process makes one dial per round.
      this.connecting = true;
      const gate = guard.gate(state, () => this.connecting === true);
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
      const permit = state.permit;
      return super.connect(emitter).then((stream) => {
        const socket = stream as net.Socket;
        const event = target.tls ? 'secureConnect' : 'connect';
        const done = (err?: unknown): void => {
          socket.off(event, onConnect);
          socket.off('data', onAnswer);
          socket.off('error', done);
          socket.off('close', onClose);
          if (err === undefined) guard.succeeded(state);
          else guard.settle(state, err);
        };
        // TCP (or TLS) connected is not yet a live node: its first byte is (the reply to the
        // ready check's INFO, or to the first command). Listening for it here is safe: ioredis
        // adds its own 'data' listener in the same 'connect' event, before any byte can arrive.
        const onConnect = (): void => {
          socket.once('data', onAnswer);
        };
        const onAnswer = (): void => {
          done();
          // Once connected, a close is a lost connection (the clusters' node connections do not
          // redial, each cluster dials anew): from then on the node's redials go in rounds, and
          // the first redials of every cluster are one round, not one dial per cluster. A close
          // the client asked for costs nothing: the next dial leads a round, and its success
          // forgets the node.
          socket.once('close', () => guard.rounds.lost(state.roundKey, new Error(`the connection to ${state.key} was lost`)));
        };
        const onClose = (): void => done(new Error('the connection closed before the node answered'));
        if (socket.destroyed) done(this.firstError ?? new Error('the connection closed before it connected'));
        else {
          socket.once(event, onConnect);
          socket.once('error', done);
          socket.once('close', onClose);
          // A node that connects and never answers (frozen, accept-and-hold): a failed dial
          // `connectTimeout` after the dial began (handshake.ts), not a wait without end.
          guard.boundHandshake(state, permit, socket);
        }
        return stream;
      });
    }
  }
  redisOptions.Connector = GuardedNodeConnector;
  redisOptions.connectTimeout = guard.timeout;
  return { ...options, redisOptions };
}

/** `RedisGuard.nodeRedisCluster` (documented there), with the guard's dial steps. */
export function nodeRedisCluster<O, C extends EventClient>(guard: GuardInternals, createCluster: (options: O) => C, clusterOptions: O): C {
  const options = clusterOptions as unknown as ClusterShape;
  const pending = new Map<string, ClientState[]>();
  const mapAddress = options.nodeAddressMap;
  const defaults = { ...(options.defaults ?? {}) };
  const socket: Record<string, unknown> = { ...(defaults.socket ?? {}) };
  if (socket.tls !== undefined && socket.tls !== false) throw new TypeError('dialguard: nodeRedisCluster does not support TLS clusters');
  const own = socket.reconnectStrategy;
  socket.connectTimeout = guard.timeout;
  // Node clients are made of `defaults` (a root node's over them) with the cluster's RESP, and
  // READONLY for replicas.
  const silent =
    options.RESP === undefined &&
    options.useReplicas !== true &&
    nodeRedisSilentOnConnect(defaults) &&
    (options.rootNodes ?? []).every((root) => nodeRedisSilentOnConnect({ ...defaults, ...root }));
  socket.lookup = clusterLookup(guard, pending, socket.lookup as net.LookupFunction | undefined, silent);
  watchConnectingSockets();
  socket.reconnectStrategy = (retries: number, cause: unknown) => {
    if (own === undefined && nodeRedisGivesUp(cause)) return false; // as node-redis's default
    const delay = Math.min(guard.delayFor(cause instanceof HostUnavailableError ? cause.host : undefined, retries), NODE_REDIS_LONGEST_WAIT);
    // No sooner than node-redis's own default would redial (as for a single client): the guard's
    // jitter and a refusing node's short windows redialled a killed node about twice as often as
    // plain clusters (an outside review: 43 dials in 30 s against 19). The gate still refuses
    // what the breaker would not let through, so a guarded cluster dials no more than a plain one.
    if (own === undefined) return Math.max(delay, Math.min(2 ** Math.min(retries, 16) * 50, NODE_REDIS_LONGEST_WAIT));
    const theirs: unknown = typeof own === 'function' ? (own as (r: number, c: unknown) => unknown)(retries, cause) : own;
    return strategyAnswer(theirs, delay);
  };
  defaults.socket = socket;
  const rootNodes = (options.rootNodes ?? []).map((root) => {
    const { host, port } = nodeRedisTarget(root);
    const socket = { ...(root.socket ?? {}) };
    return { ...withoutUrl(root, socket), socket: { ...socket, host: gateName(host, port), port } };
  });
  // A node that knows no address of its own (a one-node Redis 7 cluster without
  // cluster-announce-ip) lists an empty host: Node dials that as localhost, as plain node-redis
  // does. Gated as "", its name failed the breaker's key check in a listener and connect() rejected.
  const nodeAddressMap = (address: string): { host: string; port: number } => {
    const mapped = typeof mapAddress === 'function' ? mapAddress(address) : mapAddress?.[address];
    const at = address.lastIndexOf(':');
    const host = mapped?.host || address.slice(0, at) || 'localhost';
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
      if (err !== undefined) guard.rounds.lost(roundKey(target.key, false), err); // plain TCP only
      return;
    }
    if (err === undefined) guard.succeeded(state);
    else guard.settle(state, err);
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
function clusterLookup(guard: GuardInternals, pending: Map<string, ClientState[]>, lookup: net.LookupFunction | undefined, silent: boolean): net.LookupFunction {
  const resolve = resolverOf(lookup);
  return ((hostname: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void) => {
    const target = ungateName(hostname);
    if (target === undefined) {
      resolve(hostname, opts, cb);
      return;
    }
    const state = new ClientState(target.key);
    const unseen = (): void => {
      const list = pending.get(target.key) ?? [];
      list.push(state);
      pending.set(target.key, list);
    };
    socketReportedDial(guard, state, guard.timeout, false, unseen, cb, () => answerLookup(resolve, target.host, opts, cb), silent);
  }) as net.LookupFunction;
}

/** `lookup` (Node's `dns.lookup` when none), typed as the guard's lookups call it. */
export function resolverOf(lookup: net.LookupFunction | undefined): (h: string, o: dns.LookupOptions, c: (...a: unknown[]) => void) => void {
  return (lookup ?? dns.lookup) as (h: string, o: dns.LookupOptions, c: (...a: unknown[]) => void) => void;
}

/** Answers a lookup for `host`: an IP address as itself (a tick later, as Node's own), a name through `resolve`. */
export function answerLookup(resolve: ReturnType<typeof resolverOf>, host: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void): void {
  const family = net.isIP(host);
  if (family === 0) resolve(host, opts, cb);
  else if (opts?.all === true) process.nextTick(cb, null, [{ address: host, family }]);
  else process.nextTick(cb, null, host, family);
}

/**
 * Inside a lookup, the dial it stands for as a dial of its own (`state`): its turn in the node's
 * shared rounds and the breaker (a refusal goes to `cb`), then `answer()`. Its outcome comes from
 * the socket `net.connect` made for it ({@link watchNodeDial}), its handshake bounded from when
 * the dial began (node-redis bounds the TCP connect only; its commands go behind the handshake);
 * a dial whose socket was not seen goes to `unseen`. A wait for the round longer than `bound`
 * (node-redis's connect timeout runs meanwhile), or with `untilClosed` one whose socket was
 * destroyed meanwhile (a pool destroyed), takes no permit that no dial would report.
 */
export function socketReportedDial(
  guard: GuardInternals,
  state: ClientState,
  bound: number,
  untilClosed: boolean,
  unseen: () => void,
  cb: (...answer: unknown[]) => void,
  answer: () => void,
  silent = false,
): void {
  const socket = takeConnectingSocket();
  const go = (refusal: RoundOutcome): void => {
    if (refusal !== undefined) {
      process.nextTick(cb, refusal);
      return;
    }
    if (socket === undefined) unseen();
    else {
      state.socket = socket;
      watchNodeDial(guard, state, socket, silent);
      // A client that sends nothing on connect hears nothing until its first command: no byte to wait for.
      if (!silent) guard.boundHandshake(state, state.permit, socket, true);
    }
    answer();
  };
  const askedAt = guard.rounds.now();
  const gate = guard.gate(state, () => guard.rounds.now() - askedAt < bound && !(untilClosed && socket?.destroyed === true));
  if (gate instanceof Promise) void gate.then(go);
  else go(gate);
}

/**
 * A cluster node client's dial, reported from its socket (node-redis's cluster says 'node-ready'
 * only for a node client's first connection, so a redial that succeeded would go unreported; a
 * pool member's, as a pool's members share one options object, `pool.ts`):
 * the server's first byte is a success (TCP connected alone is not: a frozen node connects from
 * its backlog), an error before that a failure (the handshake bound's `ConnectTimeoutError`
 * among them), a close with no error (the cluster destroyed) abandoned. Once it answered, a close
 * is a lost connection: the node's redials go in rounds from then on. `silent`: the client sends
 * nothing on connect (no handshake, see {@link nodeRedisSilentOnConnect}), so the server says
 * nothing until a command: TCP connected is the success. Waiting for a byte there, an idle
 * connection was destroyed at the connect timeout and counted as a failed dial, and a pool's
 * healthy node opened for every client of the breaker (an outside review).
 */
export function watchNodeDial(guard: GuardInternals, state: ClientState, socket: net.Socket, silent = false): void {
  const done = (outcome: 'answered' | 'abandoned' | Error): void => {
    socket.off('connect', onConnect);
    socket.off('data', onAnswer);
    socket.off('error', onError);
    socket.off('close', onClose);
    if (outcome === 'answered') guard.succeeded(state);
    else if (outcome === 'abandoned') guard.abandon(state);
    else guard.settle(state, outcome);
  };
  // node-redis adds its own 'data' listener just after 'connect' (a microtask later), before any
  // byte can arrive: listening here loses nothing.
  const onConnect = (): void => {
    if (silent) onAnswer();
    else socket.once('data', onAnswer);
  };
  const onAnswer = (): void => {
    done('answered');
    socket.once('close', () => guard.rounds.lost(state.roundKey, new Error(`the connection to ${state.key} was lost`)));
  };
  const onError = (err: Error): void => done(err);
  const onClose = (): void => done('abandoned');
  socket.once('connect', onConnect);
  socket.once('error', onError);
  socket.once('close', onClose);
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
