/**
 * Identifiers: a prefix and 32 lowercase hex characters (16 random bytes from Web Crypto).
 *
 * @module
 */
import { bytesToHex } from '@noble/hashes/utils.js';

/** The kinds of id the kernel mints. */
export type IdPrefix = 'act' | 'apr' | 'ctr' | 'dlg';

/** A source of new ids; injected so tests are deterministic. */
export type IdSource = (prefix: IdPrefix) => string;

/** Random bytes fetched at once: one `getRandomValues` call per 256 ids rather than one per id. */
const POOL_BYTES = 4096;
const ID_BYTES = 16;
let pool: Uint8Array | null = null;
let offset = POOL_BYTES;

/** The next 16 unused random bytes of the pool, refilled from Web Crypto when spent; each byte is handed out once. */
function nextRandom(): Uint8Array {
  if (offset + ID_BYTES > POOL_BYTES) {
    const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
    if (!c?.getRandomValues) throw new Error('[kernel] globalThis.crypto.getRandomValues is required to mint ids');
    pool ??= new Uint8Array(POOL_BYTES);
    c.getRandomValues(pool);
    offset = 0;
  }
  const bytes = pool!.subarray(offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return bytes;
}

/** `act_`/`apr_`/`ctr_`/`dlg_` + 32 hex from `crypto.getRandomValues` (drawn from a pooled 4 KiB buffer). */
export const randomIds: IdSource = (prefix) => `${prefix}_${bytesToHex(nextRandom())}`;

/** Deterministic ids for tests: `act_000…001`, `act_000…002`, … per prefix. */
export function sequentialIds(): IdSource {
  const counters = new Map<IdPrefix, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${n.toString(16).padStart(32, '0')}`;
  };
}
