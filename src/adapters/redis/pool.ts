/**
 * node-redis client pools (`RedisClientPool`, v5): `RedisGuard.nodeRedisPool` and the guarded
 * client's `createPool()`, documented there.
 *
 * A pool builds every member client from one options object, so the members share one `lookup`
 * and one `reconnectStrategy`, neither told which member calls it. The single-client gate keeps
 * one dial's state per client, and a pool's members all fed it: each new member's dial settled
 * the one before it as failed ("a new dial started before the last one was reported"), so a pool
 * of 10 opened the breaker of a healthy node while it connected (2.9 s to connect, and not back
 * 10 s after a 300 ms restart). Here each dial keeps its own state, from the lookup that asks the
 * breaker to the dial's socket that reports it (the node's first byte is a success, an error
 * before it a failure, a close with no error abandoned), as a cluster's node dials do.
 *
 * TLS members are not gated: Node publishes no TLS socket to report the dial from, so the pool
 * gets the options as given, exactly as node-redis alone would use them.
 *
 * @module
 */
import dns from 'node:dns';
import net from 'node:net';
import { answerLookup, resolverOf, socketReportedDial } from './cluster.js';
import { watchConnectingSockets } from './handshake.js';
import { ClientState, type GuardInternals, NODE_REDIS_LONGEST_WAIT, type NodeRedisOptions, nodeRedisGivesUp, nodeRedisSilentOnConnect, strategyAnswer, withoutUrl } from './internals.js';

/**
 * Member options for a pool of `options`' node, each dial gated and reported on its own; the
 * options as given for a TLS node (see the module docs). `base` carries the node's key, and the
 * client's own `connectTimeout` as the guard took it (`timeout`, `policy`).
 *
 * @param socket - `options.socket`, copied, with `connectTimeout` already the guard's choice.
 */
export function poolMemberOptions(guard: GuardInternals, options: NodeRedisOptions, socket: NonNullable<NodeRedisOptions['socket']>, base: ClientState): NodeRedisOptions {
  if (base.tls) return options;
  const { name, ip } = gatedHost(socket.host ?? 'localhost');
  socket.host = name;
  const silent = nodeRedisSilentOnConnect(options);
  socket.lookup = memberLookup(guard, base, ip, socket.lookup as net.LookupFunction | undefined, silent);
  watchConnectingSockets();
  const own = socket.reconnectStrategy;
  socket.reconnectStrategy = (retries: number, cause: unknown) => {
    if (own === undefined && nodeRedisGivesUp(cause)) return false; // as node-redis's default
    // As a single client's: no sooner than node-redis's own default where nothing else says when.
    const floor = own === undefined ? Math.min(2 ** Math.min(retries, 16) * 50, NODE_REDIS_LONGEST_WAIT) : 0;
    const delay = Math.min(guard.delayFor(base.key, retries, base.roundKey, base.transport, floor), NODE_REDIS_LONGEST_WAIT);
    if (own === undefined) return delay;
    const theirs: unknown = typeof own === 'function' ? (own as (r: number, c: unknown) => unknown)(retries, cause) : own;
    return strategyAnswer(theirs, delay);
  };
  return withEndpointType({ ...withoutUrl(options, socket), socket }, ip);
}

/**
 * `options` for a node the guard gave node-redis as a gated name: with RESP 3 (node-redis 6's
 * default), node-redis turns maintenance notifications on at connect and, to pick their endpoint
 * type, resolves `socket.host` itself with `dns.lookup`, which cannot resolve a gated name: every
 * connect failed ENOTFOUND, and the failures opened a healthy node for every client of the
 * breaker (an outside review). For a gated IP, the type node-redis would pick from the address
 * (`maintEndpointType`, unless the caller chose one) is given up front, so it asks no resolver.
 */
export function withEndpointType<O extends NodeRedisOptions>(options: O, ip: string | undefined): O {
  if (ip === undefined || (options.maintEndpointType !== undefined && options.maintEndpointType !== 'auto')) return options;
  const local = privateAddress(ip) ? 'internal' : 'external';
  return { ...options, maintEndpointType: options.socket?.tls ? `${local}-fqdn` : `${local}-ip` };
}

/** Whether node-redis counts `ip` as private when it picks an endpoint type (its own rule: RFC 1918, IPv6 unique and link-local, ::1). */
function privateAddress(ip: string): boolean {
  if (net.isIP(ip) === 4) {
    const [a, b] = ip.split('.').map(Number) as [number, number];
    return a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168);
  }
  return ip.startsWith('fc') || ip.startsWith('fd') || ip === '::1' || ip.startsWith('fe80');
}

/**
 * The name node-redis is given for `host`: the host itself, or for an IP address (which Node
 * dials without calling `lookup`) a name under `.dialguard.invalid` only the guard's lookup
 * resolves, back to `ip`.
 */
export function gatedHost(host: string): { name: string; ip: string | undefined } {
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (net.isIP(bare) === 0) return { name: bare, ip: undefined };
  return { name: `${bare.replaceAll(':', '-')}.dialguard.invalid`, ip: bare };
}

/**
 * A pool member's lookup: a dial state of its own (key, bound and rounds policy from `base`),
 * reported from its socket as a cluster node's dial is ({@link socketReportedDial}; `silent`: the
 * members send nothing as they connect, so connected is the success). A dial whose
 * socket was not seen (never: net.connect publishes every socket it makes) goes unreported rather
 * than hold the node's round; a pool destroyed while a dial waits for its round takes no permit.
 */
function memberLookup(guard: GuardInternals, base: ClientState, ip: string | undefined, lookup: net.LookupFunction | undefined, silent: boolean): net.LookupFunction {
  const resolve = resolverOf(lookup);
  const bound = base.timeout > 0 ? base.timeout : guard.timeout;
  return ((hostname: string, opts: dns.LookupOptions, cb: (...answer: unknown[]) => void) => {
    const state = new ClientState(base.key, true, false);
    state.timeout = base.timeout;
    state.policy = base.policy;
    socketReportedDial(guard, state, bound, true, () => guard.abandon(state), cb, () => answerLookup(resolve, ip ?? hostname, opts, cb), silent);
  }) as net.LookupFunction;
}
