// The Node stores hash with Node's native SHA-256, which agrees with SHA-256 on any input.
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { useSha256Digest } from '@ctrlrun/kernel/store';
import { BetterSqlite3Driver, type BetterSqlite3Database } from '@ctrlrun/store-node';
import { nodeSha256 } from '../src/node-digest.js';

describe("Node's SHA-256", () => {
  it('is the digest in use once a driver is built', () => {
    const db = new Database(':memory:');
    new BetterSqlite3Driver(db as unknown as BetterSqlite3Database);
    db.close();
    const previous = useSha256Digest(sha256);
    useSha256Digest(previous);
    expect(previous).toBe(nodeSha256);
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
