/**
 * A small file system of its own for a store file, which the fault nemesis fills to ENOSPC and
 * frees again: a tmpfs mounted for the run (root only). Where it can't be mounted, the reason is
 * returned and the caller skips with it (or fails, under CI=true).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SmallDisk {
  readonly dir: string;
  /** Unmounts it and removes the mount point. */
  unmount(): void;
}

/** Mounts a `sizeMb` tmpfs on a fresh directory, or says why it can't. */
export function mountSmallDisk(sizeMb: number): SmallDisk | { readonly skip: string } {
  if (process.platform !== 'linux') return { skip: `a tmpfs needs Linux (this is ${process.platform})` };
  if (process.getuid?.() !== 0) return { skip: 'mounting a tmpfs (or a loop device) needs root; this run is not root' };
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-small-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,mode=0755`, 'tmpfs', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    return { skip: `mount -t tmpfs was refused here (${stderr || String(err)})` };
  }
  return {
    dir,
    unmount() {
      try {
        execFileSync('umount', [dir], { stdio: 'ignore' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Writes `file` until the file system refuses (ENOSPC); returns the bytes written. */
export function fillDisk(file: string): number {
  const fd = openSync(file, 'w');
  let written = 0;
  try {
    for (const size of [1 << 20, 1 << 16, 1 << 12, 1]) {
      const chunk = Buffer.alloc(size, 0xa5);
      try {
        for (;;) written += writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}
