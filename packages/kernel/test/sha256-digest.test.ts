// A host's own SHA-256 (useSha256Digest): taken only when it agrees with SHA-256, then used for every hash.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { createAction, InvalidArgument } from '@ctrlrun/kernel';
import { sha256Tagged, useSha256Digest, type Sha256Digest, type Sha256TextDigest } from '@ctrlrun/kernel/store';
import { sha256TaggedText } from '../src/hash.js';

let restore: Sha256Digest | null = null;
afterEach(() => {
  if (restore !== null) useSha256Digest(restore);
  restore = null;
});

const ABC = 'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';

describe('useSha256Digest', () => {
  it('takes a correct digest, hashes with it from then on, and returns the one it replaced', () => {
    let calls = 0;
    const counting: Sha256Digest = (bytes) => (calls++, sha256(bytes));
    restore = useSha256Digest(counting);
    const probes = calls;
    expect(sha256Tagged(new TextEncoder().encode('abc'))).toBe(ABC);
    expect(calls).toBe(probes + 1);
    createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1' }, principal: { agent: 'a' } });
    expect(calls).toBe(probes + 2);
    expect(useSha256Digest(restore)).toBe(counting);
    restore = null;
  });

  const wrong: [string, Sha256Digest][] = [
    ['all zeros', () => new Uint8Array(32)],
    ['a 20-byte digest', (b) => sha256(b).slice(0, 20)],
    ['a number array', (b) => Array.from(sha256(b)) as unknown as Uint8Array],
    [
      'one that throws',
      () => {
        throw new Error('no hash here');
      },
    ],
    // Reads the whole buffer under a view: wrong for a view at an offset.
    ['one that ignores the view', (b) => sha256(new Uint8Array(b.buffer))],
    // Right for short inputs only: the long probes and the padding edges catch it.
    ['one that hashes the first 64 bytes', (b) => sha256(b.subarray(0, 64))],
    ['one that is off after 55 bytes', (b) => (b.length === 56 ? sha256(b.subarray(0, 55)) : sha256(b))],
    // Uses its input as scratch space, then hashes what it left there: compared with SHA-256 of
    // the input as it was given, not as it was left.
    ['one that overwrites its input before hashing it', (b) => sha256(b.fill(0))],
    // Right hashes, but the caller's bytes are not the bytes it gave any more.
    ['one that overwrites its input after hashing it', (b) => ((h) => (b.fill(1), h))(sha256(b))],
    [
      'one that writes past its view',
      (b) => {
        const h = sha256(b);
        if (b.byteOffset > 0) new Uint8Array(b.buffer).fill(7, 0, b.byteOffset);
        return h;
      },
    ],
  ];
  for (const [name, fn] of wrong) {
    it(`refuses ${name}, and keeps the digest in use`, () => {
      let before = 0;
      const counting: Sha256Digest = (bytes) => (before++, sha256(bytes));
      restore = useSha256Digest(counting);
      expect(() => useSha256Digest(fn)).toThrow(InvalidArgument);
      expect(() => useSha256Digest(fn)).toThrow(/SHA-256 digest given .*the digest in use stays/);
      const n = before;
      expect(sha256Tagged(new TextEncoder().encode('abc'))).toBe(ABC);
      expect(before).toBe(n + 1);
    });
  }

  it('refuses what is not a function', () => {
    expect(() => useSha256Digest('sha256' as unknown as Sha256Digest)).toThrow(/must be a function/);
  });

  it('gives the same hashes as the built-in one, for any bytes and any view', () => {
    restore = useSha256Digest((bytes) => sha256(Uint8Array.from(bytes)));
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(16), (bytes, skip) => {
        const view = bytes.subarray(Math.min(skip, bytes.length));
        expect(sha256Tagged(view)).toBe(`sha256:${bytesToHex(sha256(view))}`);
      }),
    );
  });
});

describe('useSha256Digest with a digest of text', () => {
  const hexOf = (text: string) => bytesToHex(sha256(new TextEncoder().encode(text)));

  it('takes a correct one and hashes every action and receipt text with it, as the bytes would hash', () => {
    let texts = 0;
    let bytes = 0;
    restore = useSha256Digest((b) => (bytes++, sha256(b)), { hexOfText: (t) => (texts++, hexOf(t)) });
    const [t0, b0] = [texts, bytes];
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', note: 'é€😀' }, principal: { agent: 'a' } });
    expect([texts, bytes]).toEqual([t0 + 1, b0]);
    expect(action.actionHash).toBe(sha256Tagged(new TextEncoder().encode(action.canonical)));
  });

  it('gives what the bytes give for any well-formed text', () => {
    restore = useSha256Digest(sha256, { hexOfText: hexOf });
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (text) => {
        expect(sha256TaggedText(text)).toBe(sha256Tagged(new TextEncoder().encode(text)));
      }),
    );
  });

  const wrong: [string, Sha256TextDigest][] = [
    ['one that hashes UTF-16 code units', (t) => bytesToHex(sha256(Uint8Array.from(t, (c) => c.charCodeAt(0) & 0xff)))],
    ['one that writes upper-case hex', (t) => hexOf(t).toUpperCase()],
    ['one that adds the sha256: tag', (t) => `sha256:${hexOf(t)}`],
    ['one that is off after 55 characters', (t) => (t.length === 56 ? hexOf(t.slice(0, 55)) : hexOf(t))],
    ['one that returns bytes', (t) => sha256(new TextEncoder().encode(t)) as unknown as string],
    [
      'one that throws',
      () => {
        throw new Error('no text here');
      },
    ],
  ];
  for (const [name, hexOfText] of wrong) {
    it(`refuses ${name}, and keeps both digests in use`, () => {
      let texts = 0;
      restore = useSha256Digest(sha256, { hexOfText: (t) => (texts++, hexOf(t)) });
      expect(() => useSha256Digest(sha256, { hexOfText })).toThrow(/SHA-256 text digest given .*the digest in use stays/);
      const n = texts;
      expect(sha256TaggedText('abc')).toBe(ABC);
      expect(texts).toBe(n + 1);
    });
  }

  it('refuses what is not a function', () => {
    expect(() => useSha256Digest(sha256, { hexOfText: 'hex' as unknown as Sha256TextDigest })).toThrow(/options.hexOfText must be a function/);
  });

  it('is dropped when a digest is given without one: text is then hashed by that digest', () => {
    let texts = 0;
    let bytes = 0;
    restore = useSha256Digest(sha256, { hexOfText: (t) => (texts++, hexOf(t)) });
    useSha256Digest((b) => (bytes++, sha256(b)));
    const [t0, b0] = [texts, bytes];
    expect(sha256TaggedText('abc')).toBe(ABC);
    expect([texts, bytes]).toEqual([t0, b0 + 1]);
  });
});
