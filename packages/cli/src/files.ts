/**
 * The operator's files are read (and the demo's JSONL files appended to) only when they are
 * regular files: the one implementation lives in `@ctrlrun/store-node`, beside `fromFile`.
 * {@link readFileWithin} adds what `ctrlrun scan` needs for a tree it does not trust: the file
 * must stay inside a directory once its links are resolved.
 *
 * @module
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, sep } from 'node:path';
import { readRegularFile, UnreadableFile, type ReadRegularFileOptions } from '@ctrlrun/store-node';

export { appendRegularFile, MAX_INPUT_BYTES, readRegularFile, UnreadableFile, type UnreadableReason } from '@ctrlrun/store-node';

/** Whether `path` is `dir` or below it; both absolute and already resolved (no `..`, no links). */
export function isWithin(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!isAbsolute(rel) && rel !== '..' && !rel.startsWith(`..${sep}`));
}

/** The path with every link resolved, or throws {@link UnreadableFile} (`missing` when nothing is there). */
export function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UnreadableFile(code === 'ENOENT' ? 'missing' : 'unreadable', (err as Error).message, { cause: err });
  }
}

/**
 * `path` with its links resolved, when that is inside `dir` (itself resolved here); otherwise
 * throws {@link UnreadableFile} saying that it leads out of `dir` (or that it is missing).
 */
export function realPathWithin(path: string, dir: string): string {
  const target = realPath(path);
  if (!isWithin(target, realPath(dir))) throw new UnreadableFile('unreadable', `it is a symbolic link leading out of ${dir}; not followed`);
  return target;
}

/**
 * Reads `path` through {@link readRegularFile} when, its symbolic links resolved, it is inside
 * `dir` ({@link realPathWithin}); a file leading out is refused unread. The file read is the
 * resolved one, so the check and the read agree.
 */
export function readFileWithin(path: string, dir: string, options?: ReadRegularFileOptions): string {
  return readRegularFile(realPathWithin(path, dir), options);
}
