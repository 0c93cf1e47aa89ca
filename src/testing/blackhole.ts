/**
 * Blackhole peers: a connect to them never completes, because the SYN is dropped. The client
 * retransmits until its own timeout, exactly as against a host that vanished from the network.
 *
 * Three ways to drop a SYN:
 * - `accept-queue` (unprivileged): a listener with a backlog of 1 in a worker thread whose event
 *   loop is blocked, so it never accepts; the queue is filled once, and the kernel drops every
 *   later SYN. Works anywhere, on the machine's loopback.
 * - `veth` (iproute2 only): inside a network namespace the caller created (needs CAP_NET_ADMIN
 *   there), a veth pair and a permanent neighbour entry whose MAC no one has: SYNs to
 *   127.77.N.2 leave on the pair and vanish. Counts each connect exactly with the namespace's
 *   `Tcp: ActiveOpens`. Needs nothing beyond Debian's base system.
 * - `nftables`: a drop rule for the port, inside a network namespace the caller created (needs
 *   CAP_NET_ADMIN there and the nft binary). Counts each attempt exactly, per peer, on 127.0.0.1
 *   or ::1.
 *
 * Either can {@link Blackhole.heal}: the host comes back and accepts (as an echo peer).
 *
 * @module
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { freePort } from './local-process.js';
import { nft, setElements } from './nft.js';
import { type FaultPeer, type PeerOptions, addressOf, echoPeer, loopback, type LoopbackHost, type TcpPeer } from './tcp-peers.js';

/** How the blackhole drops SYNs. */
export type BlackholeMode = 'accept-queue' | 'veth' | 'nftables';

/** Options of {@link blackhole}. */
export interface BlackholeOptions extends PeerOptions {
  /**
   * Default `accept-queue`: it needs no privileges. `veth` and `nftables` need a network namespace
   * of the caller's own; `veth` ignores `host` (it answers for 127.77.N.2).
   */
  mode?: BlackholeMode;
}

/** A peer whose connects hang until the client gives up. */
export interface Blackhole extends FaultPeer {
  readonly mode: BlackholeMode;
  /**
   * Connection attempts seen. `nftables`: exact, one per attempt (distinct source ports of dropped
   * SYNs), plus connections accepted after {@link heal}. `veth`: connects started in this network
   * namespace (`Tcp: ActiveOpens`) until {@link heal}, then connections accepted; exact where the
   * peer is the only thing the namespace dials before it heals. `accept-queue`: SYNs dropped at full
   * accept queues in this network namespace (the kernel's ListenOverflows counter), so it counts
   * SYN retransmissions (the first comes 1 s into a connect) and other full listeners in the same
   * namespace too; exact for sub-second timeouts in a namespace of the test's own.
   */
  readonly attempts: number;
  /** Whether the host has come back. */
  readonly healed: boolean;
  /** The host comes back: from now on connects complete and are echoed. */
  heal(): Promise<void>;
}

/** Starts a blackhole on loopback. */
export async function blackhole(options: BlackholeOptions = {}): Promise<Blackhole> {
  const mode = options.mode ?? 'accept-queue';
  if (mode === 'nftables') return NftBlackhole.start(options);
  if (mode === 'veth') return VethBlackhole.start(options);
  if (mode === 'accept-queue') return AcceptQueueBlackhole.start(options);
  throw new RangeError(`blackhole mode must be 'accept-queue', 'veth' or 'nftables', got ${JSON.stringify(mode)}`);
}

/** The kernel's count of SYNs dropped at full accept queues, in this network namespace. */
function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const names = lines[i]!.split(/\s+/);
    if (names[0] !== 'TcpExt:') continue;
    const at = names.indexOf('ListenOverflows');
    return at < 0 ? 0 : Number(lines[i + 1]!.split(/\s+/)[at]);
  }
  return 0;
}

const WAITING = 0;
const CLOSE = 1;
const HEAL = 2;
/** The shared state's slots: the worker's state, connections it accepted, then the fillers' local ports. */
const STATE = 0;
const ACCEPTED = 1;
const FILLER_COUNT = 2;
const FILLER_PORTS = 3;
/** Most filler connections (see fillAcceptQueue). */
const MAX_FILLERS = 16;

// Runs in the worker. Blocks its event loop in Atomics.wait so the listener is never accepted
// from. On HEAL it raises the listener's backlog (listen() again on the listening socket: its
// backlog of 1 would keep dropping SYNs under load) and accepts from it from then on, echoing;
// the filler connections still queued (their local ports are in the shared state) are closed
// uncounted. The listener is never closed: closing it and binding a new one left a moment with
// nothing on the port, and a connect racing heal() was refused (an outside review, 6 of 2 400).
// A Node whose handle cannot listen again falls back to that close and bind. On CLOSE (or a
// 'close' message after a heal) it closes the listener and every socket and exits.
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const state = new Int32Array(workerData.shared);
const sockets = new Set();
const onConnection = (socket) => {
  const fillers = Atomics.load(state, ${FILLER_COUNT});
  for (let i = 0; i < fillers; i++) {
    if (Atomics.load(state, ${FILLER_PORTS} + i) === socket.remotePort) return void socket.destroy();
  }
  Atomics.add(state, ${ACCEPTED}, 1);
  sockets.add(socket);
  socket.on('error', () => {});
  socket.on('close', () => sockets.delete(socket));
  socket.pipe(socket);
};
let server = net.createServer();
const shutdown = () => {
  for (const s of sockets) s.destroy();
  server.close(() => process.exit(0));
};
parentPort.on('message', (m) => { if (m === 'close') shutdown(); });
server.on('error', (err) => { parentPort.postMessage({ error: err.message, code: err.code }); process.exit(1); });
server.listen({ host: workerData.host, port: workerData.port, backlog: 1 }, () => {
  const port = server.address().port;
  parentPort.postMessage({ port });
  Atomics.wait(state, ${STATE}, ${WAITING});
  if (Atomics.load(state, ${STATE}) === ${CLOSE}) return shutdown();
  const handle = server._handle;
  if (handle !== null && typeof handle.listen === 'function' && handle.listen(511) === 0) {
    server.on('connection', onConnection);
    parentPort.postMessage({ healed: true });
    return;
  }
  server.close();
  server = net.createServer(onConnection);
  server.listen({ host: workerData.host, port }, () => parentPort.postMessage({ healed: true }));
});
`;

class AcceptQueueBlackhole implements Blackhole {
  readonly kind = 'blackhole';
  readonly mode = 'accept-queue' as const;
  readonly host: LoopbackHost;
  readonly port: number;
  readonly #worker: Worker;
  readonly #state: Int32Array;
  readonly #fillers: net.Socket[];
  readonly #dropBase: number;
  #dropsAtHeal: number | undefined;
  /** The heal under way or done: a second heal() waits for the same (it resolved before the worker accepted). */
  #healing: Promise<void> | undefined;
  #exited: Promise<void>;

  private constructor(host: LoopbackHost, port: number, worker: Worker, state: Int32Array, fillers: net.Socket[], exited: Promise<void>) {
    this.host = host;
    this.port = port;
    this.#worker = worker;
    this.#state = state;
    this.#fillers = fillers;
    this.#exited = exited;
    this.#dropBase = listenOverflows();
  }

  static async start(options: BlackholeOptions): Promise<AcceptQueueBlackhole> {
    const host = loopback(options.host);
    const shared = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * (FILLER_PORTS + MAX_FILLERS));
    const worker = new Worker(workerSource, { eval: true, workerData: { shared, host, port: options.port ?? 0 } });
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const port = await new Promise<number>((resolve, reject) => {
      // The listen error's own code kept (EADDRINUSE...), as every other peer's listen error has it.
      worker.once('message', (m: { port?: number; error?: string; code?: string }) =>
        m.port !== undefined ? resolve(m.port) : reject(Object.assign(new Error(`blackhole listen failed: ${m.error}`), m.code === undefined ? {} : { code: m.code })),
      );
      worker.once('error', reject);
    });
    const fillers = await fillAcceptQueue(host, port);
    const state = new Int32Array(shared);
    // Queued still when the worker accepts again at heal: it closes them uncounted.
    fillers.forEach((s, i) => Atomics.store(state, FILLER_PORTS + i, s.localPort ?? 0));
    Atomics.store(state, FILLER_COUNT, fillers.length);
    return new AcceptQueueBlackhole(host, port, worker, state, fillers, exited);
  }

  get address(): string {
    return addressOf(this.host, this.port);
  }

  get healed(): boolean {
    return this.#dropsAtHeal !== undefined;
  }

  get attempts(): number {
    const drops = (this.#dropsAtHeal ?? listenOverflows()) - this.#dropBase;
    return drops + Atomics.load(this.#state, ACCEPTED);
  }

  heal(): Promise<void> {
    // A second caller (a test and its shared afterEach) waits for the first heal's end: it
    // returned at once, with the worker still binding, and a connect then lost its SYN to the
    // old listener and came 1 s later (an outside review: 9 of 10).
    this.#healing ??= this.#heal();
    return this.#healing;
  }

  async #heal(): Promise<void> {
    if (Atomics.load(this.#state, STATE) !== WAITING) return;
    this.#dropsAtHeal = listenOverflows();
    for (const s of this.#fillers) s.destroy();
    const accepting = new Promise<void>((resolve) => {
      const onMessage = (m: { healed?: boolean }): void => {
        if (m.healed !== true) return;
        this.#worker.off('message', onMessage);
        resolve();
      };
      this.#worker.on('message', onMessage);
    });
    Atomics.store(this.#state, STATE, HEAL);
    Atomics.notify(this.#state, STATE);
    await accepting;
  }

  async close(): Promise<void> {
    for (const s of this.#fillers) s.destroy();
    if (Atomics.load(this.#state, STATE) === WAITING) {
      Atomics.store(this.#state, STATE, CLOSE);
      Atomics.notify(this.#state, STATE);
    } else {
      this.#worker.postMessage('close');
    }
    await this.#exited;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Connects until the listener's accept queue is full: the first connect that does not complete
 * within 200 ms proves it (its SYN was dropped), and is abandoned before its first retransmit.
 */
async function fillAcceptQueue(host: string, port: number): Promise<net.Socket[]> {
  const fillers: net.Socket[] = [];
  for (let i = 0; i < MAX_FILLERS; i++) {
    const socket = net.connect({ host, port });
    socket.on('error', () => {});
    const connected = await new Promise<boolean | Error>((resolve) => {
      const timer = setTimeout(() => resolve(false), 200);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        resolve(err);
      });
    });
    if (connected instanceof Error) {
      // Not a dropped SYN: the blackhole would not hang anything (in a fresh network namespace
      // whose loopback is down, every connect failed ENETUNREACH at once, and was taken for a full queue).
      for (const s of fillers) s.destroy();
      const code = (connected as NodeJS.ErrnoException).code ?? connected.message;
      const hint = code === 'ENETUNREACH' ? ': the loopback interface is down (in a fresh network namespace: `ip link set lo up`)' : '';
      throw new Error(`blackhole: a connect to fill the accept queue failed with ${code}${hint}`, { cause: connected });
    }
    if (!connected) {
      socket.destroy();
      return fillers;
    }
    fillers.push(socket);
  }
  for (const s of fillers) s.destroy();
  throw new Error('blackhole: the accept queue never filled (16 connects completed)');
}

let tables = 0;

class NftBlackhole implements Blackhole {
  readonly kind = 'blackhole';
  readonly mode = 'nftables' as const;
  readonly #peer: TcpPeer;
  readonly #table: string;
  #seenAtHeal: number[] | undefined;
  #acceptedBeforeHeal = 0;

  private constructor(peer: TcpPeer, table: string) {
    this.#peer = peer;
    this.#table = table;
  }

  static async start(options: BlackholeOptions): Promise<NftBlackhole> {
    const peer = await echoPeer(options);
    const table = `dialguard_bh_${process.pid}_${++tables}`;
    const daddr = peer.host === '::1' ? 'ip6 daddr ::1' : `ip daddr ${peer.host}`;
    try {
      nft(
        `table inet ${table} {\n` +
          `  set seen { type inet_service; flags dynamic; size 65535; }\n` +
          `  chain input { type filter hook input priority -10; policy accept;\n` +
          `    ${daddr} tcp dport ${peer.port} tcp flags & (syn|ack) == syn add @seen { tcp sport } drop\n` +
          `  }\n}\n`,
      );
    } catch (err) {
      await peer.close();
      throw err;
    }
    return new NftBlackhole(peer, table);
  }

  get host(): LoopbackHost {
    return this.#peer.host;
  }

  get port(): number {
    return this.#peer.port;
  }

  get address(): string {
    return this.#peer.address;
  }

  get healed(): boolean {
    return this.#seenAtHeal !== undefined;
  }

  get attempts(): number {
    if (this.#seenAtHeal === undefined) return setElements(this.#table, 'seen').length;
    return this.#seenAtHeal.length + this.#peer.attempts - this.#acceptedBeforeHeal;
  }

  async heal(): Promise<void> {
    if (this.healed) return;
    this.#seenAtHeal = setElements(this.#table, 'seen');
    this.#acceptedBeforeHeal = this.#peer.attempts;
    nft(`delete table inet ${this.#table}\n`);
  }

  async close(): Promise<void> {
    if (!this.healed) {
      this.#seenAtHeal = [];
      nft(`delete table inet ${this.#table}\n`);
    }
    await this.#peer.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The veth blackhole could not be set up: iproute2 missing, no CAP_NET_ADMIN, or not a namespace of the test's own. */
export class VethUnavailableError extends Error {
  override readonly name = 'VethUnavailableError';
  /** Stable code. */
  readonly code = 'DIALGUARD_VETH_UNAVAILABLE';
}

/** Runs `ip <args>`; throws {@link VethUnavailableError} with ip's own message. */
function ip(args: readonly string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 5_000 });
  if (r.error !== undefined || r.status !== 0) {
    const why = r.error?.message ?? r.stderr.trim();
    throw new VethUnavailableError(
      `ip ${args.join(' ')} failed (${why}). The veth blackhole needs iproute2 (Debian: apt-get install iproute2) and ` +
        'CAP_NET_ADMIN in a network namespace of its own: run inside `unshare --user --map-root-user --net`.',
    );
  }
  return r.stdout;
}

/** The kernel's count of connects started (SYN sent) in this network namespace. */
function activeOpens(): number {
  const lines = readFileSync('/proc/net/snmp', 'utf8').split('\n');
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const names = lines[i]!.split(/\s+/);
    if (names[0] !== 'Tcp:') continue;
    return Number(lines[i + 1]!.split(/\s+/)[names.indexOf('ActiveOpens')]);
  }
  throw new VethUnavailableError('no Tcp: ActiveOpens in /proc/net/snmp');
}

/** The locally administered MAC that no interface has: frames to it are dropped at the far end. */
const ABSENT_MAC = '02:00:00:00:00:09';
let veths = 0;

/**
 * Refuses to touch a namespace that has links other than loopback and our own veth pairs: the
 * machine's own namespace always has some, a fresh `unshare --net` has none.
 */
function assertOwnNamespace(): void {
  const links = ip(['-o', 'link', 'show'])
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.split(':')[1]!.trim().split('@')[0]!);
  const foreign = links.filter((l) => l !== 'lo' && !/^dgbh\d+[ab]$/.test(l));
  if (foreign.length > 0) {
    throw new VethUnavailableError(
      `the veth blackhole runs only in a network namespace of the test's own (this one has ${foreign.join(', ')}): ` +
        'run inside `unshare --user --map-root-user --net`',
    );
  }
}

class VethBlackhole implements Blackhole {
  readonly kind = 'blackhole';
  readonly mode = 'veth' as const;
  readonly host: LoopbackHost;
  readonly port: number;
  readonly #link: string;
  readonly #opensBase: number;
  #opensAtHeal: number | undefined;
  #peer: EchoOn | undefined;
  #healing: Promise<void> | undefined;
  #closed = false;

  private constructor(host: LoopbackHost, port: number, link: string) {
    this.host = host;
    this.port = port;
    this.#link = link;
    this.#opensBase = activeOpens();
  }

  static async start(options: BlackholeOptions): Promise<VethBlackhole> {
    assertOwnNamespace();
    // A fresh `unshare --net` has its loopback down (its local table empty: "FIB table does not
    // exist" below); the namespace is the test's own, so it is brought up here.
    ip(['link', 'set', 'lo', 'up']);
    const n = ++veths % 250;
    const link = `dgbh${n}a`;
    const host = `127.77.${n}.2` as const;
    // 127.0.0.0/8 is local to lo as a whole; narrow that to 127.0.0.1 so 127.77.N.2 routes out.
    if (ip(['route', 'show', 'table', 'local', '127.0.0.0/8']).includes('local')) {
      ip(['route', 'del', 'local', '127.0.0.0/8', 'dev', 'lo', 'table', 'local']);
    }
    ip(['link', 'add', link, 'type', 'veth', 'peer', 'name', `dgbh${n}b`]);
    try {
      writeFileSync(`/proc/sys/net/ipv4/conf/${link}/route_localnet`, '1');
      for (const end of [link, `dgbh${n}b`]) writeFileSync(`/proc/sys/net/ipv6/conf/${end}/disable_ipv6`, '1');
      ip(['addr', 'add', `127.77.${n}.1/24`, 'dev', link]);
      ip(['link', 'set', link, 'up']);
      ip(['link', 'set', `dgbh${n}b`, 'up']);
      ip(['neigh', 'add', host, 'lladdr', ABSENT_MAC, 'dev', link, 'nud', 'permanent']);
    } catch (err) {
      spawnSync('ip', ['link', 'del', link], { timeout: 5_000 });
      throw err instanceof VethUnavailableError ? err : new VethUnavailableError(`veth blackhole setup failed: ${String(err)}`);
    }
    return new VethBlackhole(host, options.port ?? (await freePort()), link);
  }

  get address(): string {
    return addressOf(this.host, this.port);
  }

  get healed(): boolean {
    return this.#opensAtHeal !== undefined;
  }

  get attempts(): number {
    return (this.#opensAtHeal ?? activeOpens()) - this.#opensBase + (this.#peer?.attempts ?? 0);
  }

  heal(): Promise<void> {
    this.#healing ??= this.#heal(); // a second caller waits for the same (see AcceptQueueBlackhole.heal)
    return this.#healing;
  }

  async #heal(): Promise<void> {
    if (this.#closed) return;
    this.#opensAtHeal = activeOpens();
    // The address becomes local (connects to it stay on this host) and an echo listener takes it.
    ip(['neigh', 'del', this.host, 'dev', this.#link]);
    ip(['addr', 'add', `${this.host}/32`, 'dev', this.#link]);
    this.#peer = await echoPeerOn(this.host, this.port);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#opensAtHeal ??= activeOpens();
    await this.#peer?.close();
    ip(['link', 'del', this.#link]);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** A minimal echo listener on the healed 127.77.N.2 (TcpPeer binds 127.0.0.1 and ::1 only). */
interface EchoOn {
  readonly attempts: number;
  close(): Promise<void>;
}

async function echoPeerOn(host: string, port: number): Promise<EchoOn> {
  let attempts = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ noDelay: true }, (socket) => {
    attempts++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    socket.pipe(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => resolve());
  });
  return {
    get attempts() {
      return attempts;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
