// `ctrlrun … | head`: a reader that goes away before the output ends (EPIPE on stdout) is an
// ordinary end, not a crash — no stack on stderr, and the command's own exit code (issue 35).
import { spawn } from 'node:child_process';
import { ApprovalRequired, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { describe, expect, it } from 'vitest';
import { executable, exampleControl, LAUNCHER, seed } from './support.js';

/** Far more than a pipe's buffer (64 KiB here) of `approvals` lines: about 180 bytes each. */
const ROWS = 3000;

/** A seeded directory holding `ROWS` more pending approval requests. */
async function manyPending(): Promise<string> {
  const s = await seed();
  const store = await openStore(s.storePath);
  try {
    const refund = protect<{ payment_id: string; amount: number }, unknown>(() => ({}), { control: exampleControl(store), name: 'stripe.refund' });
    for (let i = 0; i < ROWS; i++) {
      await refund({ payment_id: `bulk_${i}`, amount: 200_000 + i }).catch((err: unknown) => {
        if (!(err instanceof ApprovalRequired)) throw err;
      });
    }
  } finally {
    await store.close();
  }
  return s.dir;
}

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** What was read before the pipe was closed. */
  read: string;
  stderr: string;
}

/**
 * Runs `node ...argv` with stdout on a pipe this side closes: at once (`lines: 0`, before the
 * command can have written anything), or after the first `lines` lines arrived — what `| head`
 * does.
 */
function closedEarly(argv: string[], cwd: string, lines: number): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, {
      cwd,
      env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let read = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
    if (lines === 0) child.stdout.destroy();
    else
      child.stdout.on('data', (d: Buffer) => {
        read += d.toString();
        if (read.split('\n').length > lines) child.stdout.destroy();
      });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, read, stderr }));
  });
}

function quietEnd(r: Ended): void {
  expect(r.stderr).not.toMatch(/EPIPE|Unhandled|\n\s+at /);
  expect(r.stderr).toBe('');
  expect(r.signal).toBeNull();
  expect(r.code).toBe(0);
}

describe('a reader that closes early', { timeout: 180_000 }, () => {
  it('approvals with thousands of rows, read for one line (the built executable and the installed launcher)', async () => {
    const dir = await manyPending();
    for (const argv of [[await executable()], [LAUNCHER]]) {
      const r = await closedEarly([...argv, 'approvals', '--all'], dir, 1);
      expect(r.read).toMatch(/^apr_[0-9a-f]{32} {2}pending {2}stripe\.refund/);
      quietEnd(r);
    }
  });

  it('--help and receipts with the pipe closed before anything was written', async () => {
    const dir = (await seed()).dir;
    const bin = await executable();
    quietEnd(await closedEarly([bin, '--help'], dir, 0));
    quietEnd(await closedEarly([bin, 'receipts'], dir, 0));
  });
});
