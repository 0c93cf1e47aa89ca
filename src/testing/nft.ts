/**
 * Small nftables helpers for fault peers that drop or count packets. They need CAP_NET_ADMIN in
 * the current network namespace: run them inside a namespace the test made
 * (`unshare --user --map-root-user --net`), never against the machine's own.
 *
 * @module
 */
import { spawnSync } from 'node:child_process';

/** nft is missing or the namespace does not grant CAP_NET_ADMIN. */
export class NftUnavailableError extends Error {
  override readonly name = 'NftUnavailableError';
}

/** Runs an nft script (`nft -f -`); throws {@link NftUnavailableError} with nft's own message. */
export function nft(script: string): void {
  const r = spawnSync('nft', ['-f', '-'], { input: script, encoding: 'utf8', timeout: 5_000 });
  if (r.error !== undefined || r.status !== 0) {
    const why = r.error?.message ?? r.stderr.trim();
    throw new NftUnavailableError(
      `nftables failed (${why}). Packet-level fault peers need the nft binary (Debian: nftables) and ` +
        'CAP_NET_ADMIN in this network namespace: run inside `unshare --user --map-root-user --net`.',
    );
  }
}

/** Runs `nft -j <args>` and returns the parsed JSON. */
export function nftJson(args: readonly string[]): unknown {
  const r = spawnSync('nft', ['-j', ...args], { encoding: 'utf8', timeout: 5_000 });
  if (r.error !== undefined || r.status !== 0) throw new NftUnavailableError(r.error?.message ?? r.stderr.trim());
  return JSON.parse(r.stdout) as unknown;
}

/** Whether nft can change rules here (binary present and CAP_NET_ADMIN held in this namespace). */
export function nftUsable(): boolean {
  const table = `dialguard_probe_${process.pid}`;
  try {
    nft(`add table inet ${table}\ndelete table inet ${table}\n`);
    return true;
  } catch {
    return false;
  }
}

/** The elements of a set of `inet_service` (ports), e.g. source ports of dropped SYNs. */
export function setElements(table: string, set: string): number[] {
  const doc = nftJson(['list', 'set', 'inet', table, set]) as { nftables: Array<{ set?: { elem?: unknown[] } }> };
  const found = doc.nftables.find((x) => x.set !== undefined)?.set;
  return (found?.elem ?? []).filter((e): e is number => typeof e === 'number');
}
