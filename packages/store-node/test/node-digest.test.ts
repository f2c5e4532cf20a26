// The Node stores hash with Node's native SHA-256, which agrees with SHA-256 on any input.
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { sha256Tagged, useSha256Digest } from '@ctrlrun/kernel/store';
import { createAction, InvalidArgument } from '@ctrlrun/kernel';
import { BetterSqlite3Driver, type BetterSqlite3Database } from '@ctrlrun/store-node';
import { nodeSha256, nodeSha256Hex } from '../src/node-digest.js';

describe("Node's SHA-256", () => {
  it('is the digest in use once a driver is built', () => {
    const db = new Database(':memory:');
    new BetterSqlite3Driver(db as unknown as BetterSqlite3Database);
    db.close();
    const previous = useSha256Digest(sha256);
    useSha256Digest(previous, { hexOfText: nodeSha256Hex });
    expect(previous).toBe(nodeSha256);
  });

  it('hashes text in one step: hex SHA-256 of its UTF-8, for any well-formed text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 600 }), (text) => {
        expect(nodeSha256Hex(text)).toBe(bytesToHex(sha256(new TextEncoder().encode(text))));
      }),
    );
  });

  it("is accepted as the kernel's digest of text, and an action hashed with it is what the bytes hash to", () => {
    expect(() => useSha256Digest(nodeSha256, { hexOfText: nodeSha256Hex })).not.toThrow();
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', note: 'é€😀' }, principal: { agent: 'a' } });
    expect(action.actionHash).toBe(`sha256:${nodeSha256Hex(action.canonical)}`);
    expect(action.actionHash).toBe(`sha256:${bytesToHex(sha256(new TextEncoder().encode(action.canonical)))}`);
  });

  it('returns SHA-256 of any bytes, at any offset of their buffer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), fc.nat(40), (bytes, skip) => {
        const view = bytes.subarray(Math.min(skip, bytes.length));
        expect(bytesToHex(nodeSha256(view))).toBe(bytesToHex(sha256(view)));
      }),
    );
  });
});

describe('what is hashed', () => {
  // Node's digest hashes a string (as UTF-8) or any view; the built-in one refuses them. The kernel
  // refuses them with either, so a hash never depends on which digest the host installed.
  const notBytes: [string, unknown][] = [
    ['a string', 'abc'],
    ['a Uint16Array', new Uint16Array([1, 2])],
    ['a DataView', new DataView(new ArrayBuffer(4))],
    ['an array of bytes', [1, 2, 3]],
    ['null', null],
  ];
  for (const [name, value] of notBytes) {
    it(`${name} is refused with Node's digest in use, as with the built-in one`, () => {
      const inUse = useSha256Digest(nodeSha256);
      try {
        expect(() => sha256Tagged(value as Uint8Array)).toThrow(InvalidArgument);
        useSha256Digest(sha256);
        expect(() => sha256Tagged(value as Uint8Array)).toThrow(InvalidArgument);
      } finally {
        useSha256Digest(inUse);
      }
    });
  }

  it('a Buffer (a Uint8Array) is hashed as its bytes', () => {
    expect(sha256Tagged(Buffer.from('abc'))).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
