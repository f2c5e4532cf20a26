/**
 * SHA-256 hashes in the `sha256:<64 hex>` form, over canonical bytes only.
 *
 * The digest is `@noble/hashes`' SHA-256 unless a host hands over its own with
 * {@link useSha256Digest} (the Node stores do: Node's native one is about three times as quick),
 * and a digest is only taken after it agreed with that one on inputs that cross every padding
 * boundary.
 *
 * @module
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { canonicalBytes } from './canonical.js';
import { InvalidArgument } from './errors.js';

/** The hash every chain starts from: `sha256:` and 64 zeros. */
export const GENESIS_HASH = `sha256:${'0'.repeat(64)}`;

/** A SHA-256 function: the 32-byte digest of `bytes` (any view, at any offset of its buffer). */
export type Sha256Digest = (bytes: Uint8Array) => Uint8Array;

/** A SHA-256 of text: lowercase hex of SHA-256 over the UTF-8 bytes of `text` (well-formed text only). */
export type Sha256TextDigest = (text: string) => string;

let digest: Sha256Digest = sha256;
/** The host's one-step digest of text, when it gave one with the digest in use. */
let textDigest: Sha256TextDigest | null = null;

const utf8 = new TextEncoder();

/** Texts a host's text digest must agree on: the same lengths as the byte probes, and multi-byte characters across the edges. */
function textProbes(): string[] {
  const ascii = Array.from({ length: 1031 }, (_, i) => String.fromCharCode(32 + ((i * 131 + 7) % 95))).join('');
  const wide = 'é€😀\u0000\n"\\'.repeat(40);
  return ['', 'abc', ...[55, 56, 63, 64, 65, 119, 120].map((n) => ascii.slice(0, n)), ascii, wide, ...[1, 2, 3].map((n) => ascii.slice(0, 55 - n) + wide)];
}

/** Inputs a replacement digest must agree on: empty, short, each side of the 55/56 and 64-byte padding edges, long, and a view at an odd offset. */
function probes(): Uint8Array[] {
  const long = new Uint8Array(1031);
  for (let i = 0; i < long.length; i++) long[i] = (i * 131 + 7) & 0xff;
  return [
    new Uint8Array(0),
    new TextEncoder().encode('abc'),
    ...[55, 56, 63, 64, 65, 119, 120].map((n) => long.slice(0, n)),
    long,
    new Uint8Array(long.buffer, 3, 200),
  ];
}

/**
 * Hashes with `fn` from now on instead of the built-in JavaScript SHA-256 — for a host with a
 * quicker one of its own. `fn` is first run on known inputs and must return what SHA-256 returns
 * for each, leaving the input's bytes (its whole buffer) as they were; otherwise it is refused
 * with `InvalidArgument` and the digest in use stays. Returns the digest it replaced.
 *
 * `options.hexOfText` is the same host's SHA-256 of text in one step (UTF-8 in, lowercase hex
 * out), for the texts the kernel hashes most (actions, receipts); it is checked the same way, on
 * known texts. Without it, text is encoded and handed to `fn`.
 */
export function useSha256Digest(fn: Sha256Digest, options: { hexOfText?: Sha256TextDigest } = {}): Sha256Digest {
  if (typeof fn !== 'function') throw new InvalidArgument('the SHA-256 digest must be a function (bytes: Uint8Array) => Uint8Array');
  for (const input of probes()) {
    // What SHA-256 gives, and the input's whole buffer, taken before `fn` sees it: a digest that
    // writes into its input (or past its view) must not be compared with SHA-256 of what it left there.
    const before = bytesToHex(new Uint8Array(input.buffer));
    const expected = bytesToHex(sha256(input));
    let out: unknown;
    try {
      out = fn(input);
    } catch (err) {
      throw new InvalidArgument(
        `the SHA-256 digest given threw on a ${input.length}-byte input (${err instanceof Error ? err.message : String(err)}); the digest in use stays`,
      );
    }
    if (!(out instanceof Uint8Array) || out.length !== 32 || bytesToHex(out) !== expected) {
      throw new InvalidArgument(`the SHA-256 digest given does not return SHA-256 of a ${input.length}-byte input; the digest in use stays`);
    }
    if (bytesToHex(new Uint8Array(input.buffer)) !== before) {
      throw new InvalidArgument(`the SHA-256 digest given wrote into its ${input.length}-byte input; the digest in use stays`);
    }
  }
  const hexOfText = options?.hexOfText;
  if (hexOfText !== undefined) {
    if (typeof hexOfText !== 'function') throw new InvalidArgument('options.hexOfText must be a function (text: string) => string');
    for (const text of textProbes()) {
      const expected = bytesToHex(sha256(utf8.encode(text)));
      let out: unknown;
      try {
        out = hexOfText(text);
      } catch (err) {
        throw new InvalidArgument(
          `the SHA-256 text digest given threw on a ${text.length}-character text (${err instanceof Error ? err.message : String(err)}); the digest in use stays`,
        );
      }
      if (out !== expected) {
        throw new InvalidArgument(
          `the SHA-256 text digest given does not return the hex SHA-256 of a ${text.length}-character text's UTF-8; the digest in use stays`,
        );
      }
    }
  }
  const replaced = digest;
  digest = fn;
  textDigest = hexOfText ?? null;
  return replaced;
}

/** Whether `v` is a Uint8Array (of this realm or another), the only input a hash is taken of. */
function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array || (ArrayBuffer.isView(v) && v.constructor?.name === 'Uint8Array');
}

/**
 * `sha256:` + lowercase hex of SHA-256 over `bytes`. Anything but a Uint8Array is refused, with
 * whichever digest is in use (a host's may take a string or another view, the built-in does not).
 */
export function sha256Tagged(bytes: Uint8Array): string {
  if (!isBytes(bytes)) {
    const given = bytes === null ? 'null' : ArrayBuffer.isView(bytes) ? 'another kind of view' : Array.isArray(bytes) ? 'an array' : `a ${typeof bytes}`;
    throw new InvalidArgument(`a SHA-256 hash is taken of a Uint8Array, not ${given}`);
  }
  return `sha256:${bytesToHex(digest(bytes))}`;
}

/**
 * `sha256:` + lowercase hex of SHA-256 over the UTF-8 bytes of `text`, which must be well formed
 * (canonical text always is): the same as `sha256Tagged` of its encoding, in one step where the
 * host gave a text digest.
 */
export function sha256TaggedText(text: string): string {
  return textDigest === null ? sha256Tagged(utf8.encode(text)) : `sha256:${textDigest(text)}`;
}

/** `sha256:` + hex of SHA-256 over the canonical bytes of `doc`. */
export function hashDocument(doc: unknown, path = 'document'): string {
  return sha256Tagged(canonicalBytes(doc, path));
}
