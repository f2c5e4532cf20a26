/**
 * Exchanges with the worker's retention and anchor routes, for their tests and the OpenAPI
 * check: {@link retentionExchanges} provokes every status the document lists for them.
 */
import { checkAnchor, type Anchor, type AnchorProvider } from '@ctrlrun/kernel';
import { AGENT, harness, OPERATOR, type Harness } from './harness.js';

/** An anchor provider kept in this process's memory (a real one: it records and answers), or one that always fails. */
export function memoryProvider(fail = false): AnchorProvider & { held: Anchor[] } {
  const held: Anchor[] = [];
  let n = 0;
  const failing = async (): Promise<never> => {
    throw new Error('connect ECONNREFUSED 127.0.0.1:9');
  };
  return {
    name: fail ? 'memory (down)' : 'memory',
    held,
    make: fail
      ? failing
      : async (seq, hash, kind) => {
          const a = checkAnchor({ seq, hash, kind, token: `mem_${++n}`, at: new Date(Date.UTC(2026, 11, 5, 9, 0, n)).toISOString() }, 'anchor');
          held.push(a);
          return { token: a.token, at: a.at };
        },
    check: fail ? failing : async (seq, hash, token) => held.some((a) => a.seq === seq && a.hash === hash && a.token === token),
    latest: fail ? failing : async () => held.reduce<Anchor | null>((b, a) => (b === null || a.seq > b.seq ? a : b), null),
    since: fail ? failing : async (seq) => held.filter((a) => a.seq >= seq).sort((a, b) => a.seq - b.seq),
  };
}

export const refund = (h: Harness, id: string) => h.call('POST', '/v1/actions', AGENT, { name: 'stripe.refund', arguments: { payment_id: id, amount: 100 } });

export interface Exchange {
  method: string;
  path: string;
  status: number;
  json: unknown;
}

/** Every status the retention routes document, provoked against real apps; what was sent and answered. */
export async function retentionExchanges(): Promise<Exchange[]> {
  const seen: Exchange[] = [];
  const on = (h: Harness) => async (method: string, path: string, token: string | null, body?: unknown) => {
    const r = await h.call(method, path, token, body);
    seen.push({ method, path, status: r.status, json: r.json });
    return r;
  };
  const h = await harness({ anchor: memoryProvider() });
  const call = on(h);
  for (const id of ['r1', 'r2', 'r3', 'r4']) await refund(h, id);
  await call('POST', '/v1/anchors', OPERATOR);
  await call('POST', '/v1/anchors', OPERATOR);
  await call('GET', '/v1/anchors/verify', OPERATOR);
  await call('POST', '/v1/retention/holds', OPERATOR, { fromSeq: 2, toSeq: 2, reason: 'matter 7', holdId: 'hold_m7' });
  await call('POST', '/v1/retention/holds', OPERATOR, { fromSeq: 2, reason: 'matter 7', holdId: 'hold_m7' });
  await call('POST', '/v1/retention/holds', OPERATOR, { fromSeq: 2 });
  await call('GET', '/v1/retention/holds', OPERATOR);
  await call('POST', '/v1/retention/prune', OPERATOR, { through: 3, olderThanSeconds: 0 });
  await call('POST', '/v1/retention/holds/hold_m7/release', OPERATOR);
  await call('POST', '/v1/retention/holds/hold_m7/release', OPERATOR);
  await call('POST', '/v1/retention/prune', OPERATOR, { through: 0, olderThanSeconds: 0 });
  await call('POST', '/v1/retention/prune', OPERATOR, { through: 3, olderThanSeconds: 0 });
  for (const [method, path] of [
    ['POST', '/v1/retention/prune'],
    ['GET', '/v1/retention/holds'],
    ['POST', '/v1/retention/holds'],
    ['POST', '/v1/retention/holds/hold_m7/release'],
    ['POST', '/v1/anchors'],
    ['GET', '/v1/anchors/verify'],
  ] as const) {
    await call(method, path, null, method === 'POST' ? {} : undefined);
    await call(method, path, AGENT, method === 'POST' ? {} : undefined);
  }
  const none = await harness();
  await on(none)('POST', '/v1/anchors', OPERATOR);
  await on(none)('GET', '/v1/anchors/verify', OPERATOR);
  const down = await harness({ anchor: memoryProvider(true) });
  for (const id of ['d1', 'd2', 'd3']) await refund(down, id);
  await on(down)('POST', '/v1/anchors', OPERATOR);
  await on(down)('POST', '/v1/retention/prune', OPERATOR, { through: 1, olderThanSeconds: 0 });
  await on(down)('GET', '/v1/anchors/verify', OPERATOR);
  return seen;
}
