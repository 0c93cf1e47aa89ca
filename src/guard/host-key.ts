/**
 * One host, one key. `Example.COM:443`, `example.com.:443` and `https://example.com/` are the
 * same breaker entry; `[::1]:80` and `::1` with port 80 are the same too.
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
 * Normalises a host into the key a {@link HostBreaker} files it under: lower case, no trailing
 * dot, IPv6 in brackets, and `:port` when a port is known (given, or implied by a URL's scheme).
 *
 * Accepts `host`, `host:port`, `[v6]`, `[v6]:port`, a bare IPv6 address, or a URL
 * (`scheme://host[:port]/...`). `port` overrides any port in `host`.
 *
 * @throws TypeError when `host` is not a non-empty string or `port` is not a valid port.
 */
export function hostKey(host: string, port?: number | string): string {
  // The same host and port as last time (a client dialling one target): no string to build.
  if (port !== undefined && host === lastHost && port === lastPort) return lastKey;
  // The memo is keyed by the spelling as given; a NUL never occurs in a host, so it separates.
  const spelling = port === undefined ? host : typeof host === 'string' ? `${host}\u0000${port}` : undefined;
  const hit = spelling === undefined ? undefined : memo.get(spelling);
  const key = hit ?? normalise(host, port);
  if (hit === undefined) {
    if (memo.size >= MEMO_CAPACITY) memo.clear();
    memo.set(spelling ?? key, key);
  }
  if (port !== undefined) {
    lastHost = host;
    lastPort = port;
    lastKey = key;
  }
  return key;
}

/** The last host and port given separately, and their key: building the memo's spelling costs more than the rest. */
let lastHost: string | undefined;
let lastPort: number | string | undefined;
let lastKey = '';

/**
 * Recent spellings and their keys: the refusal path asks for the same host again and again, and
 * parsing it each time would cost more than the refusal itself. Bounded: cleared when full, so a
 * stream of distinct hosts costs at most MEMO_CAPACITY entries.
 */
const memo = new Map<string, string>();
const MEMO_CAPACITY = 1024;

function normalise(host: string, port: number | string | undefined): string {
  if (typeof host !== 'string' || host.length === 0) {
    throw new TypeError(`host must be a non-empty string, got ${describe(host)}`);
  }
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
  let out = name.toLowerCase();
  if (out.endsWith('.') && out.length > 1) out = out.slice(0, -1);
  if (out.charCodeAt(0) !== 91 && out.includes(':')) out = `[${out}]`;
  return out;
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
