/**
 * Anchors (spec 05 §5.2), ported by behaviour from the original's tests/test_anchor.py, on a
 * sql.js store with an in-memory provider that records and answers (and one whose answers can be
 * made to fail or to disown a pair). The HTTP provider round trip (signed both ways, a forged or
 * replayed answer refused) is at the end.
 */
import { describe, expect, it } from 'vitest';
import {
  anchorChain,
  anchorEndpoint,
  AnchorUnavailable,
  checkAnchor,
  Control,
  createAction,
  httpAnchorProvider,
  loadPolicy,
  pruneChain,
  verifyAnchors,
  type Anchor,
  type AnchorProvider,
} from '@ctrlrun/kernel';
import { createSqlJsStore, type SqlJsStore } from '@ctrlrun/store-sqljs';

const POLICY = loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: allow\n');

interface TestProvider extends AnchorProvider {
  held: Anchor[];
  mode: 'ok' | 'down' | 'disown' | 'bad-shape' | 'time-backwards';
}

function provider(): TestProvider {
  let n = 0;
  const p: TestProvider = {
    name: 'memory',
    held: [],
    mode: 'ok',
    async make(seq, hash, kind) {
      if (p.mode === 'down') throw new Error('ECONNREFUSED');
      if (p.mode === 'bad-shape') return { token: '', at: 'yesterday' };
      n += 1;
      const at = new Date(Date.UTC(2026, 11, 5, 9, 0, p.mode === 'time-backwards' ? 0 : 10 + n)).toISOString();
      const a = checkAnchor({ seq, hash, kind, token: `t${n}`, at }, 'anchor');
      p.held.push(a);
      return { token: a.token, at: a.at };
    },
    async check(seq, hash, token) {
      if (p.mode === 'down') throw new Error('ECONNREFUSED');
      if (p.mode === 'disown') return false;
      return p.held.some((a) => a.seq === seq && a.hash === hash && a.token === token);
    },
    async latest() {
      if (p.mode === 'down') throw new Error('ECONNREFUSED');
      return p.held.reduce<Anchor | null>((b, a) => (b === null || a.seq > b.seq ? a : b), null);
    },
    async since(seq) {
      if (p.mode === 'down') throw new Error('ECONNREFUSED');
      return p.held.filter((a) => a.seq >= seq);
    },
  };
  return p;
}

async function storeWith(n: number): Promise<SqlJsStore> {
  const store = await createSqlJsStore();
  const control = new Control({ policy: POLICY, store });
  for (let i = 0; i < n; i++)
    await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: `p${i}`, amount: 1 }, principal: { agent: 'a' } }), async () => i);
  return store;
}

const names = (r: { breaks: readonly { name: string; seq: number | null }[] }) => r.breaks.map((b) => `${b.name}@${String(b.seq)}`);

describe('anchors', () => {
  it('T534d: the ordinary window between anchors is not a break; T531: an append after the last anchor is not detected', async () => {
    const store = await storeWith(2);
    const p = provider();
    await anchorChain(store, p);
    const control = new Control({ policy: POLICY, store });
    await control.execute(createAction({ name: 'stripe.refund', arguments: { payment_id: 'later', amount: 1 }, principal: { agent: 'a' } }), async () => 1);
    expect(await verifyAnchors(store, p)).toMatchObject({ status: 'ok', anchors: 1, breaks: [] });
  });

  it('T530b: a rewrite at an anchored seq fails the anchor; T530: a truncation past it is named', async () => {
    const store = await storeWith(3);
    const p = provider();
    const a = await anchorChain(store, p);
    await store.driver.exec(`UPDATE receipts SET hash = 'sha256:${'2'.repeat(64)}' WHERE seq = ${a.seq}`);
    expect(names(await verifyAnchors(store, p))).toEqual([`anchor_broken@${a.seq}`]);
    await store.driver.exec(`DELETE FROM receipts WHERE seq >= ${a.seq}`);
    const r = await verifyAnchors(store, p);
    expect(names(r)).toEqual([`anchor_broken@${a.seq}`]);
    expect(r.breaks[0]!.detail).toMatch(/holds no receipt there/);
  });

  it('T532b: an emptied cache alone is missing and not broken; T534c: nothing anchored anywhere is missing', async () => {
    const store = await storeWith(2);
    const p = provider();
    expect(names(await verifyAnchors(store, p))).toEqual(['anchor_missing@null']);
    await anchorChain(store, p);
    await store.driver.exec('DELETE FROM anchors');
    expect(names(await verifyAnchors(store, p))).toEqual(['anchor_missing@2']);
  });

  it('T534e: a provider that disowns a pair is repudiated; T534b: an unreachable provider is unavailable, never ok', async () => {
    const store = await storeWith(2);
    const p = provider();
    await anchorChain(store, p);
    p.mode = 'disown';
    expect(names(await verifyAnchors(store, p))).toEqual(['anchor_repudiated@2']);
    p.mode = 'down';
    const r = await verifyAnchors(store, p);
    expect(r.status).toBe('unavailable');
    expect(r.unavailable).toMatch(/anchor_unavailable: .*"memory".*since/);
  });

  it('T534/T535d: a provider that fails, or answers a shape the kernel refuses, anchors nothing', async () => {
    const store = await storeWith(2);
    const p = provider();
    for (const mode of ['down', 'bad-shape'] as const) {
      p.mode = mode;
      const err = await anchorChain(store, p).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AnchorUnavailable);
      expect((err as Error).message).toMatch(/nothing was anchored/);
    }
    expect(await store.retention().cachedAnchors()).toEqual([]);
  });

  it('T535: an interval anchor must be above the last; T535b: checkpoints are ordered only among themselves; T535c: time may not run backwards', async () => {
    const store = await storeWith(3);
    const p = provider();
    await anchorChain(store, p);
    await expect(anchorChain(store, p)).rejects.toThrow(/must be above the last interval anchor \(seq 3\)/);
    // A checkpoint anchor below the interval anchor is fine: another kind.
    const pruned = await pruneChain(store, { through: 2, olderThanMs: 0, by: 'ana', anchor: p });
    expect(pruned.anchor).toMatchObject({ kind: 'checkpoint', seq: 2 });
    await new Control({ policy: POLICY, store }).execute(
      createAction({ name: 'stripe.refund', arguments: { payment_id: 'x', amount: 1 }, principal: { agent: 'a' } }),
      async () => 1,
    );
    p.mode = 'time-backwards';
    await expect(anchorChain(store, p)).rejects.toThrow(/precedes the last interval anchor's/);
    expect((await store.retention().cachedAnchors()).map((a) => a.kind)).toEqual(['checkpoint', 'interval']);
  });

  it('a pruned anchored seq is superseded by the checkpoint anchor, and broken without it', async () => {
    const store = await storeWith(4);
    const p = provider();
    await anchorChain(store, p); // seq 4
    await pruneChain(store, { through: 4, olderThanMs: 0, by: 'ana', anchor: p });
    const report = await verifyAnchors(store, p);
    expect(report).toMatchObject({ status: 'ok', anchors: 2 });
    // The report says how much anchored history the checkpoint stands for, and since when.
    const checkpointAnchor = p.held.find((a) => a.kind === 'checkpoint')!;
    expect(report.superseded).toEqual({ through: 4, anchors: 1, checkpointAt: checkpointAnchor.at });
    const other = await storeWith(4);
    const q = provider();
    await anchorChain(other, q);
    await pruneChain(other, { through: 4, olderThanMs: 0, by: 'ana' });
    expect(names(await verifyAnchors(other, q))).toEqual(['anchor_broken@4']);
  });
});

describe('the HTTP anchor provider', () => {
  const SECRET = 'sixteen or more characters';
  function wired(secret = SECRET, tamper?: (r: Response) => Promise<Response>) {
    const backing = provider();
    const endpoint = anchorEndpoint({ secret: SECRET, provider: backing });
    const fetch = (async (url: string | URL | Request, init?: RequestInit) => {
      const r = await endpoint(new Request(String(url), init));
      return tamper ? tamper(r) : r;
    }) as typeof globalThis.fetch;
    return { backing, http: httpAnchorProvider({ url: 'https://anchors.example/v1', secret, fetch }) };
  }

  it('anchors and verifies through the endpoint, both directions signed', async () => {
    const store = await storeWith(2);
    const { backing, http } = wired();
    const a = await anchorChain(store, http);
    expect(backing.held).toEqual([a]);
    expect(await verifyAnchors(store, http)).toMatchObject({ status: 'ok', provider: 'https://anchors.example/v1' });
  });

  it('a wrong secret is refused by the endpoint (401), and an answer not signed with the secret is refused by the provider', async () => {
    const store = await storeWith(2);
    await expect(anchorChain(store, wired('another secret, long enough').http)).rejects.toThrow(/anchor_unavailable: .*HTTP 401/);
    // The answer's body changed in transit (or forged by whoever holds the store): its signature no longer verifies.
    const forged = wired(SECRET, async (r) => new Response(`${await r.text()} `, { status: r.status, headers: r.headers }));
    expect((await verifyAnchors(store, forged.http)).status).toBe('unavailable');
    expect(await anchorChain(store, forged.http).catch((e: unknown) => (e as Error).message)).toMatch(/not signed with the shared secret/);
    expect(await store.retention().cachedAnchors()).toEqual([]);
  });

  it('refuses a plain-http URL off the loopback, and a short secret', () => {
    expect(() => httpAnchorProvider({ url: 'http://anchors.example/', secret: SECRET })).toThrow(/https/);
    expect(() => httpAnchorProvider({ url: 'https://anchors.example/', secret: 'short' })).toThrow(/16/);
  });
});
