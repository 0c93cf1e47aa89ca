/**
 * The one default bound on a dial, shared by every entry point (`dial`, `connect`,
 * `ConnectionPool`, `Http2Client`, the undici, node:http and gRPC adapters).
 *
 * @module
 */

/**
 * Default bound on one dial (lookup + TCP + TLS + protocol handshake together), 2 500 ms. A live
 * host answers in milliseconds (a cross-region TLS handshake well under a second, and a lost SYN
 * is resent after 1 s, inside the bound), while a dead one costs 2.5 s a dial: half of seed 000's
 * 5 s (paid six times a request), and an adapter call's three attempts with their backoff stay
 * under undici's single 10 s connect timeout (issue 11), instead of the kernel's ~130 s.
 */
export const DEFAULT_CONNECT_TIMEOUT = 2_500;
