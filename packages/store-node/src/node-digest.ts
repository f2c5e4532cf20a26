/**
 * Node's native SHA-256 for the kernel's hashes (action hashes, receipt seals, chain checks):
 * about three times as quick as the JavaScript one it replaces, and checked against it by the
 * kernel before it is taken. Each driver here installs it when it is built, so that whatever
 * runs a Node store hashes natively — an import alone would be dropped by a bundler
 * (`sideEffects: false`).
 *
 * @module
 */
import * as crypto from 'node:crypto';
import { useSha256Digest } from '@ctrlrun/kernel/store';

/** SHA-256 of `bytes` by Node's crypto. */
export function nodeSha256(bytes: Uint8Array): Uint8Array {
  return crypto.createHash('sha256').update(bytes).digest();
}

/** Node's one-step hash (Node 20.12 and later): hex of SHA-256 over the text's UTF-8, with no Hash object and no byte copy. */
const oneStep = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

/** Hex SHA-256 of `text`'s UTF-8 by Node's crypto. */
export function nodeSha256Hex(text: string): string {
  return oneStep === undefined ? crypto.createHash('sha256').update(text, 'utf8').digest('hex') : oneStep('sha256', text, 'hex');
}

let installed = false;

/** Makes {@link nodeSha256} the kernel's digest, and {@link nodeSha256Hex} its digest of text (once per process). */
export function installNodeSha256(): void {
  if (installed) return;
  useSha256Digest(nodeSha256, { hexOfText: nodeSha256Hex });
  installed = true;
}
