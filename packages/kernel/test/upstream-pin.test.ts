// The upstream pin admits (policy v8 `upstream`, spec 05 §3.2): an action whose entry pins the
// server it reaches runs when a gateway's observation matches the pin, and is refused before
// anything is written otherwise: `upstream_mismatch` for another certificate or tool schema,
// `upstream_unverified` for an observation that lacks what the pin names.
import { describe, expect, it } from 'vitest';
import { ActionDenied, createAction, InvalidArgument, toolSchemaDigest, type UpstreamObservation } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const A = `sha256:${'a'.repeat(64)}`;
const B = `sha256:${'b'.repeat(64)}`;
const SCHEMA = { type: 'object', properties: { payment_id: { type: 'string' }, amount: { type: 'integer', minimum: 1 } }, required: ['payment_id'] };
const S = toolSchemaDigest(SCHEMA);

const policy = (pin: string) =>
  `schema: ctrlrun.policy/v8\nactions:\n  mcp.pay.refund:\n    effect: "refund:{payment_id}"\n    upstream: ${pin}\n    decision: allow\n`;

async function attempt(pin: string, upstream: UpstreamObservation | null | undefined, payment = 'p1') {
  const ctx = await setup(policy(pin));
  let ran = 0;
  const action = createAction({ name: 'mcp.pay.refund', arguments: { payment_id: payment, amount: 5 }, principal: { agent: 'agent-1' } });
  const out = await ctx.control
    .execute(
      action,
      () => {
        ran += 1;
        return 'refunded';
      },
      upstream === undefined ? {} : { upstream },
    )
    .then(
      (r) => r,
      (e: unknown) => e,
    );
  return { ctx, out, ran };
}

describe('the upstream pin, observed', () => {
  it('test_T489_the_pinned_upstream_admits_the_action: the certificate and the tool schema the pin names', async () => {
    const { out, ran, ctx } = await attempt(`{tls_cert_sha256: ["${B}", "${A}"], tool_schema_sha256: "${S}"}`, { tlsCertSha256: A, toolSchemaSha256: S });
    expect(out).toBe('refunded');
    expect(ran).toBe(1);
    expect(ctx.receipts.at(-1)!.document['result']).toBe('committed');
  });

  it('another certificate or another schema is upstream_mismatch, before anything is reserved', async () => {
    for (const [pin, seen] of [
      [`{tls_cert_sha256: ["${A}"]}`, { tlsCertSha256: B, toolSchemaSha256: null }],
      [`{tool_schema_sha256: "${S}"}`, { tlsCertSha256: null, toolSchemaSha256: toolSchemaDigest({ ...SCHEMA, required: [] }) }],
    ] as const) {
      const { out, ran, ctx } = await attempt(pin, seen);
      expect((out as ActionDenied).reason, pin).toBe('upstream_mismatch');
      expect((out as Error).message).toContain('refused before the call');
      expect(ran).toBe(0);
      expect(await ctx.store.getEffect('refund:p1')).toBeNull();
      const r = ctx.receipts.at(-1)!.document;
      expect([r['result'], r['decision_reason']]).toEqual(['denied', 'upstream_mismatch']);
    }
  });

  it('test_T493: an observation without what the pin names (no TLS, the tool not listed, an unreadable file) is upstream_unverified', async () => {
    const cases: [string, UpstreamObservation | null][] = [
      [`{tls_cert_sha256: ["${A}"]}`, null],
      [`{tls_cert_sha256: ["${A}"]}`, { tlsCertSha256: null, toolSchemaSha256: S }],
      [`{tool_schema_sha256: "${S}"}`, { tlsCertSha256: A, toolSchemaSha256: null }],
      ['{tls_cert_file: /etc/up.pem}', { tlsCertSha256: A, toolSchemaSha256: null, certificateFiles: { '/etc/up.pem': null } }],
    ];
    for (const [pin, seen] of cases) {
      const { out, ran } = await attempt(pin, seen);
      expect((out as ActionDenied).reason, `${pin} ${JSON.stringify(seen)}`).toBe('upstream_unverified');
      expect(ran).toBe(0);
    }
  });

  it('a pinned certificate file admits the certificate it holds', async () => {
    const { out } = await attempt('{tls_cert_file: [/etc/a.pem, /etc/b.pem]}', {
      tlsCertSha256: B,
      toolSchemaSha256: null,
      certificateFiles: { '/etc/a.pem': A, '/etc/b.pem': B },
    });
    expect(out).toBe('refunded');
    const other = await attempt('{tls_cert_file: /etc/a.pem}', { tlsCertSha256: B, toolSchemaSha256: null, certificateFiles: { '/etc/a.pem': A } });
    expect((other.out as ActionDenied).reason).toBe('upstream_mismatch');
  });

  it('a malformed observation is refused naming the field; the schema digest ignores key order and nothing else', async () => {
    const bad = await attempt(`{tls_cert_sha256: ["${A}"]}`, { tlsCertSha256: 'AA', toolSchemaSha256: null } as unknown as UpstreamObservation);
    expect(bad.out).toBeInstanceOf(InvalidArgument);
    expect((bad.out as Error).message).toContain('upstream.tlsCertSha256');
    expect(toolSchemaDigest({ required: ['payment_id'], properties: SCHEMA.properties, type: 'object' })).toBe(S);
    expect(toolSchemaDigest({ ...SCHEMA, description: 'x' })).not.toBe(S);
    expect(() => toolSchemaDigest([1])).toThrow(InvalidArgument);
  });
});
