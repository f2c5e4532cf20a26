/**
 * The element's and the machinery's DOM-free parts in Node: the canonical JSON shown is what the
 * receipt's action hash is the hash of, the rule shown is the rule that decided, the TypeScript
 * shown runs and does what the step did, the operator's Resolve goes through the kernel, and the
 * `policy` attribute is read as YAML or as a URL.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Control, loadPolicy, protect, verifyChain, type ReceiptRow } from '@ctrlrun/kernel';
import { sha256Tagged } from '@ctrlrun/kernel/store';
import { createTryIt, TRY_IT_POLICY_YAML, type RefundRequest, type RefundResult } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { GUIDE } from '../src/guide.js';
import { canonicalAction, decidingRule, evaluateRule, policyOf, protectCall } from '../src/machinery.js';
import { chainView, resolveAs, runRefundForm } from '../src/session.js';
import { dedentAttribute, isPolicyUrl } from '../widget/policy-attribute.js';

/** The guide's refunds in order, with the approval granted in step 2 presented where the guide says so. */
async function guided() {
  const store = await createSqlJsStore();
  const tryIt = createTryIt({ store });
  const out: { id: string; request: RefundRequest; result: RefundResult }[] = [];
  let approval: string | null = null;
  for (const step of GUIDE) {
    for (const a of step.actions) {
      if (a.fill.kind === 'approve') {
        approval = (await tryIt.step({ op: 'approve', request_id: out.at(-1)!.result.request_id! })).approval_id;
        continue;
      }
      const request: RefundRequest = {
        op: 'refund',
        payment_id: a.fill.payment_id,
        amount: a.fill.amount,
        lose_reply: a.fill.lose_reply,
        approval_id: a.fill.present ? approval : null,
      };
      out.push({ id: a.id, request, result: await tryIt.step(request) });
    }
  }
  return { store, tryIt, out };
}

describe('the machinery', () => {
  it("the canonical JSON shown hashes to the receipt's action_hash, for every guided refund", async () => {
    const { out } = await guided();
    for (const { id, request, result } of out) {
      const shown = canonicalAction(request);
      expect(sha256Tagged(new TextEncoder().encode(shown.canonical)), id).toBe(shown.actionHash);
      if (result.receipt) expect(shown.actionHash, id).toBe(result.receipt['action_hash']);
    }
  });

  it('a different amount or payment id is a different canonical text and hash (property)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30 }), fc.integer(), fc.integer(), (id, a, b) => {
        fc.pre(a !== b);
        const x = canonicalAction({ payment_id: id, amount: a });
        const y = canonicalAction({ payment_id: id, amount: b });
        expect(x.canonical).not.toBe(y.canonical);
        expect(x.actionHash).not.toBe(y.actionHash);
        expect(JSON.parse(x.canonical).arguments).toEqual({ amount: a, payment_id: id });
      }),
    );
  });

  it('the rule shown is the rule that decided: the receipt reason, or evaluate before any receipt', async () => {
    const policy = policyOf(TRY_IT_POLICY_YAML);
    const { out } = await guided();
    const reasons = out.map(({ id, request, result }) => [
      id,
      result.receipt ? String(result.receipt['decision_reason']) : evaluateRule(policy, request).reason,
    ]);
    expect(reasons).toEqual([
      ['1', 'rule[0]'],
      ['2a', 'rule[1]'],
      ['2c', 'rule[1]'],
      ['2d', 'rule[1]'],
      ['3', 'rule[1]'],
      ['4', 'rule[2]'],
      ['5a', 'rule[0]'],
      ['5b', 'rule[0]'],
      ['6', 'rule[0]'],
    ]);
    expect(decidingRule(policy, 'rule[0]', 'allow').text).toBe('rule[0]: when { amount_gte: 0, amount_lte: 100000 } → allow');
    expect(decidingRule(policy, 'rule[2]', 'deny').text).toBe('rule[2]: otherwise → deny');
    expect(decidingRule(policy, 'rule[9]', 'deny').text).toBe('rule[9] → deny');
    expect(decidingRule(policy, 'no_matching_rule', 'deny').text).toMatch(/no rule matched/);
    expect(decidingRule(loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    decision: approve\n'), 'decision', 'approve').text).toBe(
      'decision: otherwise → approve',
    );
  });

  it('the TypeScript shown runs, and does what the step did', async () => {
    const { out } = await guided();
    // Each snippet runs on a fresh store of its own, so it is compared with the steps that start a session for their payment id.
    const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (...args: string[]) => (...a: unknown[]) => Promise<unknown>;
    const want: Record<string, string> = { executed: 'executed', approval_required: 'ApprovalRequired', denied: 'ActionDenied' };
    for (const { id, request, result } of out.filter((x) => ['1', '2a', '4'].includes(x.id))) {
      const body = protectCall(request)
        .split('\n')
        .filter((l) => !l.startsWith('import '))
        .join('\n');
      const calls: unknown[] = [];
      const run = new AsyncFunction('Control', 'loadPolicy', 'protect', 'createSqlJsStore', 'policyYaml', 'stripeRefund', body);
      const got = await run(Control, loadPolicy, protect, createSqlJsStore, TRY_IT_POLICY_YAML, async (args: unknown) => void calls.push(args)).then(
        () => 'executed',
        (err: Error) => err.name,
      );
      expect([id, got, calls.length]).toEqual([id, want[result.outcome], result.remote_calls]);
    }
  });

  it('the TypeScript quotes a payment id as data, whatever it holds', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.integer(), (id, amount) => {
        const code = protectCall({ op: 'refund', payment_id: id, amount });
        const line = code.split('\n').at(-1)!;
        const m = /^await refund\(\{ payment_id: (.*), amount: (-?\d+) \}\);$/.exec(line);
        expect(m, line).not.toBeNull();
        expect(JSON.parse(m![1]!)).toBe(id);
        expect(Number(m![2])).toBe(amount);
      }),
    );
  });
});

describe('the session calls the page and the element share', () => {
  it('resolveAs moves an AMBIGUOUS effect on; anything else is shown as refused, nothing written', async () => {
    const store = await createSqlJsStore();
    const tryIt = createTryIt({ store });
    const lost = await runRefundForm(tryIt, store, { payment_id: 'txn_4', amount: '50000', lose_reply: true, approval_id: '' });
    expect(lost.kind === 'refund' && lost.result.outcome).toBe('reply_lost');
    const refused = await resolveAs(tryIt, 'refund:txn_9', 'committed');
    expect(refused).toMatchObject({ kind: 'refused', asked: 'resolve refund:txn_9 as committed' });
    const resolved = await resolveAs(tryIt, 'refund:txn_4', 'failed');
    expect(resolved).toMatchObject({ kind: 'resolve', result: { state: 'failed', resolved_by: 'human:operator' } });
    const { rows, report } = await chainView(store);
    expect(report.ok).toBe(true);
    expect(rows.every((r) => r.linked)).toBe(true);
  });

  it('chainView marks a row whose prev hash, stored or in its document, is not the hash above it', async () => {
    const { store } = await guided();
    const real = await store.receipts();
    const other = `sha256:${'1'.repeat(64)}`;
    const view = (rows: typeof real) => chainView({ receipts: async () => rows, chainHead: () => store.chainHead() });
    expect((await view(real)).rows.every((r) => r.linked)).toBe(true);
    const column = await view(real.map((r, i) => (i === 2 ? { ...r, prev_hash: other } : r)));
    expect(column.rows.map((r) => r.linked)).toEqual(real.map((_, i) => i !== 2));
    const inDocument = await view(real.map((r, i) => (i === 2 ? { ...r, json: JSON.stringify({ ...JSON.parse(r.json!), prev_hash: other }) } : r)));
    expect(inDocument.rows.map((r) => r.linked)).toEqual(real.map((_, i) => i !== 2));
    expect(inDocument.report.ok).toBe(false);
  });
});

describe('chainView, verifying only what is new', () => {
  it("property: whatever the rows do between two views of one store (grow, change, shrink), the report is verifyChain's", async () => {
    const { store } = await guided();
    const real = await store.receipts();
    expect(real.length).toBeGreaterThan(3);
    const edit = fc.record({
      length: fc.integer({ min: 0, max: real.length }),
      // Mostly intact views whose head is the last row, so the next view can build on them.
      tamper: fc.oneof(
        { weight: 2, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.record({ at: fc.nat(real.length - 1), field: fc.constantFrom('json', 'hash', 'result', 'seq') }) },
      ),
      headAt: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat(real.length) }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 8 }), async (edits) => {
        let rows: ReceiptRow[] = [];
        let head = await store.chainHead();
        // One store object for the whole sequence: the view may remember what it verified.
        const shown = { receipts: async () => rows, chainHead: async () => head };
        for (const e of edits) {
          rows = real.slice(0, e.length).map((r) => ({ ...r }));
          const t = e.tamper;
          if (t !== undefined && t.at < rows.length) {
            const r = rows[t.at]!;
            rows[t.at] =
              t.field === 'json'
                ? { ...r, json: r.json!.replace('"committed"', '"failed"') }
                : t.field === 'hash'
                  ? { ...r, hash: `sha256:${'2'.repeat(64)}` }
                  : t.field === 'result'
                    ? { ...r, result: 'failed' }
                    : { ...r, seq: (r.seq as number) + 1 };
          }
          const at = e.headAt ?? rows.length;
          head = at === 0 ? { seq: 0, hash: real[0]!.prev_hash! } : { seq: real[at - 1]!.seq as number, hash: real[at - 1]!.hash! };
          const { report } = await chainView(shown);
          expect(report).toEqual(verifyChain(rows, head));
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('the policy attribute', () => {
  it('a one-line URL or path is fetched; anything with a newline or not URL-shaped is YAML', () => {
    for (const url of ['./policy.yaml', '../p.yml', '/docs/policy.yaml', 'https://example.com/p.yaml', ' ./p.yaml ']) expect(isPolicyUrl(url), url).toBe(true);
    for (const yaml of ['schema: ctrlrun.policy/v2\nactions: {}', 'policy.yaml', 'https://x y', './a\n./b', 'actions:'])
      expect(isPolicyUrl(yaml), yaml).toBe(false);
    fc.assert(fc.property(fc.string(), (s) => void (isPolicyUrl(s) && expect(/[\r\n]/.test(s.trim())).toBe(false))));
  });

  it('YAML indented with the markup loads as written', () => {
    const inAttribute = `schema: ctrlrun.policy/v2
        actions:
          stripe.refund:
            effect: "refund:{payment_id}"
            decision: deny
      `;
    const text = dedentAttribute(inAttribute);
    expect(text).toBe('schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    decision: deny\n');
    expect(loadPolicy(text).evaluate('stripe.refund', { payment_id: 'x', amount: 1 }).decision).toBe('deny');
    // Starting on its own line, indented throughout.
    expect(dedentAttribute('\n    a: 1\n    b:\n      c: 2\n')).toBe('a: 1\nb:\n  c: 2\n');
    // Already flush: unchanged (but for the final newline).
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[a-z][a-z: ]{0,10}$/), { minLength: 1, maxLength: 6 }), (lines) => {
        expect(dedentAttribute(lines.join('\n'))).toBe(`${lines.join('\n').replace(/\s+$/, '')}\n`);
      }),
    );
  });
});
