/**
 * Blackhole peers: a connect to them never completes, because the SYN is dropped. The client
 * retransmits until its own timeout, exactly as against a host that vanished from the network.
 *
 * Two ways to drop a SYN:
 * - `accept-queue` (unprivileged): a listener with a backlog of 1 in a worker thread whose event
 *   loop is blocked, so it never accepts; the queue is filled once, and the kernel drops every
 *   later SYN. Works anywhere, on the machine's loopback.
 * - `nftables`: a drop rule for the port, inside a network namespace the caller created (needs
 *   CAP_NET_ADMIN there). Counts each attempt exactly.
 *
 * Either can {@link Blackhole.heal}: the host comes back and accepts (as an echo peer).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { nft, setElements } from './nft.js';
import { type FaultPeer, type PeerOptions, addressOf, echoPeer, loopback, type LoopbackHost, type TcpPeer } from './tcp-peers.js';

/** How the blackhole drops SYNs. */
export type BlackholeMode = 'accept-queue' | 'nftables';

/** Options of {@link blackhole}. */
export interface BlackholeOptions extends PeerOptions {
  /** Default `accept-queue` (needs no privileges). */
  mode?: BlackholeMode;
}

/** A peer whose connects hang until the client gives up. */
export interface Blackhole extends FaultPeer {
  readonly mode: BlackholeMode;
  /**
   * Connection attempts seen. `nftables`: exact, one per attempt (distinct source ports of dropped
   * SYNs), plus connections accepted after {@link heal}. `accept-queue`: SYNs dropped at full
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
  if (mode === 'accept-queue') return AcceptQueueBlackhole.start(options);
  throw new RangeError(`blackhole mode must be 'accept-queue' or 'nftables', got ${JSON.stringify(mode)}`);
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

// Runs in the worker. Blocks its event loop in Atomics.wait so the listener is never accepted
// from. On HEAL it closes that listener (its backlog of 1 would keep dropping SYNs under load)
// and binds a normal one on the same port that echoes; on CLOSE (or a 'close' message after a
// heal) it closes the listener and every socket and exits.
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const state = new Int32Array(workerData.shared);
const sockets = new Set();
const onConnection = (socket) => {
  Atomics.add(state, 1, 1);
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
server.on('error', (err) => { parentPort.postMessage({ error: err.message }); process.exit(1); });
server.listen({ host: workerData.host, port: workerData.port, backlog: 1 }, () => {
  const port = server.address().port;
  parentPort.postMessage({ port });
  Atomics.wait(state, 0, ${WAITING});
  if (Atomics.load(state, 0) === ${CLOSE}) return shutdown();
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
    const shared = new SharedArrayBuffer(8);
    const worker = new Worker(workerSource, { eval: true, workerData: { shared, host, port: options.port ?? 0 } });
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('message', (m: { port?: number; error?: string }) =>
        m.port !== undefined ? resolve(m.port) : reject(new Error(`blackhole listen failed: ${m.error}`)),
      );
      worker.once('error', reject);
    });
    const fillers = await fillAcceptQueue(host, port);
    return new AcceptQueueBlackhole(host, port, worker, new Int32Array(shared), fillers, exited);
  }

  get address(): string {
    return addressOf(this.host, this.port);
  }

  get healed(): boolean {
    return this.#dropsAtHeal !== undefined;
  }

  get attempts(): number {
    const drops = (this.#dropsAtHeal ?? listenOverflows()) - this.#dropBase;
    return drops + Atomics.load(this.#state, 1);
  }

  async heal(): Promise<void> {
    if (this.healed || Atomics.load(this.#state, 0) !== WAITING) return;
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
    Atomics.store(this.#state, 0, HEAL);
    Atomics.notify(this.#state, 0);
    await accepting;
  }

  async close(): Promise<void> {
    for (const s of this.#fillers) s.destroy();
    if (Atomics.load(this.#state, 0) === WAITING) {
      Atomics.store(this.#state, 0, CLOSE);
      Atomics.notify(this.#state, 0);
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
  for (let i = 0; i < 16; i++) {
    const socket = net.connect({ host, port });
    socket.on('error', () => {});
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 200);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
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
