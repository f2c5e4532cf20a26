/**
 * The page's own modules in Node: the guide is spec 04 §4's sequence, every outcome the module
 * can return has its rendering branch naming its error class, the form reader refuses what is
 * not a request, and the sources leave one way to grant and one policy text.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createTryIt, TRY_IT_OUTCOMES, type ApproveResult, type RefundRequest, type RefundResult, type TryItOutcome } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { GUIDE } from '../src/guide.js';
import { APPROVAL_ID, formatMinor, parseAmount, parseRefund } from '../src/input.js';
import { OUTCOME_CLASS, renderApprove, renderRefund, renderRefused } from '../src/render.js';

const here = join(import.meta.dirname, '..');
const src = (file: string) => readFileSync(join(here, 'src', file), 'utf8');
const sources = readdirSync(join(here, 'src')).filter((f) => f.endsWith('.ts'));
/** The `<ctrlrun-try-it>` element's sources, which share `src/`'s modules. */
const widget = (file: string) => readFileSync(join(here, 'widget', file), 'utf8');
const widgetSources = readdirSync(join(here, 'widget')).filter((f) => f.endsWith('.ts'));
/** Every source of the page and the element, as [path, text]. */
const everySource = (): [string, string][] => [
  ...sources.map((f): [string, string] => [`src/${f}`, src(f)]),
  ...widgetSources.map((f): [string, string] => [`widget/${f}`, widget(f)]),
];

/** What the spec names for each outcome (spec 04 §4, "Page"). */
const SPEC_NAMES: Record<TryItOutcome, string[]> = {
  executed: ['EXECUTED'],
  approval_required: ['ApprovalRequired'],
  approval_mismatch: ['ApprovalMismatch'],
  denied: ['ActionDenied'],
  duplicate: ['DuplicateEffect'],
  ambiguous_retry: ['AmbiguousEffect', 'AMBIGUOUS'],
  reply_lost: ['AMBIGUOUS'],
};

/** Sends the guide's actions to the module the way the page does; returns each result by action id. */
async function runGuide() {
  const tryIt = createTryIt({ store: await createSqlJsStore() });
  let requestId: string | null = null;
  let approvalId: string | null = null;
  const out: { id: string; request: RefundRequest | null; result: RefundResult | ApproveResult }[] = [];
  for (const step of GUIDE) {
    for (const action of step.actions) {
      const f = action.fill;
      if (f.kind === 'approve') {
        const result = await tryIt.step({ op: 'approve', request_id: requestId! });
        approvalId = result.approval_id;
        out.push({ id: action.id, request: null, result });
        continue;
      }
      const request: RefundRequest = {
        op: 'refund',
        payment_id: f.payment_id,
        amount: f.amount,
        lose_reply: f.lose_reply,
        approval_id: f.present ? (approvalId ?? requestId) : null,
      };
      const result = await tryIt.step(request);
      if (result.request_id) requestId = result.request_id;
      out.push({ id: action.id, request, result });
    }
  }
  return out;
}

describe('the playground page', () => {
  it("the guide's requests, sent to the module, give the outcomes of spec 04 §4", async () => {
    const got = (await runGuide()).map(({ id, result }) => [id, result.outcome, 'remote_calls' in result ? result.remote_calls : null]);
    expect(got).toEqual([
      ['1', 'executed', 1],
      ['2a', 'approval_required', 0],
      ['2b', 'approved', null],
      ['2c', 'approval_mismatch', 0],
      ['2d', 'executed', 1],
      ['3', 'approval_mismatch', 1],
      ['4', 'denied', 0],
      ['5a', 'reply_lost', 1],
      ['5b', 'ambiguous_retry', 1],
      ['6', 'duplicate', 1],
    ]);
  });

  it('test_the_page_names_every_outcome_the_module_can_return', async () => {
    const seen = new Set<TryItOutcome>();
    for (const { request, result } of await runGuide()) {
      if (!request) {
        const entry = renderApprove({ op: 'approve', request_id: (result as ApproveResult).approval_id }, result as ApproveResult);
        expect(entry.title).toContain((result as ApproveResult).approval_id);
        continue;
      }
      const r = result as RefundResult;
      seen.add(r.outcome);
      const entry = renderRefund(request, r);
      const text = [entry.title, ...entry.lines].join('\n');
      for (const name of SPEC_NAMES[r.outcome]) expect(text, `${r.outcome} names ${name}`).toContain(name);
      expect(text).toContain(`remote refund calls for ${request.payment_id}: ${r.remote_calls}`);
      if (r.receipt) expect(text).toContain(`receipt ${String(r.receipt['receipt_id'])}`);
      if (r.reason) expect(entry.title).toContain(r.reason);
    }
    // The six steps produce every outcome there is; each has its own branch (none falls through).
    expect([...seen].sort()).toEqual([...TRY_IT_OUTCOMES].sort());
    for (const outcome of TRY_IT_OUTCOMES) {
      const entry = renderRefund({ op: 'refund', payment_id: 'txn_x', amount: 1 }, { outcome, error: null, message: null, remote_calls: 0 });
      expect(entry.title, outcome).not.toMatch(/unknown outcome/);
      expect(entry.tone, outcome).not.toBe('error');
      const cls = OUTCOME_CLASS[outcome];
      if (cls) expect(entry.title, outcome).toContain(cls);
    }
    expect(Object.keys(OUTCOME_CLASS).sort()).toEqual([...TRY_IT_OUTCOMES].sort());
    // consumed and mismatch read differently.
    const mismatch = renderRefund(
      { op: 'refund', payment_id: 't', amount: 1 },
      { outcome: 'approval_mismatch', error: 'ApprovalMismatch', message: 'm', remote_calls: 0, reason: 'mismatch' },
    );
    const consumed = renderRefund(
      { op: 'refund', payment_id: 't', amount: 1 },
      { outcome: 'approval_mismatch', error: 'ApprovalMismatch', message: 'm', remote_calls: 0, reason: 'consumed' },
    );
    expect(mismatch.lines[0]).not.toBe(consumed.lines[0]);
  });

  // test_the_playground_has_no_way_to_grant_but_the_human_button: in boundary.test.ts, on the syntax tree and the bundle (the page and the element).

  it('test_the_playground_policy_on_the_page_is_the_policy_in_the_module', () => {
    const main = src('main.ts');
    // The editor starts from the module's own constant, and the hash shown is the module's.
    expect(main).toMatch(/import \{[^}]*\bTRY_IT_POLICY_YAML\b[^}]*\} from '@ctrlrun\/kernel\/try-it'/);
    expect(main).toContain('ui.policy.value = TRY_IT_POLICY_YAML;');
    expect(main).toContain('ui.policyHash.textContent = live.tryIt.policyHash;');
    // No copy of the policy anywhere in the page.
    const html = readFileSync(join(here, 'index.html'), 'utf8');
    for (const [name, text] of [...everySource(), ['index.html', html]]) {
      expect(text, name).not.toMatch(/ctrlrun\.policy\/v\d|amount_lte|decision: (allow|approve|deny)/);
    }
  });

  it('reads amounts: any safe integer, and nothing that is not one', () => {
    fc.assert(
      fc.property(fc.maxSafeInteger(), fc.constantFrom('', ' ', '  '), fc.boolean(), (n, pad, plus) => {
        const text = `${pad}${plus && n >= 0 ? '+' : ''}${n}${pad}`;
        expect(parseAmount(text)).toEqual({ ok: true, amount: n });
      }),
    );
    fc.assert(
      fc.property(fc.string(), (s) => {
        const r = parseAmount(s);
        if (r.ok) expect(Number.isSafeInteger(r.amount) && /^\s*[+-]?\d+\s*$/.test(s)).toBe(true);
        else expect(r.message).toMatch(/whole number of cents|too large/);
      }),
    );
    for (const bad of ['12.5', '1e3', '0x10', '', '€5', '5 000', 'NaN', 'Infinity', '--1']) expect(parseAmount(bad).ok, bad).toBe(false);
    expect(parseAmount('99999999999999999999')).toEqual({ ok: false, message: expect.stringMatching(/too large/) });
  });

  it('formats minor units as euros and cents', () => {
    expect([formatMinor(50000), formatMinor(200000), formatMinor(-500), formatMinor(5), formatMinor(2000000)]).toEqual([
      '€500.00',
      '€2,000.00',
      '-€5.00',
      '€0.05',
      '€20,000.00',
    ]);
    fc.assert(
      fc.property(fc.maxSafeInteger(), (n) => {
        expect(Number(formatMinor(n).replace(/[€,.]/g, ''))).toBe(n);
        // Grouped as en-US groups, without building a number formatter per call.
        const euros = Math.trunc(Math.abs(n) / 100).toLocaleString('en-US');
        expect(formatMinor(n)).toBe(`${n < 0 ? '-' : ''}€${euros}.${String(Math.abs(n) % 100).padStart(2, '0')}`);
      }),
    );
  });

  it('reads the form: an approval to present must look like one; an empty one presents nothing', () => {
    const base = { payment_id: ' txn_1 ', amount: '50000', lose_reply: false, approval_id: '' };
    expect(parseRefund(base)).toEqual({ ok: true, request: { op: 'refund', payment_id: 'txn_1', amount: 50000, lose_reply: false, approval_id: null } });
    const id = `apr_${'ab'.repeat(16)}`;
    expect(parseRefund({ ...base, approval_id: ` ${id} ` })).toMatchObject({ ok: true, request: { approval_id: id } });
    expect(parseRefund({ ...base, approval_id: 'yes' })).toMatchObject({ ok: false, message: expect.stringMatching(/apr_ and 32 hex digits/) });
    fc.assert(fc.property(fc.string(), (s) => void expect(APPROVAL_ID.test(s)).toBe(/^apr_[0-9a-f]{32}$/.test(s))));
    expect(renderRefused('refund x', { name: 'InvalidArgument', message: 'nope' }).title).toBe('✗ NOT RUN — InvalidArgument: nope');
  });
});
