/**
 * The worker's retention and anchor routes (issue 31): an operator prunes, holds, releases,
 * anchors and verifies anchors over HTTP, through the kernel as the CLI does. A hold and an
 * AMBIGUOUS effect refuse a prune with 409 naming them; after it `GET /v1/receipts/verify` is ok
 * from the checkpoint; a rewritten receipt at an anchored seq is `anchor_broken` in
 * `GET /v1/anchors/verify` (the chain report keeps its six names); a failing provider is 503 and
 * anchors nothing, and at verification is `unavailable`. {@link retentionExchanges} provokes every
 * status the OpenAPI document lists for these routes (openapi.test.ts validates them).
 */
import { describe, expect, it } from 'vitest';
import { createSqlJsStore, type SqlJsStore } from '@ctrlrun/store-sqljs';
import { createConfiguredApp } from '../../worker/src/configured.js';
import { loadWorkerSettings } from '../../worker/src/settings.js';
import { createApp, staticTokens } from '../../worker/src/index.js';
import { AGENT, harness, OPERATOR } from './harness.js';
import { memoryProvider, refund, retentionExchanges } from './retention-exchanges.js';

describe('the worker retention routes', () => {
  it('a hold and an AMBIGUOUS effect refuse a prune with 409 naming them; then it prunes and the chain verifies from the checkpoint', async () => {
    const h = await harness();
    await refund(h, 'a1');
    await h.call('POST', '/v1/actions', AGENT, { name: 'flaky.charge', arguments: { id: 'c1', mode: 'lost' } });
    expect((await h.store.getEffect('charge:c1'))!.state).toBe('ambiguous');
    await refund(h, 'a2');
    await refund(h, 'a3');
    const unsettled = await h.call('POST', '/v1/retention/prune', OPERATOR, { through: 3, olderThanSeconds: 0 });
    expect(unsettled.status).toBe(409);
    expect(unsettled.json['error']).toMatchObject({ reason: 'unsettled', effectKey: 'charge:c1', state: 'ambiguous' });
    expect((await h.call('POST', `/v1/effects/${encodeURIComponent('charge:c1')}/resolve`, OPERATOR, { state: 'failed' })).status).toBe(200);
    const placed = await h.call('POST', '/v1/retention/holds', OPERATOR, { fromSeq: 3, reason: 'regulator request' });
    expect(placed.status).toBe(201);
    const hold = placed.json['hold'] as { holdId: string; placedBy: string; toSeq: null };
    expect(hold).toMatchObject({ placedBy: 'human:ops', toSeq: null });
    const held = await h.call('POST', '/v1/retention/prune', OPERATOR, { through: 3, olderThanSeconds: 0 });
    expect(held.status).toBe(409);
    expect(held.json['error']).toMatchObject({ reason: 'held', holdId: hold.holdId });
    expect((await h.call('POST', `/v1/retention/holds/${hold.holdId}/release`, OPERATOR)).json['hold']).toMatchObject({ releasedBy: 'human:ops' });
    const pruned = await h.call('POST', '/v1/retention/prune', OPERATOR, { through: 3, olderThanSeconds: 0 });
    expect(pruned.status).toBe(200);
    expect(pruned.json).toMatchObject({ checkpoint: { seq: 3 }, receiptsDeleted: 3, anchor: null });
    const verified = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect(verified.json).toMatchObject({ ok: true, breaks: [] });
  });

  it('a receipt rewritten at an anchored seq is anchor_broken in the anchor report, apart from the chain report; a failing provider is 503 and unavailable', async () => {
    const provider = memoryProvider();
    const h = await harness({ anchor: provider });
    for (const id of ['b1', 'b2']) await refund(h, id);
    const made = await h.call('POST', '/v1/anchors', OPERATOR);
    expect(made.status).toBe(201);
    expect(made.json['anchor']).toMatchObject({ seq: 2, kind: 'interval', token: 'mem_1' });
    expect((await h.call('GET', '/v1/anchors/verify', OPERATOR)).json).toMatchObject({ status: 'ok', anchors: 1, breaks: [] });
    // The stored hash at seq 2 replaced (as a wholesale rewrite would): the anchor no longer matches.
    await (h.store as SqlJsStore).driver.exec(`UPDATE receipts SET hash = 'sha256:${'1'.repeat(64)}' WHERE seq = 2`);
    const report = await h.call('GET', '/v1/anchors/verify', OPERATOR);
    expect(report.json).toMatchObject({ status: 'broken', breaks: [{ name: 'anchor_broken', seq: 2 }] });
    const chain = await h.call('GET', '/v1/receipts/verify', OPERATOR);
    expect((chain.json['breaks'] as { name: string }[]).map((b) => b.name)).not.toContain('anchor_broken');

    const down = await harness({ anchor: memoryProvider(true) });
    await refund(down, 'c1');
    const failed = await down.call('POST', '/v1/anchors', OPERATOR);
    expect(failed.status).toBe(503);
    expect((failed.json['error'] as { message: string }).message).toMatch(/anchor_unavailable: .*nothing was anchored/);
    expect((await down.call('GET', '/v1/anchors/verify', OPERATOR)).json).toMatchObject({ status: 'unavailable', breaks: [] });
  });

  it('answers every documented status', async () => {
    const seen = await retentionExchanges();
    const statuses = (path: string, method: string) => [...new Set(seen.filter((s) => s.path === path && s.method === method).map((s) => s.status))].sort();
    expect(statuses('/v1/retention/prune', 'POST')).toEqual([200, 400, 401, 403, 409, 503]);
    expect(statuses('/v1/anchors', 'POST')).toEqual([201, 401, 403, 409, 501, 503]);
    expect(statuses('/v1/anchors/verify', 'GET')).toEqual([200, 401, 403, 501]);
  });

  it('a deployment names its anchor endpoint in CTRLRUN_ANCHOR_URL, its secret in CTRLRUN_ANCHOR_SECRET', async () => {
    const env = { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, CTRLRUN_ANCHOR_URL: 'http://127.0.0.1:1/anchors' };
    await expect(loadWorkerSettings(env, { generate: false })).rejects.toThrow(/CTRLRUN_ANCHOR_SECRET/);
    const settings = await loadWorkerSettings({ ...env, CTRLRUN_ANCHOR_SECRET: 'sixteen characters at least' }, { generate: false });
    expect(settings.anchor?.name).toBe('http://127.0.0.1:1/anchors');
    const { app } = createConfiguredApp(settings, { store: await createSqlJsStore() });
    // Wired: the provider is asked (and cannot be reached), so the report is unavailable rather than 501.
    const r = await app.request('/v1/anchors/verify', { headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ status: 'unavailable', provider: 'http://127.0.0.1:1/anchors' });
    expect((await loadWorkerSettings({ CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR }, { generate: false })).anchor).toBeNull();
  });

  it("the inbox footer shows the anchor report beside the chain's: ok, then the finding after a rewrite; none without a provider", async () => {
    const provider = memoryProvider();
    const h = await harness({ anchor: provider });
    await refund(h, 'i1');
    await h.call('POST', '/v1/anchors', OPERATOR);
    const page = async (app: typeof h.app): Promise<string> => {
      const login = await app.request('http://inbox.test/inbox/login', { method: 'POST', body: new URLSearchParams({ token: OPERATOR }) });
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      return (await app.request('http://inbox.test/inbox', { headers: { cookie } })).text();
    };
    const ok = await page(h.app);
    expect(ok).toContain('data-chain="ok"');
    expect(ok).toMatch(/data-anchors="ok">Anchored: 1 anchor\(s\) at memory confirm the chain/);
    await (h.store as SqlJsStore).driver.exec(`UPDATE receipts SET hash = 'sha256:${'4'.repeat(64)}' WHERE seq = 1`);
    // A fresh app over the same store (the footer's report is kept for 30 s per app).
    const fresh = createApp({ control: h.control, auth: staticTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]), anchor: provider });
    expect(await page(fresh)).toMatch(/data-anchors="broken">Anchor findings: anchor_broken at seq 1/);
    const none = await harness();
    expect(await page(none.app)).not.toContain('data-anchors');
  });
});
