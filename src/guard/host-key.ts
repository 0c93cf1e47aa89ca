/**
 * One host, one key. `Example.COM:443` and `https://example.com/` are the same breaker entry;
 * `[::1]:80` and `::1` with port 80 are the same too. `example.com.:443` is another (a trailing
 * dot stays: see {@link hostKey}).
 *
 * @module
 */

const schemePorts: Readonly<Record<string, number>> = {
  'http:': 80,
  'https:': 443,
  'ws:': 80,
  'wss:': 443,
  'h2c:': 80,
  'h2:': 443,
};

/**
 * Normalises a host into the key a {@link HostBreaker} files it under: lower case, IPv6 in
 * brackets, and `:port` when a port is known (given, or implied by a URL's scheme). A trailing dot
 * stays: `name.` and `name` may resolve differently (search domains), so they are two hosts.
 *
 * Accepts `host`, `host:port`, `[v6]`, `[v6]:port`, a bare IPv6 address, or a URL
 * (`scheme://host[:port]/...`). `port` overrides any port in `host`.
 *
 * @throws TypeError when `host` is not a non-empty string or `port` is not a valid port.
 */
export function hostKey(host: string, port?: number | string): string {
  // A host with a numeric port (how connect(), the adapters and the benches ask): one Map lookup
  // by the spelling as given, whose hash the caller's string already holds, and the key made the
  // first time comes back. No `host:port` string is built per call.
  if (typeof port === 'number') {
    const known = ports.get(host);
    if (known !== undefined) {
      if (known.port === port) return known.key;
      const other = known.more?.get(port);
      if (other !== undefined) return other;
    }
    return portKeyMiss(host, port, known);
  }
  // No "same as last call" slot: a client of one host takes the same path as one of thousands,
  // so what bench/scale prints at 1 host is what the table costs, not a shortcut.
  return keyOf(host, port); // a canonical spelling is returned as is; a string port is rare
}

/**
 * The keys of (spelling, numeric port) pairs: the spelling as given to one record, which holds
 * its first port's key and, for a name dialled on several ports, a Map of the others. Two
 * generations like the spelling memo, counted in keys (a record's first port and each other one),
 * so a hostile stream of names or of ports holds at most 2 × `generationSize` keys.
 */
interface PortKeys {
  readonly port: number;
  readonly key: string;
  more: Map<number, string> | undefined;
}
let ports = new Map<string, PortKeys>();
let previousPorts = new Map<string, PortKeys>();
let portKeys = 0;
/** The keys `previousPorts` holds: it never changes once it is the previous generation. */
let previousPortKeys = 0;

function portKeyMiss(host: string, port: number, known: PortKeys | undefined): string {
  const old = previousPorts.get(host);
  let key = old === undefined ? undefined : old.port === port ? old.key : old.more?.get(port);
  if (key === undefined) {
    key = canonicalKey(host, port);
    if (key === undefined) {
      key = normalise(host, port); // throws on a bad host or port: nothing kept
      parses++;
    }
  }
  if (portKeys >= generationSize) {
    previousPorts = ports;
    previousPortKeys = portKeys;
    ports = new Map();
    portKeys = 0;
    known = undefined;
  }
  portKeys++;
  if (known === undefined) ports.set(host, { port, key, more: undefined });
  else (known.more ??= new Map()).set(port, key);
  return key;
}

function keyOf(host: string, port: number | string | undefined): string {
  const plain = canonicalKey(host, port);
  if (plain !== undefined) return plain;
  // The memo is keyed by the spelling as given; a NUL never occurs in a host, so it separates.
  const spelling = port === undefined ? host : typeof host === 'string' ? `${host}\u0000${port}` : undefined;
  if (spelling === undefined) return normalise(host, port); // not a string: throws
  const hit = memo.get(spelling);
  if (hit !== undefined) return hit;
  const old = previous.get(spelling);
  if (old !== undefined) {
    remember(spelling, old); // still in use: carried into the current generation
    return old;
  }
  const key = normalise(host, port);
  parses++;
  remember(spelling, key);
  return key;
}

/**
 * Makes one generation of the spelling memo hold at least twice `hosts` spellings, so that a
 * breaker tracking that many hosts (and, with room to spare, the other breakers and clients of
 * the process) never re-parses one while they stay in rotation. Only ever grows; called by every
 * `HostBreaker` with its capacity.
 *
 * @internal
 */
export function reserveHostKeys(hosts: number): void {
  if (2 * hosts > generationSize) generationSize = 2 * hosts;
}

/**
 * What the spelling memo holds now (both generations), the size of one generation, how many
 * spellings were parsed (memo misses) since the process started, the keys the (spelling, numeric
 * port) memo holds (both generations), and how many keys were made at all (a `host:port`
 * concatenated or a spelling parsed): on a warm host that count does not move.
 *
 * @internal For tests and benchmarks.
 */
export function hostKeyMemoStats(): { entries: number; generation: number; parses: number; portKeys: number; built: number } {
  return { entries: memo.size + previous.size, generation: generationSize, parses, portKeys: portKeys + previousPortKeys, built };
}


/**
 * A spelling that is already its own key, returned without parsing or memory: a lower-case name
 * or IPv4 address (letters, digits, `-`, `.`, `_`), not ending in a dot, with an optional
 * canonical `:port` (no leading zero, at most 65535), or with `port` given as an integer. That is
 * how connect() and every breaker key arrive, so the common path costs one scan of the string
 * whatever the number of hosts. Anything else (upper case, a URL, IPv6, a string port) is
 * `undefined` and goes the long way.
 */
function canonicalKey(host: string, port: number | string | undefined): string | undefined {
  if (typeof host !== 'string') return undefined;
  const n = host.length;
  let colon = -1;
  for (let i = 0; i < n; i++) {
    const c = host.charCodeAt(i);
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 46 || c === 95) continue; // a-z 0-9 - . _
    if (c !== 58 /* : */) return undefined;
    colon = i;
    break;
  }
  const nameEnd = colon < 0 ? n : colon;
  if (nameEnd === 0 || host.charCodeAt(nameEnd - 1) === 46 /* . */) return undefined;
  if (colon < 0) {
    if (port === undefined) return host;
    if (typeof port === 'number' && Number.isInteger(port) && port >= 0 && port <= 65535) {
      built++;
      return `${host}:${port}`;
    }
    return undefined;
  }
  if (port !== undefined) return undefined;
  // host:port, the port canonical: 1-5 digits, no leading zero (but "0"), at most 65535.
  const digits = n - colon - 1;
  if (digits < 1 || digits > 5 || (digits > 1 && host.charCodeAt(colon + 1) === 48)) return undefined;
  let value = 0;
  for (let i = colon + 1; i < n; i++) {
    const c = host.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
    value = value * 10 + (c - 48);
  }
  return value <= 65535 ? host : undefined;
}

/**
 * Recent spellings that are not their own key (upper case, URLs, IPv6) and their keys: the
 * refusal path asks for the same host again and again, and parsing it each time would cost more
 * than the refusal itself. Two generations: a spelling is looked up in the current one, then in
 * the previous one (and carried over); when the current one is full it becomes the previous and
 * the oldest is dropped. So any set of up to `generationSize` spellings in rotation always hits,
 * and a stream of distinct hosts holds at most 2 × `generationSize` entries.
 */
let memo = new Map<string, string>();
let previous = new Map<string, string>();
/**
 * One generation's size: twice the largest breaker capacity constructed (twice the default 4 096
 * before any). Twice, because the memo is the process's, shared by every breaker and client; a
 * rotation past one generation would turn every hit into a carry-over (a Map write).
 */
let generationSize = 8192;
let parses = 0;
/** Keys made: a `host:port` concatenated or a spelling parsed (a parse that throws included). */
let built = 0;

function remember(spelling: string, key: string): void {
  if (memo.size >= generationSize) {
    previous = memo;
    memo = new Map();
  }
  memo.set(spelling, key);
}

/** An absolute unix socket path, or a grpc `unix:`, `unix-abstract:` or `vsock:` target. */
const SOCKET_ADDRESS = /^(?:\/|unix:|unix-abstract:|vsock:)/;

function normalise(host: string, port: number | string | undefined): string {
  built++;
  if (typeof host !== 'string' || host.length === 0) {
    throw new TypeError(`host must be a non-empty string, got ${describe(host)}`);
  }
  // A unix socket's path (or a grpc target naming a socket) is its own key: a path is
  // case-sensitive and may hold a colon. Lower-cased, a dead `/run/Svc.sock` refused a live
  // `/run/svc.sock` (an outside review).
  if (port === undefined && SOCKET_ADDRESS.test(host)) return host;
  let name: string;
  let parsedPort: string | undefined;
  if (host.includes('://')) {
    let url: URL;
    try {
      url = new URL(host);
    } catch {
      throw new TypeError(`host ${JSON.stringify(host)} is not a valid URL`);
    }
    name = url.hostname;
    parsedPort = url.port !== '' ? url.port : schemePorts[url.protocol]?.toString();
  } else if (host.charCodeAt(0) === 91 /* [ */) {
    const end = host.indexOf(']');
    if (end < 0) throw new TypeError(`host ${JSON.stringify(host)} has an unclosed '['`);
    name = host.slice(0, end + 1);
    const rest = host.slice(end + 1);
    if (rest.length > 0) {
      if (rest.charCodeAt(0) !== 58 /* : */) throw new TypeError(`host ${JSON.stringify(host)} is malformed`);
      parsedPort = rest.slice(1);
    }
  } else {
    const first = host.indexOf(':');
    if (first >= 0 && host.indexOf(':', first + 1) >= 0) {
      name = host; // bare IPv6: two or more colons, no port possible
    } else if (first >= 0) {
      name = host.slice(0, first);
      parsedPort = host.slice(first + 1);
    } else {
      name = host;
    }
  }
  if (port !== undefined) parsedPort = String(port);
  name = canonicalName(name);
  if (name.length === 0 || name === '[]') throw new TypeError(`host ${JSON.stringify(host)} has no name`);
  if (parsedPort === undefined || parsedPort === '') return name;
  return `${name}:${checkPort(parsedPort, host)}`;
}

function canonicalName(name: string): string {
  // A trailing dot is kept: `redis.` is the absolute name, `redis` goes through the resolver's
  // search domains, and the two can resolve to different hosts or to nothing (an outside review:
  // `localhost.`'s ENOTFOUND got the live `localhost` refused when both were one key).
  const lower = name.toLowerCase();
  return lower.charCodeAt(0) !== 91 && lower.includes(':') ? `[${lower}]` : lower;
}

function checkPort(port: string, host: string): number {
  const n = Number(port);
  if (!/^\d{1,5}$/.test(port) || n > 65535) {
    throw new TypeError(`port ${JSON.stringify(port)} of ${JSON.stringify(host)} is not a valid port (0-65535)`);
  }
  return n;
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : typeof value;
}
