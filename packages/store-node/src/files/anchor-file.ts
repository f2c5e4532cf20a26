/**
 * Anchors in an append-only JSONL file (spec 05 §5.2), meant for another volume than the store's
 * (another disk, a mounted share, a WORM bucket's mount): one line per anchor,
 * `{"seq","hash","token","kind","at"}`, appended with `O_APPEND` and flushed (`fsync`) before the
 * anchor is answered. Nothing is ever rewritten. A line that cannot be read makes every read
 * fail (verification is then "unavailable", never ok): the file is evidence, and a damaged one is
 * not silently skipped.
 *
 * @module
 */
import { closeSync, fsyncSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { checkAnchor, InvalidArgument, type Anchor, type AnchorProvider } from '@ctrlrun/kernel';
import { openForAppend, readRegularFile, UnreadableFile } from './regular-file.js';

/** The largest anchor file read (about a million anchors). */
const MAX_FILE_BYTES = 256 * 1024 * 1024;

/** Options of {@link jsonlAnchorProvider}. */
export interface JsonlAnchorOptions {
  /** The clock of the provider's time (default: the system's). */
  readonly clock?: () => Date;
}

/** An {@link AnchorProvider} over an append-only JSONL file at `path` (created on the first anchor). */
export function jsonlAnchorProvider(path: string, options: JsonlAnchorOptions = {}): AnchorProvider {
  if (typeof path !== 'string' || path === '') throw new InvalidArgument('the anchor file path must be a non-empty string');
  const clock = options.clock ?? (() => new Date());

  function read(): Anchor[] {
    let text: string;
    try {
      text = readRegularFile(path, { maxBytes: MAX_FILE_BYTES });
    } catch (err) {
      if (err instanceof UnreadableFile && err.reason === 'missing') return [];
      throw new Error(`the anchor file cannot be read: ${(err as Error).message}`, { cause: err });
    }
    const lines = text.split('\n');
    // The last piece is empty after a final newline, or a line cut short while being written (never answered, so not an anchor).
    lines.pop();
    const anchors: Anchor[] = [];
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new Error(`the anchor file's line ${i + 1} is not JSON`);
      }
      anchors.push(checkAnchor(value, `the anchor file's line ${i + 1}`));
    });
    return anchors;
  }

  return {
    name: `file ${path}`,
    async make(seq, hash, kind) {
      const token = `anc_${randomBytes(16).toString('hex')}`;
      const at = clock().toISOString();
      const anchor = checkAnchor({ seq, hash, token, kind, at }, 'the new anchor');
      const fd = openForAppend(path);
      try {
        writeSync(fd, `${JSON.stringify(anchor)}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      return { token, at };
    },
    async check(seq, hash, token) {
      return read().some((a) => a.token === token && a.seq === seq && a.hash === hash);
    },
    async latest() {
      let best: Anchor | null = null;
      for (const a of read()) if (best === null || a.seq > best.seq) best = a;
      return best;
    },
    async since(seq) {
      return read()
        .filter((a) => a.seq >= seq)
        .sort((a, b) => a.seq - b.seq);
    },
  };
}
