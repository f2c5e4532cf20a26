/**
 * An agent cannot flood the operator's views (issue 10, finding 7): every list route pages with
 * a cursor and a bounded limit, receipt routes read only the rows they show, and one credential
 * may keep only so many approval requests waiting (429 past it, nothing written).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Control, loadPolicy, verifyChain, verifyStoredChain, type StateStore } from '@ctrlrun/kernel';
import { createApp, staticTokens } from '../../worker/src/index.js';
import { decodeApprovalCursor, encodeApprovalCursor } from '../../worker/src/routes/views.js';
import { AGENT, harness, OPERATOR, POLICY } from './harness.js';

const refund = (payment_id: string, amount: number) => ({ name: 'stripe.refund', arguments: { payment_id, amount } });
type Json = Record<string, unknown>;

/** Wraps a store so that the test sees every read that returns rows: how many in all, and the most one read returned. */
function counting(store: StateStore): { store: StateStore; reads: Map<string, number>; largest: Map<string, number> } {
  const reads = new Map<string, number>();
  const largest = new Map<string, number>();
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return async (...args: unknown[]) => {
        const out = (await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
        const n = Array.isArray(out) ? out.length : out !== null && typeof out === 'object' ? 1 : 0;
        if (n > 0) reads.set(String(prop), (reads.get(String(prop)) ?? 0) + n);
        if (Array.isArray(out)) largest.set(String(prop), Math.max(largest.get(String(prop)) ?? 0, n));
        return out;
      };
    },
  });
  return { store: wrapped, reads, largest };
}

describe('paged listings', () => {
  it('approvals: a cursor and a bounded limit; walking the pages lists each request once, in order', async () => {
    const h = await harness();
    const asked: string[] = [];
    for (let i = 0; i < 7; i++) asked.push(String((await h.call('POST', '/v1/actions', AGENT, refund(`pa${i}`, 200000 + i))).json['requestId']));
    await h.call('POST', `/v1/approvals/${asked[2]}/deny`, OPERATOR);
    const walk = async (query: string): Promise<string[]> => {
      const seen: string[] = [];
      let after: string | null = null;
      for (let pages = 0; pages < 20; pages++) {
        const r = await h.call('GET', `/v1/approvals?${query}&limit=3${after === null ? '' : `&after=${encodeURIComponent(after)}`}`, OPERATOR);
        expect(r.status).toBe(200);
        const page = r.json['approvals'] as Json[];
        expect(page.length).toBeLessThanOrEqual(3);
        seen.push(...page.map((a) => String(a['requestId'])));
        after = r.json['next'] as string | null;
        if (after === null) return seen;
        expect(after).toMatch(/^[A-Za-z0-9_-]+$/);
      }
      throw new Error('the listing never ended');
    };
    expect(await walk('status=pending')).toEqual(asked.filter((_, i) => i !== 2));
    expect(await walk('x=1')).toEqual(asked);
    // Without a limit: the default page (100), and `next` null when everything fit.
    expect((await h.call('GET', '/v1/approvals', OPERATOR)).json).toMatchObject({ next: null });
    for (const bad of ['limit=0', 'limit=1001', 'limit=x', 'after=not*a*cursor', `after=${'A'.repeat(3000)}`, 'after=WyJhIl0']) {
      const r = await h.call('GET', `/v1/approvals?${bad}`, OPERATOR);
      expect(r.status, bad).toBe(400);
      expect((r.json['error'] as Json)['path'], bad).toMatch(/^query\./);
    }
  });

  it('receipts: the list and the by-id route read only the rows they show, never every receipt', async () => {
    const base = await harness();
    for (let i = 0; i < 12; i++) await base.call('POST', '/v1/actions', AGENT, refund(`rb${i}`, 1));
    const { store, reads } = counting(base.store);
    const app = createApp({
      control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => undefined } }),
      auth: staticTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]),
    });
    const get = async (path: string): Promise<Json> => {
      const r = await app.request(path, { headers: { authorization: `Bearer ${OPERATOR}` } });
      expect(r.status, path).toBe(200);
      return (await r.json()) as Json;
    };
    const page = await get('/v1/receipts?after=3&limit=4');
    expect((page['receipts'] as Json[]).map((r) => r['seq'])).toEqual([4, 5, 6, 7]);
    expect(page['next']).toBe(7);
    const id = String((page['receipts'] as Json[])[1]!['receiptId']);
    expect(await get(`/v1/receipts/${id}`)).toMatchObject({ seq: 5, receiptId: id, intact: true, breaks: [] });
    expect(reads.get('receipts')).toBeUndefined();
    // One row past the page tells whether there is a next one; the by-id route reads one row.
    expect(reads.get('receiptsAfter')).toBe(5);
    expect(reads.get('getReceipt')).toBe(1);
  });
});

describe('chain verification', () => {
  it('runs one at a time: concurrent callers share one walk over the rows', async () => {
    const base = await harness();
    for (let i = 0; i < 3; i++) await base.call('POST', '/v1/actions', AGENT, refund(`vf${i}`, 1));
    let walks = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const store = new Proxy(base.store, {
      get(target, prop, receiver) {
        if (prop === 'chainHead') {
          return async () => {
            walks++;
            await gate;
            return target.chainHead();
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    let authenticated = 0;
    const operatorAuth = staticTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]);
    const app = createApp({
      control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => undefined } }),
      auth: async (request) => {
        const identity = await operatorAuth(request);
        authenticated++;
        return identity;
      },
    });
    const answers = Array.from({ length: 5 }, () => app.request('/v1/receipts/verify', { headers: { authorization: `Bearer ${OPERATOR}` } }));
    // Every request is past its credential check (and so at the route) before the walk may end.
    while (authenticated < 5) await new Promise((resolve) => setTimeout(resolve, 1));
    await new Promise((resolve) => setTimeout(resolve, 0));
    release();
    const bodies = await Promise.all(answers.map(async (r) => (await r).json()));
    expect(walks).toBe(1);
    for (const b of bodies) expect(b).toMatchObject({ ok: true, verified: 3 });
    // Once answered, the next call walks again.
    await app.request('/v1/receipts/verify', { headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(walks).toBe(2);
  });
});

describe('chain verification in pages', () => {
  it('never reads every receipt at once: however many an agent had written (each refusal leaves one), each read is a page, and the report is the whole walk', async () => {
    const h = await harness();
    // Refused calls (an action the policy does not name), each leaving a receipt with its arguments.
    for (let i = 0; i < 600; i++) expect((await h.call('POST', '/v1/actions', AGENT, { name: 'unknown.thing', arguments: { i } })).status).toBe(403);
    const { store, reads, largest } = counting(h.control.store);
    const app = createApp({
      control: new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => undefined } }),
      auth: staticTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]),
    });
    const r = await app.request('/v1/receipts/verify', { headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(r.status).toBe(200);
    const body = (await r.json()) as Json;
    expect(body).toEqual(JSON.parse(JSON.stringify(verifyChain(await h.control.store.receipts(), await h.control.store.chainHead()))));
    expect(body).toMatchObject({ ok: true, verified: 600 });
    expect(reads.get('receipts')).toBeUndefined();
    expect(reads.get('receiptsInChain')).toBe(600);
    expect(largest.get('receiptsInChain')).toBeLessThanOrEqual(500);
  });
});

describe('chain verification while agents act', () => {
  it('receipts chained during the walk are left to the next walk, not reported as a break; a chain that runs on past a head that did not move still is', async () => {
    const h = await harness();
    for (let i = 0; i < 600; i++) await h.call('POST', '/v1/actions', AGENT, { name: 'unknown.thing', arguments: { i } });
    let pages = 0;
    const busy = new Proxy(h.control.store, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'receiptsInChain' || typeof v !== 'function') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        return async (...args: unknown[]) => {
          const page = (await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
          // After the first page is read, five more calls are refused (each chains a receipt).
          if (pages++ === 0) for (let i = 0; i < 5; i++) await h.call('POST', '/v1/actions', AGENT, { name: 'unknown.thing', arguments: { late: i } });
          return page;
        };
      },
    });
    const report = await verifyStoredChain(busy);
    expect(report).toMatchObject({ ok: true, verified: 600, breaks: [] });
    expect(await verifyStoredChain(h.control.store)).toMatchObject({ ok: true, verified: 605 });
    // A row past a head that stays where it is: the chain runs on past its head, as before.
    const head = (await h.control.store.chainHead())!;
    const stuck = new Proxy(h.control.store, {
      get(target, prop, receiver) {
        if (prop === 'chainHead') return async () => ({ seq: head.seq - 1, hash: head.hash });
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    expect((await verifyStoredChain(stuck)).breaks.map((b) => b.name)).toContain('head_mismatch');
  }, 60_000);
});

describe('the approvals cursor', () => {
  it('round-trips any position, and any other text reads as no cursor (never a throw)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 40 }), (createdAt, requestId) => {
        const cursor = encodeApprovalCursor({ createdAt, requestId });
        expect(cursor).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(decodeApprovalCursor(cursor)).toEqual({ createdAt, requestId });
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.base64String(), fc.string({ unit: 'binary' })), (text) => {
        const read = decodeApprovalCursor(text);
        expect(read === null || (typeof read.createdAt === 'string' && typeof read.requestId === 'string')).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('pending approvals per credential', () => {
  const auth = staticTokens([
    { role: 'agent', token: AGENT, agent: 'billing-agent', user: 'u-42' },
    { role: 'agent', token: 'second-agent-token-000001', agent: 'billing-agent', user: 'u-43' },
    { role: 'operator', token: OPERATOR, operator: 'human:ops' },
  ]);

  it('past the limit a request that needs approval is 429 and writes nothing; others still run', async () => {
    const h = await harness({ maxPendingApprovals: 3, auth });
    const asked: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await h.call('POST', '/v1/actions', AGENT, refund(`pl${i}`, 200000));
      expect(r.status).toBe(202);
      asked.push(String(r.json['requestId']));
    }
    const before = await h.counts();
    const over = await h.call('POST', '/v1/actions', AGENT, refund('pl3', 200000));
    expect(over.status).toBe(429);
    expect(over.json['error']).toMatchObject({
      code: 'ERR_TOO_MANY_PENDING_APPROVALS',
      limit: 3,
      pending: 3,
      message: expect.stringContaining('maxPendingApprovals 3'),
    });
    expect(await h.counts()).toEqual(before);
    // Asking again for an action whose request is already waiting files nothing new: it is answered
    // with that request, never refused by the limit.
    const again = await h.call('POST', '/v1/actions', AGENT, refund('pl1', 200000));
    expect(again.status).toBe(202);
    expect(again.json['requestId']).toBe(asked[1]);
    expect((await h.store.listApprovals('pending')).length).toBe(3);
    // An action that needs no approval is not held back, and another credential has its own count.
    expect((await h.call('POST', '/v1/actions', AGENT, refund('pl_small', 500))).status).toBe(200);
    expect((await h.call('POST', '/v1/actions', 'second-agent-token-000001', refund('pl_other', 200000))).status).toBe(202);
    // Presenting a granted approval asks for nothing new.
    await h.call('POST', `/v1/approvals/${asked[0]}/grant`, OPERATOR);
    expect((await h.call('POST', '/v1/actions', AGENT, { ...refund('pl0', 200000), approvalId: asked[0] })).status).toBe(200);
    // An answered request frees its place.
    expect((await h.call('POST', '/v1/actions', AGENT, refund('pl3', 200000))).status).toBe(202);
    expect((await h.call('POST', '/v1/actions', AGENT, refund('pl4', 200000))).status).toBe(429);
  });

  it('parallel requests from one credential: exactly the limit get through', async () => {
    const h = await harness({ maxPendingApprovals: 3, auth });
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => h.call('POST', '/v1/actions', AGENT, refund(`pp${i}`, 200000))));
    expect(results.map((r) => r.status).sort()).toEqual([202, 202, 202, ...Array(7).fill(429)]);
    expect((await h.store.listApprovals('pending')).length).toBe(3);
  });

  it('defaults to 100, null turns it off, anything else is refused', async () => {
    await expect(harness({ maxPendingApprovals: 0 })).rejects.toThrow(/maxPendingApprovals must be a positive integer/);
    await expect(harness({ maxPendingApprovals: 1.5 })).rejects.toThrow(/maxPendingApprovals/);
    const off = await harness({ maxPendingApprovals: null });
    for (let i = 0; i < 3; i++) expect((await off.call('POST', '/v1/actions', AGENT, refund(`po${i}`, 200000))).status).toBe(202);
  });
});
