/**
 * SHA-256 hashes in the `sha256:<64 hex>` form, over canonical bytes only.
 *
 * @module
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { canonicalBytes } from './canonical.js';

/** The hash every chain starts from: `sha256:` and 64 zeros. */
export const GENESIS_HASH = `sha256:${'0'.repeat(64)}`;

/** `sha256:` + lowercase hex of SHA-256 over `bytes`. */
export function sha256Tagged(bytes: Uint8Array): string {
  return `sha256:${bytesToHex(sha256(bytes))}`;
}

/** `sha256:` + hex of SHA-256 over the canonical bytes of `doc`. */
export function hashDocument(doc: unknown, path = 'document'): string {
  return sha256Tagged(canonicalBytes(doc, path));
}
