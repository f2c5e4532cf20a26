/**
 * `jsonlFileSink(dir, options)`: the kernel's JSONL sink writing `events.jsonl` and
 * `receipts.jsonl` in a directory, each rotated by size.
 *
 * Rotation: before a line would take a file past `maxBytes`, the file is renamed `NAME.1` (an
 * existing `NAME.1` becomes `NAME.2`, and so on; the one past `maxFiles` is overwritten, so the
 * oldest is dropped) and a new file is started. A line is never split; a line longer than
 * `maxBytes` is written alone into a fresh file. Sizes are read from the open file before each
 * append, so a directory reopened later rotates at the same size. One process writes a
 * directory: two writers would rotate under each other.
 *
 * Durability (`fsync`): each line is handed to the operating system in `write(2)` calls on a
 * file opened for append before the sink returns — after that, a crash of this process loses
 * nothing. With `fsync: false` (the default) the operating system may still lose the last lines
 * if the machine itself stops (power loss, kernel panic). With `fsync: true` each append is
 * followed by `fsync(2)` of the file, and each rotation by `fsync(2)` of the directory (so the
 * renames survive too); a line the sink returned from is then on disk, at the cost of one disk
 * flush per event and receipt. Either way the store, not the JSONL copy, is the record.
 *
 * @module
 */
import fs from 'node:fs';
import { join } from 'node:path';
import { openForAppend } from './regular-file.js';
import { InvalidArgument, jsonlSink, type EventSink, type JsonlFile, type JsonlWriter } from '@ctrlrun/kernel';

/** Options of {@link jsonlFileSink} and {@link jsonlFileWriter}. */
export interface JsonlFileOptions {
  /** Rotate before a line would take a file past this many bytes (64 MiB); `null`: never rotate. */
  maxBytes?: number | null;
  /** Rotated files kept per stream, `NAME.1` (newest) to `NAME.<maxFiles>` (5); 0 keeps none. */
  maxFiles?: number;
  /** `fsync(2)` after every line and after every rotation (false); see the module notes. */
  fsync?: boolean;
}

/** A {@link JsonlWriter} that owns open files: close it when done. */
export interface JsonlFileWriter extends JsonlWriter {
  close(): void;
}

class RotatingFile {
  readonly #dir: string;
  readonly #path: string;
  readonly #maxBytes: number | null;
  readonly #maxFiles: number;
  readonly #fsync: boolean;
  #fd: number | null = null;

  constructor(dir: string, name: string, maxBytes: number | null, maxFiles: number, fsync: boolean) {
    this.#dir = dir;
    this.#path = join(dir, name);
    this.#maxBytes = maxBytes;
    this.#maxFiles = maxFiles;
    this.#fsync = fsync;
  }

  #open(): number {
    if (this.#fd === null) {
      try {
        // A FIFO or device planted in place of the file is refused, never waited on.
        this.#fd = openForAppend(this.#path);
      } catch (err) {
        throw new InvalidArgument(`${this.#path} cannot be appended to: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
    }
    return this.#fd;
  }

  append(line: string): void {
    const bytes = Buffer.from(line, 'utf8');
    let fd = this.#open();
    const size = fs.fstatSync(fd).size;
    if (this.#maxBytes !== null && size > 0 && size + bytes.length > this.#maxBytes) {
      this.#rotate();
      fd = this.#open();
    }
    for (let at = 0; at < bytes.length;) at += fs.writeSync(fd, bytes, at);
    if (this.#fsync) fs.fsyncSync(fd);
  }

  #rotate(): void {
    this.close();
    if (this.#maxFiles === 0) {
      fs.rmSync(this.#path, { force: true });
    } else {
      for (let i = this.#maxFiles - 1; i >= 1; i--) {
        if (fs.existsSync(`${this.#path}.${i}`)) fs.renameSync(`${this.#path}.${i}`, `${this.#path}.${i + 1}`);
      }
      fs.renameSync(this.#path, `${this.#path}.1`);
    }
    if (this.#fsync) {
      const dirFd = fs.openSync(this.#dir, 'r');
      try {
        fs.fsyncSync(dirFd);
      } finally {
        fs.closeSync(dirFd);
      }
    }
  }

  close(): void {
    if (this.#fd === null) return;
    const fd = this.#fd;
    this.#fd = null;
    fs.closeSync(fd);
  }
}

/** The file-backed writer behind {@link jsonlFileSink}; creates `dir` if needed. */
export function jsonlFileWriter(dir: string, options: JsonlFileOptions = {}): JsonlFileWriter {
  if (typeof dir !== 'string' || dir === '') throw new InvalidArgument('jsonlFileSink needs a directory path');
  if (options === null || typeof options !== 'object') throw new InvalidArgument('jsonlFileSink options must be an object');
  const maxBytes = options.maxBytes === undefined ? 64 * 1024 * 1024 : options.maxBytes;
  if (maxBytes !== null && (!Number.isSafeInteger(maxBytes) || maxBytes < 1)) throw new InvalidArgument('maxBytes must be a positive integer or null');
  const maxFiles = options.maxFiles ?? 5;
  if (!Number.isSafeInteger(maxFiles) || maxFiles < 0 || maxFiles > 1000) throw new InvalidArgument('maxFiles must be an integer from 0 to 1000');
  if (options.fsync !== undefined && typeof options.fsync !== 'boolean') throw new InvalidArgument('fsync must be true or false');
  fs.mkdirSync(dir, { recursive: true });
  const files = new Map<JsonlFile, RotatingFile>();
  return {
    append(file: JsonlFile, line: string): void {
      if (file !== 'events.jsonl' && file !== 'receipts.jsonl') throw new InvalidArgument(`unknown JSONL file ${JSON.stringify(file)}`);
      let f = files.get(file);
      if (f === undefined) {
        f = new RotatingFile(dir, file, maxBytes, maxFiles, options.fsync === true);
        files.set(file, f);
      }
      f.append(line);
    },
    close(): void {
      for (const f of files.values()) f.close();
    },
  };
}

/**
 * A sink appending one JSON line per event to `dir/events.jsonl` and per receipt (its stored
 * text, byte for byte) to `dir/receipts.jsonl`, rotated by size, with the fsync policy of the
 * module notes. `close()` closes the files (a later record reopens them).
 */
export function jsonlFileSink(dir: string, options: JsonlFileOptions = {}): EventSink & { close(): void } {
  const writer = jsonlFileWriter(dir, options);
  const sink = jsonlSink(writer);
  return Object.freeze({ name: 'jsonl-file', onEvent: sink.onEvent!, onReceipt: sink.onReceipt!, close: () => writer.close() });
}
