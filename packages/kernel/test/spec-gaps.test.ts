// Tests the spec names that had none: T60/T60b/T60c (identity claims never hashed, carried where
// they belong), T65d (the environment belongs to the deployment), T173b/T173c (the policy hash
// an approval was asked under, beside the receipt's), T146 (the planners are pure), T125b (the
// kernel never imports verify) and the eager reconcile trigger.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, Control, InvalidArgument, actionHash, actionToJson, createAction, loadPolicy, type EffectRecord } from '@ctrlrun/kernel';
import { actionFromJson } from '@ctrlrun/kernel/store';
import { checkConsumable, planReservation, storedTime } from '@ctrlrun/kernel/store';
import { REFUND_POLICY, setup, T0 } from './harness.js';

const CLAIMS = {
  agent: 'refund-agent',
  user: 'ana@example.com',
  claims: { tenant: 'eu', level: 3, mfa: true },
  issuer: 'https://idp.example',
  expiresAt: '2026-06-01T00:00:00+00:00',
};
const refund = (principal: object = { agent: 'refund-agent' }, amount = 2000) =>
  createAction({ name: 'stripe.refund', arguments: { payment_id: 'txn_1', amount }, principal: principal as { agent: string } });

describe('T60: identity claims never enter the action hash, and travel where the spec says', () => {
  it('test_T60_claims_do_not_change_the_action_hash', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), { maxKeys: 3 }),
        fc.option(fc.webUrl(), { nil: null }),
        (claims, issuer) => {
          const bare = refund({ agent: 'a', user: 'u' });
          const claimed = refund({ agent: 'a', user: 'u', claims, issuer, expiresAt: '2027-01-01T00:00:00+00:00' });
          expect(claimed.actionHash).toBe(bare.actionHash);
          expect(actionHash(claimed)).toBe(actionHash(bare));
        },
      ),
    );
  });

  it('T60b: the stored action carries the full principal, and an older row without claims reads with defaults', () => {
    const a = refund(CLAIMS);
    const back = actionFromJson(actionToJson(a));
    expect(back.principal).toEqual({
      agent: 'refund-agent',
      user: 'ana@example.com',
      claims: CLAIMS.claims,
      issuer: CLAIMS.issuer,
      expiresAt: CLAIMS.expiresAt,
    });
    expect(back.actionHash).toBe(a.actionHash);
    // A row written before identity existed: principal {agent, user} only.
    const old = JSON.parse(actionToJson(refund({ agent: 'refund-agent', user: 'ana@example.com' }))) as { principal: Record<string, unknown> };
    for (const k of ['claims', 'issuer', 'expires_at', 'expiresAt']) delete old.principal[k];
    const parsed = actionFromJson(JSON.stringify(old));
    expect([
      parsed.principal.agent,
      parsed.principal.user,
      parsed.principal.claims ?? null,
      parsed.principal.issuer ?? null,
      parsed.principal.expiresAt ?? null,
    ]).toEqual(['refund-agent', 'ana@example.com', null, null, null]);
  });

  it('T60c: the receipt carries all five principal fields; no event carries a claim', async () => {
    const ctx = await setup();
    await ctx.control.execute(refund(CLAIMS), () => ({ ok: true }), { effectKey: 'refund:txn_1' });
    const principal = ctx.receipts.at(-1)!.document['principal'] as Record<string, unknown>;
    expect(Object.keys(principal).sort()).toEqual(['agent', 'claims', 'expires_at', 'issuer', 'user']);
    expect(principal).toMatchObject({ agent: 'refund-agent', user: 'ana@example.com', claims: CLAIMS.claims, issuer: CLAIMS.issuer });
    const events = JSON.stringify(await ctx.store.events());
    expect(events).not.toContain('"tenant"');
    expect(events).not.toContain('idp.example');
  });
});

describe('T65d: the environment belongs to the deployment', () => {
  it('a blank environment is refused at construction', async () => {
    const ctx = await setup();
    for (const environment of ['', '  ', '\t']) {
      expect(() => new Control({ policy: loadPolicy(REFUND_POLICY), store: ctx.store, environment })).toThrow(InvalidArgument);
    }
  });

  it('an action for another environment is refused before anything is written', async () => {
    const ctx = await setup(REFUND_POLICY, { environment: 'staging' });
    const before = (await ctx.store.events()).length;
    let ran = false;
    const production = refund(); // createAction defaults to production
    const err = await ctx.control.execute(production, () => void (ran = true), { effectKey: 'refund:txn_1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/environment "production" but this Control runs in "staging"/);
    expect(ran).toBe(false);
    expect((await ctx.store.events()).length).toBe(before);
    expect(await ctx.store.getEffect('refund:txn_1')).toBeNull();
    // The same action built for staging runs.
    const staging = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'txn_1', amount: 2000 },
      principal: { agent: 'refund-agent' },
      environment: 'staging',
    });
    await ctx.control.execute(staging, () => 'ok', { effectKey: 'refund:txn_1' });
    expect((await ctx.store.getEffect('refund:txn_1'))?.state).toBe('committed');
  });
});

describe("T173b/T173c: policy_hash_at_approval beside the receipt's policy_hash", () => {
  async function askThenUse(changed: string, first = REFUND_POLICY) {
    const ctx = await setup(first);
    const action = refund({ agent: 'refund-agent' }, 200000);
    const req = (await ctx.control.execute(action, () => 'x', { effectKey: 'refund:txn_1' }).catch((e: unknown) => e)) as ApprovalRequired;
    expect(req).toBeInstanceOf(ApprovalRequired);
    await ctx.control.grantApproval(req.requestId, { approver: 'human:ana' });
    const later = new Control({ policy: loadPolicy(changed), store: ctx.store, clock: ctx.clock, logger: { warn() {} } });
    const { receipt } = await later.executeWithReceipt(action, () => 'ok', { effectKey: 'refund:txn_1', approvalId: req.requestId });
    return { ctx, later, approval: (await ctx.store.getApproval(req.requestId))!, receipt };
  }

  it('test_T173b_a_changed_policy_that_still_requires_approval_consumes_it_and_the_hashes_differ', async () => {
    // Same decision for this action, another limit elsewhere: a different policy hash.
    const { ctx, later, approval, receipt } = await askThenUse(
      REFUND_POLICY.replace('iam.grant_admin: {decision: deny}', 'iam.grant_admin: {decision: approve}'),
    );
    expect(approval.status).toBe('consumed');
    expect(approval.request.policyHash).toBe(ctx.control.policyHash);
    expect(receipt.document['policy_hash']).toBe(later.policyHash);
    expect(later.policyHash).not.toBe(ctx.control.policyHash);
  });

  it('test_T173c_a_policy_changed_only_in_its_version_label_keeps_one_hash', async () => {
    const v4 = REFUND_POLICY.replace('ctrlrun.policy/v2', 'ctrlrun.policy/v4');
    const { ctx, approval, receipt } = await askThenUse(`version: "2026-02"\n${v4}`, `version: "2026-01"\n${v4}`);
    expect(approval.status).toBe('consumed');
    expect(approval.request.policyHash).toBe(ctx.control.policyHash);
    expect(receipt.document['policy_hash']).toBe(approval.request.policyHash);
    expect(receipt.document['policy_version']).toBe('2026-02');
  });
});

describe('the eager reconcile trigger', () => {
  it('an attempt recorded ambiguous asks the hook once, eagerly, and its answer moves the record', async () => {
    const ctx = await setup();
    const asked: string[] = [];
    const err = await ctx.control
      .execute(refund(), () => Promise.reject(new Error('read timeout')), {
        effectKey: 'refund:txn_1',
        reconcile: (key) => (asked.push(key), 'committed'),
        reconcileEagerly: true,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(asked).toEqual(['refund:txn_1']);
    const events = (await ctx.store.events()).filter((e) => e.type.startsWith('RECONCILIATION') || e.type === 'EFFECT_RESOLVED');
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['RECONCILIATION_STARTED', { effect_key: 'refund:txn_1', trigger: 'eager' }],
      ['RECONCILIATION_RESOLVED', { outcome: 'committed' }],
      ['EFFECT_RESOLVED', { state: 'committed', resolver: 'reconcile:stripe.refund', resolved_by: 'reconcile' }],
    ]);
    expect(await ctx.store.getEffect('refund:txn_1')).toMatchObject({ state: 'committed', resolvedBy: 'reconcile:stripe.refund' });
    // The receipt is never rewritten: it says what this attempt knew.
    expect(ctx.receipts.at(-1)!.document['result']).toBe('ambiguous');
  });

  it('without reconcileEagerly the hook is not asked after the attempt; eager without a hook is refused', async () => {
    const ctx = await setup();
    const asked: string[] = [];
    await ctx.control
      .execute(refund(), () => Promise.reject(new Error('read timeout')), { effectKey: 'refund:txn_1', reconcile: (key) => (asked.push(key), 'committed') })
      .catch(() => undefined);
    expect(asked).toEqual([]);
    expect((await ctx.store.getEffect('refund:txn_1'))?.state).toBe('ambiguous');
    await expect(ctx.control.execute(refund(), () => 'x', { effectKey: 'refund:txn_2', reconcileEagerly: true })).rejects.toThrow(InvalidArgument);
  });
});

describe('T146: the planners a store calls are pure', () => {
  const record = (over: Partial<EffectRecord> = {}): EffectRecord => ({
    effectKey: 'refund:1',
    state: 'reserved',
    actionId: 'act_1',
    attempt: 1,
    leaseExpiresAt: storedTime(new Date(T0.getTime() + 60_000)),
    resultJson: null,
    error: null,
    createdAt: storedTime(T0),
    updatedAt: storedTime(T0),
    resolvedBy: null,
    ...over,
  });
  const deepFreeze = <T>(v: T): T => {
    if (v && typeof v === 'object') for (const x of Object.values(v)) deepFreeze(x);
    return Object.freeze(v);
  };

  it('planReservation: the same inputs give the same plan, and nothing it is handed is changed', () => {
    const states = fc.constantFrom('reserved', 'executing', 'committed', 'failed', 'ambiguous') as fc.Arbitrary<EffectRecord['state']>;
    fc.assert(
      fc.property(fc.option(states, { nil: null }), fc.integer({ min: -120_000, max: 120_000 }), (state, offset) => {
        const found = state === null ? null : deepFreeze(record({ state, leaseExpiresAt: storedTime(new Date(T0.getTime() + offset)) }));
        const copy = JSON.stringify(found);
        const now = new Date(T0.getTime());
        const plan = (): unknown => {
          try {
            return planReservation(found, 'refund:1', 'act_2', 60_000, now);
          } catch (e) {
            return { threw: (e as Error).name, message: (e as Error).message };
          }
        };
        const once = plan();
        expect(once).toEqual(plan());
        // A free key always plans a fresh reservation (the call itself is well-formed).
        if (found === null) expect(once).toMatchObject({ reservation: { effectKey: 'refund:1', actionId: 'act_2', attempt: 1 } });
        expect(JSON.stringify(found)).toBe(copy);
        expect(now.getTime()).toBe(T0.getTime());
      }),
    );
  });

  it('checkConsumable gives one answer for one input', () => {
    const action = refund();
    const request = {
      requestId: 'apr_1',
      actionHash: action.actionHash,
      action,
      createdAt: storedTime(T0),
      expiresAt: storedTime(new Date(T0.getTime() + 60_000)),
      policyHash: null,
    };
    const approval = deepFreeze({ request, status: 'granted' as const, approver: 'ana', grantedAt: storedTime(T0), consumedAt: null });
    const once = (): unknown => {
      try {
        return checkConsumable(approval, 'apr_1', action.actionHash, T0);
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(once()).toMatchObject({ kind: 'ok', record: { status: 'granted', approver: 'ana' } });
    expect(once()).toEqual(once());
  });
});

describe('T125b: the kernel never imports verify', () => {
  it('the root entry, bundled, reaches no module under src/verify', async () => {
    const root = join(import.meta.dirname, '..');
    const out = await build({
      entryPoints: [join(root, 'src', 'index.ts'), join(root, 'src', 'store-api.ts')],
      bundle: true,
      write: false,
      outdir: '/nowhere',
      metafile: true,
      format: 'esm',
      platform: 'neutral',
      splitting: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(out.metafile.inputs);
    expect(inputs.some((p) => p.includes('src/control'))).toBe(true);
    expect(inputs.filter((p) => p.includes('/verify/'))).toEqual([]);
    // And verify composes Control like an application: it imports the kernel, never the other way round.
    expect(readFileSync(join(root, 'src', 'verify', 'rig.ts'), 'utf8')).toMatch(/from '\.\.\/control\.js'/);
  });
});

describe('the T66 guard: without an authority section no AUTHORITY_* event is ever written', () => {
  it('property: any decision, any amount, any outcome, on a policy with no authority section', async () => {
    const { protect } = await import('@ctrlrun/kernel');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ amount: fc.integer({ min: 0, max: 2_000_000 }), outcome: fc.constantFrom('ok', 'lost', 'not_executed'), grant: fc.boolean() }), {
          minLength: 1,
          maxLength: 6,
        }),
        async (calls) => {
          const ctx = await setup();
          expect(ctx.control.authority).toBeNull();
          const { NotExecuted } = await import('@ctrlrun/kernel');
          let i = 0;
          for (const c of calls) {
            const fn = protect<{ payment_id: string; amount: number }, string>(
              () => {
                if (c.outcome === 'lost') throw new Error('read timeout');
                if (c.outcome === 'not_executed') throw new NotExecuted('declined');
                return 'ok';
              },
              { control: ctx.control, name: 'stripe.refund' },
            );
            const args = { payment_id: `txn_${++i}`, amount: c.amount };
            const err = await fn(args).then(
              () => null,
              (e: unknown) => e,
            );
            if (err instanceof ApprovalRequired && c.grant) {
              await ctx.control.grantApproval(err.requestId, { approver: 'ana' });
              await fn(args, { approvalId: err.requestId }).catch(() => undefined);
            }
          }
          const types = (await ctx.store.events()).map((e) => e.type);
          expect(types.length).toBeGreaterThan(0);
          expect(types.filter((t) => t.startsWith('AUTHORITY'))).toEqual([]);
        },
      ),
      { numRuns: 15 },
    );
  });
});

describe('the template-precedence warning', () => {
  it("protect's effect template beats the policy's, and a disagreement warns once per function", async () => {
    const warnings: string[] = [];
    const ctx = await setup(REFUND_POLICY, { logger: { warn: (m: string) => void warnings.push(m) } });
    const { protect } = await import('@ctrlrun/kernel');
    const fn = protect<{ payment_id: string; amount: number }, string>(() => 'ok', {
      control: ctx.control,
      name: 'stripe.refund',
      effect: 'refund-v2:{payment_id}',
    });
    await fn({ payment_id: 'txn_1', amount: 10 });
    await fn({ payment_id: 'txn_2', amount: 10 });
    expect((await ctx.store.listEffects()).map((e) => e.effectKey)).toEqual(['refund-v2:txn_1', 'refund-v2:txn_2']);
    expect(warnings.filter((w) => w.includes('overrides the policy'))).toEqual([
      "[ctrlrun] stripe.refund: protect's effect template refund-v2:{payment_id} overrides the policy's refund:{payment_id}",
    ]);
    // Agreeing templates say nothing.
    const same = protect<{ payment_id: string; amount: number }, string>(() => 'ok', {
      control: ctx.control,
      name: 'stripe.refund',
      effect: 'refund:{payment_id}',
    });
    await same({ payment_id: 'txn_3', amount: 10 });
    expect(warnings.filter((w) => w.includes('overrides the policy'))).toHaveLength(1);
  });
});
