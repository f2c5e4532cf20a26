// `ctrlrun receipts` / `effects` stream (issue 11): the default view is the newest page, `--all`
// streams every row page by page, and `--verify-chain` walks the chain in pages with the same
// report verifyChain gives for all the rows at once.
import BetterSqlite3 from 'better-sqlite3';
import { createAction, sequentialIds, verifyChain, type StateStore } from '@ctrlrun/kernel';
import { buildReceipt, storedTime } from '@ctrlrun/kernel/store';
import { openStore } from '@ctrlrun/store-node';
import { describe, expect, it } from 'vitest';
import { run, seed, type Seeded } from './support.js';

/** The seeded store (4 receipts, 5 effects) plus `receipts` more chained receipts and `effects` more committed effects. */
async function grown(receipts: number, effects: number): Promise<Seeded> {
  const s = await seed();
  const store = await openStore(s.storePath);
  try {
    const ids = sequentialIds();
    for (let i = 1; i <= receipts; i++) {
      const action = createAction({ name: 'stripe.refund', arguments: { payment_id: `bulk_${i}`, amount: i }, principal: { agent: 'bulk-agent' } }, { ids });
      const at = storedTime(new Date(Date.UTC(2026, 1, 1, 0, 0, i)));
      await store.putReceipt(
        buildReceipt(action, {
          receiptId: `rcp_bulk_${String(i).padStart(4, '0')}`,
          decision: 'allow',
          decisionReason: 'rule[0]',
          approvalId: null,
          approver: null,
          effectKey: `refund:bulk_${i}`,
          attempt: 1,
          result: 'committed',
          error: null,
          startedAt: at,
          finishedAt: at,
          policyHash: `sha256:${'a'.repeat(64)}`,
          policyVersion: '1',
          controls: i % 10 === 0 ? ['tenth'] : [],
        }),
      );
    }
    for (let i = 1; i <= effects; i++) {
      const key = `bulk:${String(i).padStart(4, '0')}`;
      await store.reserveEffect(key, `act_bulk_${i}`, 60_000);
      await store.beginExecution(key, `act_bulk_${i}`);
      await store.commitEffect(key, `act_bulk_${i}`, { ok: true });
    }
  } finally {
    await store.close();
  }
  return s;
}

const seqs = (stdout: string): number[] =>
  stdout
    .trimEnd()
    .split('\n')
    .map((l) => (JSON.parse(l) as { seq: number }).seq);

describe('receipts: the newest page by default, --all streams', { timeout: 120_000 }, () => {
  it('default: the newest 50 of 124, oldest first, and a hint on stderr; --all: every one in chain order; --last N', async () => {
    const s = await grown(120, 0);
    const newest = await run(['receipts', '--json'], { cwd: s.dir });
    expect(newest.code).toBe(0);
    expect(seqs(newest.stdout)).toEqual(Array.from({ length: 50 }, (_, i) => 75 + i));
    expect(newest.stderr).toMatch(/the newest 50 receipts; --all lists every one/);
    const all = await run(['receipts', '--all', '--json'], { cwd: s.dir });
    expect(seqs(all.stdout)).toEqual(Array.from({ length: 124 }, (_, i) => i + 1));
    expect(all.stderr).toBe('');
    expect(seqs((await run(['receipts', '--last', '60', '--json'], { cwd: s.dir })).stdout)).toEqual(Array.from({ length: 60 }, (_, i) => 65 + i));
    // A filter streams too, and keeps only the newest page of matches.
    const tenth = await run(['receipts', '--control', 'tenth', '--all', '--json'], { cwd: s.dir });
    expect(seqs(tenth.stdout)).toEqual(Array.from({ length: 12 }, (_, i) => 14 + i * 10));
    // A short store shows every row and no hint.
    const small = await seed();
    expect((await run(['receipts'], { cwd: small.dir })).stderr).toBe('');
  });

  it('rows off the chain (unchained, a fractional or text or huge seq) are listed and verified like verifyChain does', async () => {
    const s = await grown(20, 0);
    const db = new BetterSqlite3(s.storePath);
    db.exec('DROP INDEX IF EXISTS receipts_by_seq');
    db.exec('UPDATE receipts SET seq = NULL WHERE seq = 3');
    db.exec('UPDATE receipts SET seq = 7.5 WHERE seq = 7');
    db.exec("UPDATE receipts SET seq = 'x' WHERE seq = 11");
    db.exec('UPDATE receipts SET seq = 1152921504606846976 WHERE seq = 15');
    db.exec('UPDATE receipts SET seq = 5 WHERE seq = 6'); // a duplicate seq
    db.close();
    const all = await run(['receipts', '--all'], { cwd: s.dir });
    expect(all.stdout.trimEnd().split('\n')).toHaveLength(24);
    const streamed = await run(['receipts', '--verify-chain', '--json'], { cwd: s.dir });
    expect(streamed.code).toBe(1);
    const store: StateStore = await openStore(s.storePath, { readOnly: true });
    try {
      const whole = verifyChain(await store.receipts(), await store.chainHead());
      const report = JSON.parse(streamed.stdout) as typeof whole;
      // Rows off the chain are read in another order than receipts() gives them: compare their breaks as a set.
      const sorted = (r: typeof whole) => ({ ...r, breaks: [...r.breaks].map((b) => JSON.stringify(b)).sort() });
      expect(sorted(report)).toEqual(
        sorted({
          ...whole,
          breaks: whole.breaks.map((b) => ({ name: b.name, seq: b.seq, detail: b.detail })),
          pruned_through: null,
          pending: 0,
        } as typeof whole),
      );
      expect(report.breaks.map((b) => b.name)).toEqual(expect.arrayContaining(['unchained', 'content_altered', 'missing', 'link_broken']));
    } finally {
      await store.close();
    }
  });

  it('the store pages the chain in (seq, receipt_id) order across page boundaries, and the newest page from the end', async () => {
    const s = await grown(30, 0);
    const store = await openStore(s.storePath, { readOnly: true });
    try {
      const whole = (await store.receipts()).filter((r) => r.seq !== null);
      const paged = [];
      for (let after: { seq: number; receiptId: string } | null = null; ;) {
        const page = await store.receiptsInChain!({ after, limit: 7 });
        paged.push(...page);
        if (page.length < 7) break;
        after = { seq: page.at(-1)!.seq!, receiptId: page.at(-1)!.receipt_id };
      }
      expect(paged).toEqual(whole);
      expect((await store.receiptsInChain!({ newest: true, limit: 5 })).map((r) => r.seq)).toEqual([30, 31, 32, 33, 34]);
      expect(await store.receiptsOffChain!({ limit: 10 })).toEqual([]);
      await expect(store.receiptsInChain!({ limit: 0 })).rejects.toThrow(/limit/);
      await expect(store.receiptsInChain!({ after: { seq: Number.NaN, receiptId: 'x' }, limit: 5 })).rejects.toThrow(/after/);
    } finally {
      await store.close();
    }
  });
});

describe('effects: the newest page by default, --all streams', { timeout: 120_000 }, () => {
  it('default: the newest 50 records and a hint; --all: every record oldest first; --state filters either way', async () => {
    const s = await grown(0, 60);
    const keys = (stdout: string) =>
      stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('  ')[0]);
    const newest = await run(['effects'], { cwd: s.dir });
    expect(newest.code).toBe(0);
    expect(keys(newest.stdout)).toHaveLength(50);
    expect(keys(newest.stdout).at(-1)).toBe('bulk:0060');
    expect(newest.stderr).toMatch(/the newest 50 records; --all lists every one/);
    const all = await run(['effects', '--all'], { cwd: s.dir });
    const allKeys = keys(all.stdout);
    expect(allKeys).toHaveLength(62); // the seeded refund and email, then the 60
    expect(allKeys.slice(-60)).toEqual(Array.from({ length: 60 }, (_, i) => `bulk:${String(i + 1).padStart(4, '0')}`));
    expect(keys((await run(['effects', '--state', 'ambiguous', '--all'], { cwd: s.dir })).stdout)).toEqual(['email:m1']);
    expect((await run(['effects', '--state', 'failed'], { cwd: s.dir })).stdout).toBe('no effects are failed\n');
  });
});
