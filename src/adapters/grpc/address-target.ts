/**
 * Which grpc targets the adapter dials per address (issue 16), and the grpc-js target and channel
 * options for a dial to one of their addresses.
 *
 * A target naming a DNS name (`name:port`, `dns:///name:port`, `dns:name:port`) is resolved by
 * dialguard, with the guard's `lookup` (default `dns.lookup`, `all: true`: what grpc-js's own DNS
 * resolver calls), and each address is dialled as a channel of its own (`ipv4:a:p`). grpc-js's
 * own resolution is left alone, and the target guarded by name as before, wherever it would do
 * something dialguard's lookup would not:
 * - a DNS server named in the target (`dns://8.8.8.8/name:port`);
 * - grpc-js's alternative resolver (`GRPC_NODE_USE_ALTERNATIVE_RESOLVER=true`);
 * - an HTTP CONNECT proxy from the environment (`grpc_proxy`, `https_proxy`, `http_proxy`) unless
 *   `grpc.enable_http_proxy` is 0: the proxy, not this process, reaches the name;
 * - any other scheme (`ipv4:`, `ipv6:`, `unix:`, `xds:`, a resolver the user registered);
 * - a load-balancing policy other than `pick_first` in `grpc.service_config` (`round_robin`, ...):
 *   per address, each address is a channel of its own and the first READY one carries every
 *   call, so grpc-js's balancer would see one address and the policy would silently do nothing
 *   (with `round_robin` over two addresses: 41 calls and 0, where grpc-js alone splits 21 and 20).
 *
 * What dialguard's lookup does not do: read a service config from DNS TXT records, as grpc-js's DNS
 * resolver does (rarely used; `grpc.service_config` or `perAddress: false` keeps it). A resolver
 * registered over grpc-js's own for `dns` cannot be seen from here: with one, set `perAddress: false`
 * (or give the guard a `lookup` that asks it).
 *
 * @module
 */
import net from 'node:net';
import type * as grpc from '@grpc/grpc-js';

/** grpc's default port, for a target that names none. */
const GRPC_DEFAULT_PORT = 443;

/** A target dialguard resolves itself. */
export interface NamedTarget {
  /** The name to resolve. */
  readonly host: string;
  readonly port: number;
  /** The authority grpc-js would send for the name (`:authority`), as the target spells it. */
  readonly authority: string;
}

/** `host` or `host:port`, a DNS name (not an IP address, not bracketed). */
const NAME_AND_PORT = /^([A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_.])?)(?::(\d{1,5}))?$/;

/**
 * The name `target` resolves through, when dialguard may resolve it itself (see the module docs);
 * undefined otherwise.
 */
export function namedTarget(target: string, options: grpc.ChannelOptions, env: NodeJS.ProcessEnv = process.env): NamedTarget | undefined {
  if (env.GRPC_NODE_USE_ALTERNATIVE_RESOLVER === 'true') return undefined;
  if (!picksFirst(options['grpc.service_config'])) return undefined;
  if (options['grpc.enable_http_proxy'] !== 0 && Boolean(env.grpc_proxy || env.https_proxy || env.http_proxy)) return undefined;
  let path = target;
  if (/^dns:/i.test(target)) {
    path = target.slice(4);
    if (path.startsWith('//')) {
      const slash = path.indexOf('/', 2);
      if (slash !== 2) return undefined; // a DNS server is named (or the target is malformed)
      path = path.slice(3);
    }
  }
  const m = NAME_AND_PORT.exec(path);
  if (m === null) return undefined;
  const host = m[1]!;
  if (net.isIP(host) !== 0) return undefined;
  const port = m[2] === undefined ? GRPC_DEFAULT_PORT : Number(m[2]);
  if (port < 1 || port > 65_535) return undefined;
  return { host, port, authority: path };
}

/**
 * Whether the service config given as a channel option leaves grpc-js on `pick_first` (its
 * default): no config, no `loadBalancingConfig` (or an empty one), or `pick_first` first in the
 * list (grpc-js 1.14 parses the older `loadBalancingPolicy` but never acts on it). grpc-js
 * takes the first policy of the list it knows; any other first entry may be one, so it is read
 * as not `pick_first`. A config that is not JSON is grpc-js's to refuse: left to it.
 *
 * @internal
 */
export function picksFirst(config: unknown): boolean {
  if (config === undefined) return true;
  let parsed: unknown;
  try {
    parsed = typeof config === 'string' ? JSON.parse(config) : undefined;
  } catch {
    return false;
  }
  if (typeof parsed !== 'object' || parsed === null) return false;
  const list = (parsed as { loadBalancingConfig?: unknown }).loadBalancingConfig;
  if (!Array.isArray(list) || list.length === 0) return true;
  const first: unknown = list[0];
  return typeof first === 'object' && first !== null && Object.keys(first).length === 1 && 'pick_first' in first;
}

/** The grpc-js target for one address (`ipv4:a:p`, `ipv6:[a]:p`). */
export function addressTarget(address: string, port: number): string {
  return net.isIPv6(address) ? `ipv6:[${address}]:${port}` : `ipv4:${address}:${port}`;
}

/**
 * Channel options for a dial to one address of `named`: the calls still carry the name as their
 * authority, and TLS still sends it as SNI and checks the certificate against it (grpc-js would
 * otherwise take both from the address). Options the user set are kept.
 */
export function addressOptions(options: grpc.ChannelOptions, named: NamedTarget): grpc.ChannelOptions {
  return {
    ...options,
    'grpc.default_authority': options['grpc.default_authority'] ?? named.authority,
    'grpc.ssl_target_name_override': options['grpc.ssl_target_name_override'] ?? named.host,
  };
}
