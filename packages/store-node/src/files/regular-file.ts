/**
 * Reading the operator's files (the policy, an authority document, a grant) and appending to the
 * state directory's JSONL files, only when they are regular files (shared by `fromFile`, the
 * JSONL file sink and the CLI). A FIFO would block the CLI
 * forever, a device such as `/dev/zero` never ends, a directory is a mistake: each is refused by
 * name. Files are opened non-blocking and checked on the open descriptor, so nothing can be
 * swapped in between the check and the read.
 *
 * @module
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, writeSync, type Stats } from 'node:fs';

/** The largest file the CLI reads (a policy, an authority document, a grant). */
export const MAX_INPUT_BYTES = 16 * 1024 * 1024;

/** Why a file was not read: `missing` (ENOENT), `not_regular`, `too_large`, or `unreadable` (any other error). */
export type UnreadableReason = 'missing' | 'not_regular' | 'too_large' | 'unreadable';

/** A file that {@link readRegularFile} refused; `message` says why, without the path. */
export class UnreadableFile extends Error {
  override name = 'UnreadableFile';
  readonly reason: UnreadableReason;
  constructor(reason: UnreadableReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

// O_NONBLOCK: opening a FIFO must not wait for a writer (undefined on Windows, which has no FIFOs).
const NONBLOCK = constants.O_NONBLOCK ?? 0;

/** What a non-regular file is, in words. */
function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a named pipe (FIFO)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

function opened(path: string, flags: number): number {
  try {
    return openSync(path, flags | NONBLOCK, 0o644);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UnreadableFile(code === 'ENOENT' ? 'missing' : 'unreadable', (err as Error).message, { cause: err });
  }
}

function mustBeRegular(fd: number): Stats {
  const st = fstatSync(fd);
  if (!st.isFile()) throw new UnreadableFile('not_regular', `it is ${kindOf(st)}, not a regular file`);
  return st;
}

/** Options of {@link readRegularFile}. */
export interface ReadRegularFileOptions {
  /** The largest file read, in bytes; default {@link MAX_INPUT_BYTES}. */
  readonly maxBytes?: number;
}

/** Reads a regular file of at most `maxBytes` (default {@link MAX_INPUT_BYTES}) as UTF-8, or throws {@link UnreadableFile}. */
export function readRegularFile(path: string, options: ReadRegularFileOptions = {}): string {
  const maxBytes = options.maxBytes ?? MAX_INPUT_BYTES;
  const fd = opened(path, constants.O_RDONLY);
  try {
    const st = mustBeRegular(fd);
    if (st.size > maxBytes) throw new UnreadableFile('too_large', `it is ${st.size} bytes, more than the ${maxBytes} this command reads`);
    return readFileSync(fd, 'utf8');
  } catch (err) {
    if (err instanceof UnreadableFile) throw err;
    throw new UnreadableFile('unreadable', (err as Error).message, { cause: err });
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens a regular file for appending (created if absent) and returns its descriptor, or throws
 * {@link UnreadableFile}: a FIFO (with or without a reader), a device or a directory is refused
 * without waiting, checked on the open descriptor.
 */
export function openForAppend(path: string): number {
  let fd: number;
  try {
    fd = opened(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT);
  } catch (err) {
    // A FIFO opened for writing without blocking and with no reader fails with ENXIO.
    if (err instanceof UnreadableFile && (err.cause as NodeJS.ErrnoException | undefined)?.code === 'ENXIO') {
      throw new UnreadableFile('not_regular', 'it is a named pipe (FIFO) or a device, not a regular file', { cause: err.cause });
    }
    throw err;
  }
  try {
    mustBeRegular(fd);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

/** Appends `text` to a regular file (created if absent), or throws {@link UnreadableFile}. */
export function appendRegularFile(path: string, text: string): void {
  const fd = openForAppend(path);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
