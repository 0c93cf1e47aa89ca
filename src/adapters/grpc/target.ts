/**
 * Which channel a client gets: one per (target, credentials, channel options), shared by every
 * client that names the same three, and the breaker key of a grpc target.
 *
 * @module
 */
import type * as grpc from '@grpc/grpc-js';
import { hostKey } from '../../guard/host-key.js';
import { serviceConfigRetries } from './options.js';
import { type MethodTimeout, methodTimeouts } from './method-timeout.js';

/** grpc's default port, for a target that names none. */
const GRPC_DEFAULT_PORT = 443;

/**
 * The breaker key of a grpc target: `dns:///h:p`, `dns:h:p`, `h:p`, `ipv4:a:p` and `ipv6:[a]:p`
 * all become `h:p` (port 443 when none is named, as grpc does). An `ipv4:`/`ipv6:` list of several
 * addresses is one target grpc-js dials itself (the first that answers serves it): it is keyed
 * by the whole list, its addresses keyed each as above and sorted, so a dead first address
 * (open for the clients that dial it alone) never gets the list refused. A socket (`unix:`,
 * `unix-abstract:`, `vsock:`) is keyed by its path as given. A target of another resolver
 * (`xds:///name`, a scheme the user registered with grpc-js) is keyed by its whole text, colons
 * replaced: one entry per target, never a host's. Was: its text read as `host:port`, so
 * `grpc://127.0.0.1:35935` was filed under `127.0.0.1:443` (the port dropped, grpc's default put
 * in), and the failing target opened a live server's entry for every client of the breaker,
 * while `xds:///name` threw (an outside review).
 *
 * @throws TypeError for a target that names no host, and for an `http:`/`https:` URL (grpc-js
 *   reads it as a DNS name it never resolves: every call fails UNAVAILABLE).
 */
export function grpcHostKey(target: string): string {
  if (typeof target !== 'string' || target.length === 0) throw new TypeError(`target must be a non-empty string, got ${typeof target}`);
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(target)?.[1]?.toLowerCase();
  let rest = target;
  if (scheme === 'http' || scheme === 'https') {
    const authority = /^[a-z]+:\/\/([^/?#]*)/i.exec(target)?.[1];
    const hint = authority ? ` as ${JSON.stringify(authority)} (or "dns:///${authority}")` : ' as host:port';
    throw new TypeError(`target ${JSON.stringify(target)} is a URL: grpc-js reads it as a DNS name it never resolves, and every call fails UNAVAILABLE; name the server${hint}`);
  }
  if (scheme === 'dns') {
    rest = target.slice(4).replace(/^\/\/[^/]*\//, '');
  } else if (scheme === 'ipv4' || scheme === 'ipv6') {
    const list = target.slice(5).split(',').filter((a) => a.length > 0);
    if (list.length > 1) return hostKey(`${scheme}/${[...new Set(list.map(withDefaultPort))].sort().join(',')}`.replace(/:/g, '/'));
    rest = list[0] ?? '';
  } else if (scheme === 'unix' || scheme === 'unix-abstract' || scheme === 'vsock') {
    // The path as given (case and colons kept), under its scheme: see hostKey.
    return hostKey(`${scheme}${target.slice(scheme.length)}`);
  } else if (scheme !== undefined && !/^\d+$/.test(target.slice(scheme.length + 1))) {
    // Not `host:port` (`localhost:50051` reads as a scheme too): another resolver's target.
    return hostKey(target.replace(/:/g, '/'));
  }
  return withDefaultPort(rest);
}

function withDefaultPort(address: string): string {
  // `[v6]:p`, `h:p` or a bare v6 address (two or more colons) say whether a port is there.
  const bracketed = address.startsWith('[');
  const colons = address.split(':').length - 1;
  const hasPort = bracketed ? /\]:\d+$/.test(address) : colons === 1;
  return hasPort ? hostKey(address) : hostKey(address, GRPC_DEFAULT_PORT);
}

/** One channel's identity: what a pooled channel to it is made from. */
export interface ChannelSpec {
  /** The pool's key for it: unique per (target, credentials, options). */
  readonly key: string;
  /** The grpc target as the client named it. */
  readonly target: string;
  readonly credentials: grpc.ChannelCredentials;
  /** The final channel options (guard's, then the client's, then the forced ones). */
  readonly options: grpc.ChannelOptions;
  /**
   * grpc-js retries its calls itself (a service config `retryPolicy` or `hedgingPolicy`, retries
   * not off): a status grpc-js made for a call proves nothing about its earlier attempts, any of
   * which may have run at the server. See GuardedCall's #settle.
   */
  readonly selfRetrying: boolean;
  /** The service config's method timeouts, which grpc-js makes a call's deadline (see method-timeout.ts); undefined: none. */
  readonly methodTimeout: MethodTimeout | undefined;
  /** Clients holding it open. */
  clients: number;
  /** Calls started and not yet ended (they may still need a channel after their client closed). */
  calls: number;
  /**
   * The keep-alive interval the target's server taught, ms (see `learnedKeepAlive` in
   * channel-connector): each GOAWAY `too_many_pings` doubles it, as grpc-js does for a channel's
   * own reconnects. Undefined until the server first complains.
   */
  keepAlive?: number;
}

/** Options every pooled channel gets whatever it is given. */
const FORCED: grpc.ChannelOptions = { 'grpc.use_local_subchannel_pool': 1 };

/**
 * The specs in use. Two clients share a channel when their targets and options match and
 * grpc-js's own `_equals` says their credentials do (two `createInsecure()` calls do).
 */
export class SpecTable {
  readonly #base: grpc.ChannelOptions;
  readonly #specs = new Map<string, ChannelSpec>();
  /** Pool keys by canonical identity, kept across releases so a spec made again gets its old key. */
  readonly #keys = new Map<string, string>();
  #nextKey = 0;
  /** Distinct credentials seen, each with a number for the key. */
  readonly #credentials: Array<{ credentials: grpc.ChannelCredentials; id: number }> = [];
  #nextCredentials = 0;
  #nextOpaque = 0;

  /** Hears each spec forgotten (no client or call holds it any more). */
  readonly #onUnused: (spec: ChannelSpec) => void;

  constructor(base: grpc.ChannelOptions, onUnused: (spec: ChannelSpec) => void = () => {}) {
    this.#base = base;
    this.#onUnused = onUnused;
  }

  /** The spec for a client's channel (made on first use); counts the client in. */
  acquire(target: string, credentials: grpc.ChannelCredentials, clientOptions: grpc.ChannelOptions | undefined): ChannelSpec {
    const options = { ...this.#base, ...clientOptions, ...FORCED };
    const key = this.#keyOf(target, `${target}\n${this.#credentialsId(credentials)}\n${this.#optionsKey(options)}`);
    let spec = this.#specs.get(key);
    if (spec === undefined) {
      spec = { key, target, credentials, options, selfRetrying: serviceConfigRetries(options), methodTimeout: methodTimeouts(options), clients: 0, calls: 0, keepAlive: undefined };
      this.#specs.set(key, spec);
    }
    spec.clients++;
    return spec;
  }

  /** A client closed: forgets the spec once no client or call holds it (a live channel stays pooled). */
  release(spec: ChannelSpec): void {
    spec.clients--;
    this.forgetIfUnused(spec);
  }

  /** Forgets `spec` if nothing holds it. */
  forgetIfUnused(spec: ChannelSpec): void {
    if (spec.clients > 0 || spec.calls > 0 || this.#specs.get(spec.key) !== spec) return;
    this.#specs.delete(spec.key);
    this.#onUnused(spec);
  }

  /** The spec behind a pool key, if a client still holds it. */
  get(key: string): ChannelSpec | undefined {
    return this.#specs.get(key);
  }

  /**
   * The pool key for an identity: `target [n]`, n counting identities (readable in errors and
   * events, never reused). Bounded: past 4096 identities the table starts over, which at worst
   * gives an equal identity a channel of its own.
   */
  #keyOf(target: string, identity: string): string {
    let key = this.#keys.get(identity);
    if (key === undefined) {
      if (this.#keys.size >= 4096) this.#keys.clear();
      key = `${target} [${++this.#nextKey}]`;
      this.#keys.set(identity, key);
    }
    return key;
  }

  #credentialsId(credentials: grpc.ChannelCredentials): number {
    for (const c of this.#credentials) if (c.credentials === credentials || equal(c.credentials, credentials)) return c.id;
    const id = ++this.#nextCredentials;
    this.#credentials.push({ credentials, id });
    // Bounded: past 64 distinct credentials, forget the oldest (a later equal one gets a new id
    // and so a channel of its own, which costs a connection, never correctness).
    if (this.#credentials.length > 64) this.#credentials.shift();
    return id;
  }

  /** Options as canonical text (sorted keys); an option that is not plain data makes the key unique. */
  #optionsKey(options: grpc.ChannelOptions): string {
    const entries = Object.keys(options)
      .sort()
      .map((k) => [k, options[k]] as const);
    for (const [, v] of entries) {
      if (v !== null && typeof v === 'object') return `o#${++this.#nextOpaque}`;
      if (typeof v === 'function' || typeof v === 'symbol' || typeof v === 'bigint') return `o#${++this.#nextOpaque}`;
    }
    return JSON.stringify(entries);
  }
}

/** The grpc target a pool key names. */
export function targetOfKey(key: string): string {
  return key.replace(/ \[\d+\]$/, '');
}

function equal(a: grpc.ChannelCredentials, b: grpc.ChannelCredentials): boolean {
  try {
    return typeof a._equals === 'function' && a._equals(b);
  } catch {
    return false;
  }
}

/** The resolver schemes grpc-js registers itself (a user's own, registered with it, cannot be seen from here). */
const GRPC_SCHEMES: ReadonlySet<string> = new Set(['dns', 'ipv4', 'ipv6', 'unix', 'unix-abstract', 'vsock', 'xds']);

/**
 * `target` as grpc-js's `getTarget()` answers for it: a target whose scheme it does not know
 * (none: `127.0.0.1:50051`, `[::1]:50051`; or a host read as one: `localhost:50051`) is its default
 * scheme's, `dns:` before it. Code that logs or labels metrics by the target saw another string
 * once guarded (an outside review).
 */
export function asGrpcSpellsIt(target: string): string {
  const scheme = /^([A-Za-z0-9+.-]+):/.exec(target)?.[1];
  return scheme !== undefined && GRPC_SCHEMES.has(scheme) ? target : `dns:${target}`;
}
