// Principals and where they come from (spec 02 §1): the resolution table, no principal leaves no
// evidence, a throwing provider is an IdentityError, an expired principal is refused before
// anything else, and the static and header providers.
import { describe, expect, it } from 'vitest';
import {
  ActionDenied,
  HeaderIdentityProvider,
  IdentityError,
  InvalidArgument,
  StaticIdentityProvider,
  createAction,
  protect,
  type IdentityContext,
  type IdentityProvider,
  type Principal,
} from '@ctrlrun/kernel';
import { ACTIONS, V3, action, rejection, rig } from './authority.fixtures.js';

const PLAIN = V3 + ACTIONS;
const WITH_AUTHORITY = `${V3}authority:\n  grants:\n    - id: g\n      subject: { agent: "*" }\n      actions: ["**"]\n${ACTIONS}`;

function recorder(answer: (ctx: IdentityContext) => Principal | null | Promise<Principal | null>) {
  const seen: IdentityContext[] = [];
  const provider: IdentityProvider = {
    resolve(ctx) {
      seen.push(ctx);
      return answer(ctx);
    },
  };
  return { provider, seen };
}

async function refunder(yaml: string, extra: Parameters<typeof rig>[1] = {}) {
  const r = await rig(yaml, extra);
  const fn = protect((args) => ({ refunded: args['amount'] }), { control: r.control, name: 'stripe.refund' });
  return { ...r, fn };
}

describe('T60: claims, issuer and expiry never enter the action hash', () => {
  it('test_T60_claims_do_not_change_the_action_hash', async () => {
    const bare = createAction({ name: 'x', arguments: { n: 1 }, principal: { agent: 'a', user: 'u' } });
    const full = createAction({
      name: 'x',
      arguments: { n: 1 },
      principal: { agent: 'a', user: 'u', claims: { role: 'admin', level: 3, ok: true }, issuer: 'idp', expiresAt: '2030-01-01T00:00:00+05:30' },
    });
    expect(full.actionHash).toBe(bare.actionHash);
    expect(createAction({ name: 'x', arguments: { n: 1 }, principal: { agent: 'a', user: 'v' } }).actionHash).not.toBe(bare.actionHash);
    // …and the receipt carries all five fields.
    const r = await rig(PLAIN);
    await r.control.execute(
      action({ principal: { agent: 'support-agent', user: 'alice', claims: { role: 'support' }, issuer: 'idp', expiresAt: '2030-01-01T00:00:00+05:30' } }),
      r.executor,
    );
    expect(r.lastReceipt()['principal']).toEqual({
      agent: 'support-agent',
      user: 'alice',
      claims: { role: 'support' },
      issuer: 'idp',
      expires_at: '2030-01-01T00:00:00+05:30',
    });
  });
});

describe('T61: an expired principal is refused first', () => {
  it('test_T61_an_expired_principal_is_refused_with_evidence_and_no_authority_or_policy_events', async () => {
    const r = await rig(WITH_AUTHORITY);
    const a = action({ principal: { agent: 'support-agent', expiresAt: '2026-09-03T10:12:00.999Z' } });
    const err = await rejection(r.control.execute(a, r.executor));
    expect(err).toBeInstanceOf(IdentityError);
    expect(r.types()).toEqual(['ACTION_PROPOSED', 'ACTION_DENIED']);
    expect(r.data('ACTION_DENIED')).toEqual([{ reason: 'principal_expired' }]);
    expect(r.lastReceipt()).toMatchObject({ result: 'denied', decision: 'deny', decision_reason: 'principal_expired' });
    expect(await r.store.listApprovals()).toEqual([]);
    expect(r.calls).toBe(0);
  });

  it('test_T61_evaluate_says_deny_principal_expired_and_writes_nothing', async () => {
    const r = await rig(WITH_AUTHORITY);
    const a = action({ principal: { agent: 'support-agent', expiresAt: '2026-09-03T10:12:00Z' } });
    expect(await r.control.evaluate(a)).toMatchObject({ decision: 'deny', reason: 'principal_expired' });
    expect(await r.store.events()).toEqual([]);
    // Valid up to and including the instant.
    r.set('2026-09-03T10:12:00Z');
    expect((await r.control.evaluate(a)).decision).toBe('allow');
  });
});

describe('T62: no principal is refused with no receipt and no events', () => {
  it('test_T62_no_provider_and_no_principal_is_no_principal', async () => {
    const { fn, store, warnings } = await refunder(PLAIN);
    const err = await rejection(fn({ amount: 5 }));
    expect(err).toBeInstanceOf(ActionDenied);
    expect(err).toMatchObject({ reason: 'no_principal', code: 'ERR_ACTION_DENIED' });
    expect(await store.events()).toEqual([]);
    expect(await store.receipts()).toEqual([]);
    expect(warnings.join()).toMatch(/stripe\.refund.*no principal/);
  });

  it('test_T62_a_declining_provider_with_no_context_is_no_principal', async () => {
    const { provider } = recorder(() => null);
    const { fn, store } = await refunder(PLAIN, { identity: provider });
    expect(await rejection(fn({ amount: 5 }))).toMatchObject({ reason: 'no_principal' });
    expect(await store.events()).toEqual([]);
  });

  it('the resolution table, row by row', async () => {
    const agentP: Principal = { agent: 'from-provider', user: null };
    // none + context → context's
    const a = await refunder(PLAIN);
    await a.fn({ amount: 5 }, { principal: { agent: 'from-context' } });
    expect(a.lastReceipt()['principal']).toMatchObject({ agent: 'from-context' });
    // set + answers → provider's, whatever the context says (one warning per Control naming both)
    const b = recorder(() => agentP);
    const B = await refunder(PLAIN, { identity: b.provider, principal: { agent: 'default' } });
    await B.fn({ amount: 5 }, { principal: { agent: 'from-context', user: 'u' } });
    await B.fn({ amount: 6 }, { principal: { agent: 'from-context', user: 'u' } });
    expect(B.lastReceipt()['principal']).toMatchObject({ agent: 'from-provider' });
    expect(B.warnings.filter((w) => /provider resolved/.test(w))).toHaveLength(1);
    expect(B.warnings[0]).toMatch(/from-provider.*from-context\/u/);
    // The provider sees the action, the environment, the hint and the headers (names lower-cased).
    await B.fn({ amount: 7 }, { headers: { 'X-Agent': 'h' } });
    expect(b.seen.at(-1)).toEqual({ action: 'stripe.refund', environment: 'production', headers: { 'x-agent': 'h' }, agent: 'default', user: null });
    // set + declines + context, no authority → context's
    const c = await refunder(PLAIN, { identity: recorder(() => null).provider });
    await c.fn({ amount: 5 }, { principal: { agent: 'from-context' } });
    expect(c.lastReceipt()['principal']).toMatchObject({ agent: 'from-context' });
    // set + declines + context, authority loaded → no_principal (no backfill)
    const d = await refunder(WITH_AUTHORITY, { identity: recorder(() => null).provider });
    expect(await rejection(d.fn({ amount: 5 }, { principal: { agent: 'from-context' } }))).toMatchObject({ reason: 'no_principal' });
    expect(await d.store.events()).toEqual([]);
    // A header given twice is ambiguous: no_principal, no evidence.
    const e = await refunder(PLAIN, { identity: recorder(() => agentP).provider });
    expect(await rejection(e.fn({ amount: 5 }, { headers: { 'X-Agent': 'a', 'x-agent': 'b' } }))).toMatchObject({ reason: 'no_principal' });
  });

  it('resolvePrincipal is the public reader', async () => {
    const r = await rig(PLAIN, { principal: { agent: 'default' } });
    expect(await r.control.resolvePrincipal('x')).toMatchObject({ agent: 'default', user: null });
    expect(await r.control.resolvePrincipal('x', { principal: { agent: 'other', user: 'u' } })).toMatchObject({ agent: 'other', user: 'u' });
    expect(await r.store.events()).toEqual([]);
  });
});

describe('T65: a throwing provider is an IdentityError, and nothing fills in', () => {
  it('test_T65_a_raising_provider_refuses_and_leaves_no_evidence', async () => {
    const boom = recorder(() => {
      throw new TypeError('the token service is down');
    });
    const { fn, store, warnings } = await refunder(PLAIN, { identity: boom.provider, principal: { agent: 'context' } });
    const err = await rejection(fn({ amount: 5 }));
    expect(err).toBeInstanceOf(IdentityError);
    expect(err).toMatchObject({ reason: 'provider_raised' });
    expect((err as Error).cause).toBeInstanceOf(TypeError);
    expect(warnings.join()).toMatch(/the token service is down/);
    expect(await store.events()).toEqual([]);
    expect(await store.receipts()).toEqual([]);
    // An IdentityError passes through as itself.
    const own = new IdentityError('credential revoked');
    const { fn: fn2 } = await refunder(PLAIN, { identity: recorder(() => Promise.reject(own)).provider });
    expect(await rejection(fn2({ amount: 5 }))).toBe(own);
    // Garbage from a provider is not a principal.
    const { fn: fn3 } = await refunder(PLAIN, { identity: recorder(() => ({ agent: '' }) as Principal).provider });
    expect(await rejection(fn3({ amount: 5 }))).toMatchObject({ name: 'IdentityError', reason: 'not_a_principal' });
    // Nor is an expiry no clock can read (year 10000, no offset): an identity error, never a bad request.
    for (const expiresAt of ['+010000-01-01T00:00:00.000Z', '2027-01-01T00:00:00', 'x'.repeat(100_000)]) {
      const { fn: fn4, store: store4 } = await refunder(PLAIN, { identity: recorder(() => ({ agent: 'bot', user: null, expiresAt })).provider });
      const refused = await rejection(fn4({ amount: 5 }));
      expect(refused).toMatchObject({ name: 'IdentityError', reason: 'expires_at_invalid' });
      expect(refused.message.length).toBeLessThan(300);
      expect(await store4.events()).toEqual([]);
    }
    // The message shows the expiry it names as it is: a bidi override or a NUL is written as an escape.
    const { fn: fn5 } = await refunder(PLAIN, { identity: recorder(() => ({ agent: 'bot', user: null, expiresAt: '2027-01-01\u202eZ00:00\u0000' })).provider });
    const shown = (await rejection(fn5({ amount: 5 }))).message;
    expect(shown).toContain('2027-01-01\\u202eZ00:00\\u0000');
    expect(shown).not.toMatch(/[\u202e\u0000]/);
  });
});

describe('T63–T64: the core providers', () => {
  it('test_T63_the_static_provider_gives_one_principal_and_warns_once', async () => {
    const warned: string[] = [];
    const s = new StaticIdentityProvider(
      { agent: 'ops-bot', user: 'ops', claims: { team: 'ops' }, issuer: 'config', expiresAt: '2027-01-01T00:00:00Z' },
      { logger: { warn: (m: string) => void warned.push(m) } },
    );
    expect(warned).toHaveLength(1);
    const { fn, lastReceipt } = await refunder(PLAIN, { identity: s });
    await fn({ amount: 5 }, { principal: { agent: 'ignored' } });
    await fn({ amount: 6 });
    expect(warned).toHaveLength(1);
    expect(lastReceipt()['principal']).toEqual({
      agent: 'ops-bot',
      user: 'ops',
      claims: { team: 'ops' },
      issuer: 'config',
      expires_at: '2027-01-01T00:00:00Z',
    });
    expect(() => new StaticIdentityProvider({ agent: '' }, { logger: { warn: () => {} } })).toThrow(InvalidArgument);
    expect(() => new StaticIdentityProvider({ agent: 'a', expiresAt: '2027-01-01T00:00:00' }, { logger: { warn: () => {} } })).toThrow(InvalidArgument);
  });

  it('test_T64_the_header_provider_reads_case_insensitive_headers', async () => {
    const warned: string[] = [];
    const h = new HeaderIdentityProvider(
      { agentHeader: 'X-Ctrlrun-Agent', userHeader: 'X-Ctrlrun-User', issuer: 'edge-proxy' },
      { logger: { warn: (m: string) => void warned.push(m) } },
    );
    expect(warned).toHaveLength(1);
    const ctx = (headers: Record<string, string>): IdentityContext => ({ action: 'a', environment: 'production', headers, agent: null, user: null });
    expect(h.resolve(ctx({ 'x-ctrlrun-agent': 'bot', 'x-ctrlrun-user': 'alice' }))).toEqual({ agent: 'bot', user: 'alice', issuer: 'edge-proxy' });
    expect(h.resolve(ctx({ 'x-ctrlrun-agent': 'bot' }))).toMatchObject({ agent: 'bot', user: null });
    expect(h.resolve(ctx({ 'x-ctrlrun-agent': 'bot', 'x-ctrlrun-user': ' ' }))).toMatchObject({ user: null });
    expect(h.resolve(ctx({}))).toBeNull();
    expect(h.resolve(ctx({ 'x-ctrlrun-agent': '  ' }))).toBeNull();
    // Through protect: any header spelling reaches it.
    const { fn, lastReceipt } = await refunder(PLAIN, { identity: h });
    await fn({ amount: 5 }, { headers: { 'X-CTRLRUN-AGENT': 'bot' } });
    expect(lastReceipt()['principal']).toEqual({ agent: 'bot', user: null, claims: {}, issuer: 'edge-proxy', expires_at: null });
    expect(() => new HeaderIdentityProvider({ agentHeader: '' })).toThrow(InvalidArgument);
  });
});
