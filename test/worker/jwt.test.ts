// Agents authenticated by the kernel's JWT provider, operators by static tokens, in one app.
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import { createJwtIdentityProvider } from '@ctrlrun/kernel/jwt';
import { anyOf, identityProviderAuth, staticTokens } from '../../worker/src/index.js';
import { harness, OPERATOR } from './harness.js';

const ISSUER = 'https://idp.example';
const AUDIENCE = 'ctrlrun-worker';
const keys = await generateKeyPair('ES256', { extractable: true });
const other = await generateKeyPair('ES256', { extractable: true });
const now = Math.floor(Date.now() / 1000);
const sign = (key: CryptoKey, claims: Record<string, unknown> = {}) =>
  new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'support-agent', team: 'payments', secret_claim: 'x', exp: now + 300, ...claims })
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
    .sign(key);

async function jwtApp() {
  const provider = await createJwtIdentityProvider({
    publicKey: await exportSPKI(keys.publicKey),
    algorithms: ['ES256'],
    issuer: ISSUER,
    audience: AUDIENCE,
    tokenType: 'jwt',
    claimNames: ['team'],
    logger: { warn() {} },
  });
  const auth = anyOf(
    staticTokens([{ role: 'operator', token: OPERATOR, operator: 'human:ops' }]),
    identityProviderAuth(provider, { environment: 'production' }),
  );
  return harness({ auth });
}

describe('JWT agents on the worker', () => {
  it('a verified token proposes; its principal (with only the configured claims) reaches the receipt; an operator token still grants', async () => {
    const h = await jwtApp();
    const token = await sign(keys.privateKey);
    const r = await h.call('POST', '/v1/actions', token, { name: 'stripe.refund', arguments: { payment_id: 'j1', amount: 500 } });
    expect(r.status).toBe(200);
    const [row] = await h.store.receipts();
    expect(JSON.parse(row!.json!).principal).toEqual({
      agent: 'support-agent',
      user: null,
      claims: { team: 'payments' },
      issuer: ISSUER,
      expires_at: expect.any(String),
    });
    const pending = await h.call('POST', '/v1/actions', token, { name: 'stripe.refund', arguments: { payment_id: 'j2', amount: 200000 } });
    expect(pending.status).toBe(202);
    expect((await h.call('POST', `/v1/approvals/${String(pending.json['requestId'])}/grant`, token)).status).toBe(403);
    expect((await h.call('POST', `/v1/approvals/${String(pending.json['requestId'])}/grant`, OPERATOR)).status).toBe(200);
  });

  it('a token signed by another key, expired, or for another audience is 401 and writes nothing', async () => {
    const h = await jwtApp();
    for (const bad of [
      await sign(other.privateKey),
      await sign(keys.privateKey, { exp: now - 600 }),
      await sign(keys.privateKey, { aud: 'someone-else' }),
      'not.a.jwt',
    ]) {
      const r = await h.call('POST', '/v1/actions', bad, { name: 'stripe.refund', arguments: { payment_id: 'j3', amount: 500 } });
      expect(r.status).toBe(401);
    }
    expect(await h.counts()).toEqual({ events: 0, receipts: 0, effects: 0, approvals: 0 });
  });
});
