/**
 * dialguard/testing: fault peers on loopback and a manual clock, for testing a client against
 * hosts that are dead, silent or hostile. Every peer counts the connections it sees, so a test can
 * count dials instead of only timing them.
 *
 * @module
 */
export { ManualClock, flushMicrotasks } from './manual-clock.js';
export {
  type FaultPeer,
  type LoopbackHost,
  type PeerOptions,
  type RefusingPeer,
  TcpPeer,
  acceptAndHold,
  echoPeer,
  refusing,
  resetOnAccept,
} from './tcp-peers.js';
export { type Blackhole, type BlackholeMode, type BlackholeOptions, VethUnavailableError, blackhole } from './blackhole.js';
export { NftUnavailableError, nft, nftUsable } from './nft.js';
export { type Http2Handler, Http2Peer, type Http2PeerOptions, http2Peer } from './http2-peer.js';
export { TEST_CERT, TEST_KEY } from './test-cert.js';
export { type HttpHandler, HttpPeer, type HttpPeerOptions, httpPeer } from './http-peer.js';
export { seededRandom } from './seeded-random.js';
