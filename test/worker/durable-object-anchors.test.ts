/**
 * The Durable Object anchor ledger (issue 31), in workerd: an AnchorLedger object behind a Worker
 * (miniflare on a real port, its own process) records a store's anchors over the kernel's signed
 * HTTP protocol. A store in this process is anchored there; after its receipt at the anchored seq
 * is rewritten, the anchor report names anchor_broken; a wrong secret is unavailable, never ok;
 * and the ledger outlives a restart on the same persisted state.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, describe, expect, it } from 'vitest';
import { anchorChain, Control, createAction, httpAnchorProvider, loadPolicy, verifyAnchors } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { bundleWorkerdModule, COMPATIBILITY_DATE } from './bundle.js';

const SECRET = 'the anchoring account secret';
const POLICY = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n');

describe('AnchorLedger (Durable Object) in workerd', () => {
  let persist = '';
  afterAll(async () => {
    if (persist) await rm(persist, { recursive: true, force: true });
  });

  async function start(): Promise<{ mf: Miniflare; url: string }> {
    const bundle = await bundleWorkerdModule('test/worker/durable-object/anchor-entry.ts', 'do-anchors');
    const mf = new Miniflare({
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: [],
      modules: [{ type: 'ESModule', path: bundle.scriptPath, contents: bundle.script }],
      durableObjects: { ANCHORS: { className: 'AnchorLedger', useSQLite: true } },
      durableObjectsPersist: persist,
      bindings: { CTRLRUN_ANCHOR_SECRET: SECRET },
      host: '127.0.0.1',
      port: 0,
    });
    const url = await mf.ready;
    return { mf, url: url.href };
  }

  it('anchors a store from another process; a rewrite at the anchored seq is anchor_broken; a wrong secret is unavailable', { timeout: 300_000 }, async () => {
    persist = await mkdtemp(join(tmpdir(), 'ctrlrun-do-anchors-'));
    const store = await createSqlJsStore();
    const control = new Control({ policy: POLICY, store });
    for (const id of ['p1', 'p2', 'p3'])
      await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: id, amount: 1 }, principal: { agent: 'a' } }), async () => id);
    let { mf, url } = await start();
    try {
      const provider = httpAnchorProvider({ url, secret: SECRET });
      const anchor = await anchorChain(store, provider);
      expect(anchor).toMatchObject({ seq: 3, kind: 'interval' });
      expect(await verifyAnchors(store, provider)).toMatchObject({ status: 'ok', anchors: 1 });
      expect((await verifyAnchors(store, httpAnchorProvider({ url, secret: 'not the anchoring secret' }))).status).toBe('unavailable');
    } finally {
      await mf.dispose();
    }
    // Restarted on the same persisted state: the ledger still holds the anchor.
    ({ mf, url } = await start());
    try {
      const provider = httpAnchorProvider({ url, secret: SECRET });
      await store.driver.exec(`UPDATE receipts SET hash = 'sha256:${'3'.repeat(64)}' WHERE seq = 3`);
      const report = await verifyAnchors(store, provider);
      expect(report.status).toBe('broken');
      expect(report.breaks.map((b) => `${b.name}@${b.seq}`)).toEqual(['anchor_broken@3']);
    } finally {
      await mf.dispose();
    }
  });
});
