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

/** `act_`/`apr_`/`ctr_`/`dlg_` + 32 hex from `crypto.getRandomValues`. */
export const randomIds: IdSource = (prefix) => {
  const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
  if (!c?.getRandomValues) throw new Error('[kernel] globalThis.crypto.getRandomValues is required to mint ids');
  return `${prefix}_${bytesToHex(c.getRandomValues(new Uint8Array(16)))}`;
};

/** Deterministic ids for tests: `act_000…001`, `act_000…002`, … per prefix. */
export function sequentialIds(): IdSource {
  const counters = new Map<IdPrefix, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${n.toString(16).padStart(32, '0')}`;
  };
}
