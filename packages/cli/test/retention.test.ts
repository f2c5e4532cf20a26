/**
 * `ctrlrun prune`, `hold`, `release`, `anchor` and `anchor --verify` (spec 05 §5.2–§5.4, issue
 * 31), on a seeded SQLite store. The prune is refused while the AMBIGUOUS email is in its range
 * (named) and while a hold covers it (named), and after it the chain verifies from the checkpoint.
 * The anchor provider is an HTTP endpoint in another process (the kernel's anchorEndpoint over a
 * JSONL file): after the store is rewritten whole — new hashes, a consistent chain that
 * `receipts --verify-chain` calls intact — `anchor --verify` reports anchor_broken; with the
 * provider gone it is unavailable (never ok) and `anchor` anchors nothing. A JSONL file provider
 * anchors a prune's checkpoint, which then supersedes the anchors it pruned.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sealReceipt } from '@ctrlrun/kernel/store';
import { GENESIS_HASH } from '../../kernel/src/hash.js';
import { run, seed, tempDir } from './support.js';

const SERVER = fileURLToPath(new URL('./fixtures/anchor-server.ts', import.meta.url));
const SECRET = 'a shared secret of the operator';
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill();
});

/** The anchor endpoint in its own process; resolves to its URL once it listens. */
async function anchorServer(file: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', 'tsx', SERVER], {
    env: { ...process.env, ANCHOR_FILE: file, ANCHOR_SECRET: SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const m = /^listening (\S+)$/.exec(line);
    if (m) return { url: m[1]!, child };
  }
  throw new Error('the anchor server exited before listening');
}

/** Rewrites every receipt (its decision_reason), re-sealing the chain from genesis and moving the head: a consistent forgery. */
function rewriteWholesale(path: string): void {
  const db = new Database(path);
  const rows = db.prepare("SELECT receipt_id, json FROM receipts WHERE typeof(seq) = 'integer' ORDER BY seq").all() as { receipt_id: string; json: string }[];
  let prev = GENESIS_HASH;
  let seq = 0;
  db.transaction(() => {
    for (const r of rows) {
      const doc = JSON.parse(r.json) as Record<string, unknown>;
      doc['decision_reason'] = `rewritten: ${String(doc['decision_reason'])}`;
      seq += 1;
      const sealed = sealReceipt(doc as never, seq, prev);
      db.prepare('UPDATE receipts SET json = ?, prev_hash = ?, hash = ? WHERE receipt_id = ?').run(sealed.json, prev, sealed.hash, r.receipt_id);
      prev = sealed.hash;
    }
    db.prepare('UPDATE receipt_chain SET seq = ?, hash = ? WHERE id = 1').run(seq, prev);
  })();
  db.close();
}

const receiptCount = (path: string): number => {
  const db = new Database(path, { readonly: true });
  const n = (db.prepare('SELECT count(*) AS n FROM receipts').get() as { n: number }).n;
  db.close();
  return n;
};

describe('ctrlrun prune / hold / release', () => {
  it('refuses while the AMBIGUOUS effect or a hold is in range, naming it; then prunes and the chain verifies from the checkpoint', async () => {
    const s = await seed();
    const env = { CTRLRUN_APPROVER: 'ana@example.com' };
    const all = receiptCount(s.storePath);
    expect(all).toBeGreaterThanOrEqual(4);
    // The ambiguous email's receipt is among the first ones: a prune through the newest-but-one covers it.
    const refused = await run(['prune', '--through', String(all), '--older-than', '0'], { cwd: s.dir, env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/prune refused \(unsettled\).*"email:m1" is AMBIGUOUS/);
    await run(['resolve', s.ambiguousKey, '--failed', '--as', 'dana'], { cwd: s.dir });

    const held = await run(['hold', '--from', '2', '--to', '3', '--reason', 'matter 2026-114', '--id', 'hold_matter', '--json'], { cwd: s.dir, env });
    expect(held.code).toBe(0);
    expect(JSON.parse(held.stdout)).toMatchObject({ holdId: 'hold_matter', fromSeq: 2, toSeq: 3, placedBy: 'ana@example.com', releasedAt: null });
    const blocked = await run(['prune', '--through', '3', '--older-than', '30d'], { cwd: s.dir, env });
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toMatch(/prune refused \(held\): hold "hold_matter" \("matter 2026-114"/);
    const listed = await run(['hold', '--list'], { cwd: s.dir });
    expect(listed.stdout).toMatch(/hold_matter {2}seq 2–3 {2}LIVE {2}placed by ana@example.com: matter 2026-114/);

    expect((await run(['release', 'hold_matter'], { cwd: s.dir, env })).stdout).toContain('hold_matter released by ana@example.com');
    const again = await run(['release', 'hold_matter'], { cwd: s.dir, env });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no live hold "hold_matter"/);

    const pruned = await run(['prune', '--through', '3', '--older-than', '30d', '--json'], { cwd: s.dir, env });
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ checkpoint: { seq: 3 }, receipts_deleted: 3 });
    const chain = await run(['receipts', '--verify-chain'], { cwd: s.dir });
    expect(chain.code).toBe(0);
    expect(chain.stdout).toContain('receipts up to seq 3 were pruned');
    expect(chain.stdout).toContain('the chain is intact');
  });

  it('refuses a bad --older-than or --through before opening anything', async () => {
    const s = await seed();
    expect((await run(['prune', '--through', '0', '--older-than', '0'], { cwd: s.dir })).code).toBe(2);
    expect((await run(['prune', '--through', '2', '--older-than', '30 days'], { cwd: s.dir })).code).toBe(2);
    expect((await run(['prune', '--through', '2'], { cwd: s.dir })).code).toBe(2);
  });
});

describe('ctrlrun anchor with an HTTP provider in another process', () => {
  it('a wholesale rewrite after an anchor is anchor_broken; a gone provider is unavailable, never ok', { timeout: 120_000 }, async () => {
    const s = await seed();
    const { url, child } = await anchorServer(join(tempDir('ctrlrun-anchors-'), 'anchors.jsonl'));
    const env = { CTRLRUN_ANCHOR_URL: url, CTRLRUN_ANCHOR_SECRET: SECRET };

    const made = await run(['anchor', '--json'], { cwd: s.dir, env });
    expect(made.code).toBe(0);
    const anchor = JSON.parse(made.stdout) as { seq: number; hash: string; token: string; kind: string };
    expect(anchor).toMatchObject({ kind: 'interval', seq: receiptCount(s.storePath) });
    // Anchoring the same head again is refused: a new interval anchor must be above the last.
    expect((await run(['anchor'], { cwd: s.dir, env })).stderr).toMatch(/must be above the last interval anchor/);
    const fine = await run(['anchor', '--verify'], { cwd: s.dir, env });
    expect(fine.code).toBe(0);
    expect(fine.stdout).toMatch(/: ok \(1 held by the provider\)/);

    // A wrong secret: the endpoint refuses to answer, so the report is unavailable.
    const wrong = await run(['anchor', '--verify'], { cwd: s.dir, env: { ...env, CTRLRUN_ANCHOR_SECRET: 'another secret entirely' } });
    expect(wrong.code).toBe(3);
    expect(wrong.stdout).toMatch(/unavailable/);

    rewriteWholesale(s.storePath);
    const chain = await run(['receipts', '--verify-chain'], { cwd: s.dir });
    expect(chain.code).toBe(0); // the forgery is consistent: the chain alone cannot tell
    const broken = await run(['anchor', '--verify', '--json'], { cwd: s.dir, env });
    expect(broken.code).toBe(1);
    const report = JSON.parse(broken.stdout) as { status: string; breaks: { name: string; seq: number | null }[] };
    expect(report.status).toBe('broken');
    expect(report.breaks).toEqual([expect.objectContaining({ name: 'anchor_broken', seq: anchor.seq })]);
    // The chain report keeps its own names: no anchor finding in it.
    expect(chain.stdout).not.toMatch(/anchor_/);

    // Deleting the local cache too still reports the tamper (T532).
    const db = new Database(s.storePath);
    db.exec('DELETE FROM anchors');
    db.close();
    const still = await run(['anchor', '--verify', '--json'], { cwd: s.dir, env });
    expect((JSON.parse(still.stdout) as { breaks: { name: string }[] }).breaks.map((b) => b.name).sort()).toEqual(['anchor_broken', 'anchor_missing']);

    // The provider gone: verification is unavailable (exit 3), and anchoring anchors nothing and says so.
    child.kill();
    await new Promise((r) => child.once('exit', r));
    const gone = await run(['anchor', '--verify'], { cwd: s.dir, env });
    expect(gone.code).toBe(3);
    expect(gone.stdout).toMatch(/: unavailable/);
    expect(gone.stdout).not.toMatch(/: ok/);
    const none = await run(['anchor'], { cwd: s.dir, env });
    expect(none.code).toBe(3);
    expect(none.stderr).toMatch(/anchor_unavailable: .*nothing was anchored/);
    const rows = new Database(s.storePath, { readonly: true });
    expect((rows.prepare('SELECT count(*) AS n FROM anchors').get() as { n: number }).n).toBe(0);
    rows.close();
  });
});

describe('ctrlrun prune with a JSONL file provider', () => {
  it('anchors the checkpoint before deleting, and that checkpoint anchor supersedes the pruned interval anchor', async () => {
    const s = await seed();
    await run(['resolve', s.ambiguousKey, '--failed', '--as', 'dana'], { cwd: s.dir });
    const file = join(tempDir('ctrlrun-anchorfile-'), 'anchors.jsonl');
    const env = { CTRLRUN_ANCHOR_FILE: file, CTRLRUN_APPROVER: 'ana' };
    expect((await run(['anchor'], { cwd: s.dir, env })).code).toBe(0);
    const head = receiptCount(s.storePath);
    // Another receipt or two, so the anchored head can be pruned.
    const pruned = await run(['prune', '--through', String(head), '--older-than', '0', '--json'], { cwd: s.dir, env });
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ checkpoint: { seq: head }, anchor: { kind: 'checkpoint', seq: head } });
    const verified = await run(['anchor', '--verify', '--json'], { cwd: s.dir, env });
    expect(JSON.parse(verified.stdout)).toMatchObject({ status: 'ok', anchors: 2, breaks: [], superseded: { through: head, anchors: 1 } });
    expect(verified.code).toBe(0);
    const said = await run(['anchor', '--verify'], { cwd: s.dir, env });
    expect(said.stdout).toMatch(
      new RegExp(`1 anchor\\(s\\) at or below seq ${head} are superseded by the checkpoint anchored at \\S+ \\(a prune through seq ${head}\\)`),
    );
  });
});
