/**
 * Every JSON view of arguments and results shows exactly the hashed document's keys, including
 * `__proto__`, `constructor` and `prototype` (issue 10, finding 1): a key that a view drops is an
 * argument the human approves without seeing. Property-tested through the real app.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, parseJson, type JsonObject, type JsonValue } from '@ctrlrun/kernel';
import { AGENT, harness, OPERATOR } from './harness.js';

const POLICY = `schema: ctrlrun.policy/v2
actions:
  echo.free:
    decision: allow
  echo.reviewed:
    decision: approve
`;

/** Keys that an `out[k] = …` copy into `{}` mistreats, and a few ordinary ones. */
const key = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', 'a', 'b'), fc.string({ maxLength: 6 }));
/** JSON the edge accepts: integers, no floats. */
const { value: jsonValue } = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.string({ maxLength: 8 }),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(key, tie('value'), { maxKeys: 4 }),
  ),
}));
const argumentsObject = fc.dictionary(key, jsonValue, { maxKeys: 5 }).filter((o) => !Object.prototype.hasOwnProperty.call(o, 'data_scope'));

/** The response text read with the kernel's parser (prototype-free objects, so no key is lost here). */
function read(text: string): JsonObject {
  return parseJson(text, { floats: 'allow', what: 'response' }) as JsonObject;
}

/** Keys equal at every depth, values equal: the same canonical text. */
function same(view: unknown, document: unknown): boolean {
  return canonicalJson(view) === canonicalJson(document);
}

function executors(): Record<string, (args: JsonObject) => unknown> {
  const echo = (args: JsonObject): unknown => ({ echo: args });
  return { 'echo.free': echo, 'echo.reviewed': echo };
}

describe('views show exactly the hashed keys', () => {
  it('approvals, grant/deny answers, action results, receipts (by id and listed) and effects', async () => {
    const h = await harness({ executors: executors() }, POLICY);
    const raw = async (method: string, path: string, token: string, body?: string): Promise<{ status: number; json: JsonObject }> => {
      const init: RequestInit = {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      };
      if (body !== undefined) init.body = body;
      const r = await h.app.request(path, init);
      return { status: r.status, json: read(await r.text()) };
    };
    let n = 0;
    await fc.assert(
      fc.asyncProperty(argumentsObject, async (args) => {
        n++;
        // The body as the agent sends it; the hashed document is what the kernel canonicalised.
        const sent = JSON.stringify({ name: 'echo.reviewed', arguments: args });
        const asked = await raw('POST', '/v1/actions', AGENT, sent);
        expect(asked.status).toBe(202);
        const requestId = asked.json['requestId'] as string;
        const [record] = (await h.store.approvalsFor(asked.json['actionHash'] as string)).filter((a) => a.request.requestId === requestId);
        const hashed = (parseJson(record!.request.action.canonical) as JsonObject)['arguments'];
        expect(same(hashed, read(sent)['arguments'])).toBe(true);

        // The pending list, as the human sees it before answering.
        let shown: JsonObject | undefined;
        for (let after: string | null = null, first = true; first || after !== null; first = false) {
          const page = await raw('GET', `/v1/approvals?status=pending${after === null ? '' : `&after=${encodeURIComponent(after)}`}`, OPERATOR);
          shown ??= (page.json['approvals'] as JsonObject[]).find((a) => a['requestId'] === requestId);
          after = (page.json['next'] ?? null) as string | null;
        }
        const action = shown!['action'] as JsonObject;
        expect(same(action['arguments'], hashed), `approval view of ${sent}`).toBe(true);
        expect(same((parseJson(action['canonical'] as string) as JsonObject)['arguments'], hashed)).toBe(true);

        if (n % 2 === 0) {
          const denied = await raw('POST', `/v1/approvals/${requestId}/deny`, OPERATOR);
          expect(same(((denied.json['approval'] as JsonObject)['action'] as JsonObject)['arguments'], hashed), 'deny answer').toBe(true);
          return;
        }
        expect((await raw('POST', `/v1/approvals/${requestId}/grant`, OPERATOR)).status).toBe(200);
        const done = await raw('POST', '/v1/actions', AGENT, JSON.stringify({ name: 'echo.reviewed', arguments: args, approvalId: requestId }));
        expect(done.status).toBe(200);
        expect(same((done.json['result'] as JsonObject)['echo'], hashed), 'action result').toBe(true);

        const receipt = await raw('GET', `/v1/receipts/${String(done.json['receiptId'])}`, OPERATOR);
        expect(same((receipt.json['receipt'] as JsonObject)['arguments'], hashed), 'receipt by id').toBe(true);
        const listed = await raw('GET', `/v1/receipts?after=${Number(done.json['seq']) - 1}&limit=1`, OPERATOR);
        expect(same(((listed.json['receipts'] as JsonObject[])[0]!['receipt'] as JsonObject)['arguments'], hashed), 'receipt list').toBe(true);

        // An effect's stored result, through a caller key on an action without a template.
        const free = await raw('POST', '/v1/actions', AGENT, JSON.stringify({ name: 'echo.free', arguments: args, effectKey: `view-${n}` }));
        expect(free.status).toBe(200);
        const effect = await raw('GET', `/v1/effects/${encodeURIComponent(free.json['effectKey'] as string)}`, OPERATOR);
        expect(same(((effect.json['effect'] as JsonObject)['result'] as JsonObject)['echo'], hashed), 'effect result').toBe(true);
      }),
      { numRuns: 60 },
    );
  }, 120_000);

  it('a hand-written case: __proto__, constructor and prototype, nested, all shown', async () => {
    const h = await harness({ executors: executors() }, POLICY);
    const sent = '{"name":"echo.reviewed","arguments":{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}},"amount":5}}';
    const asked = await h.call('POST', '/v1/actions', AGENT, sent);
    expect(asked.status).toBe(202);
    const r = await h.app.request('/v1/approvals?status=pending', { headers: { authorization: `Bearer ${OPERATOR}` } });
    const text = await r.text();
    expect(text).toContain('"arguments":{"__proto__":{"admin":true},"amount":5,"constructor":{"prototype":{"x":1}}}');
  });
});
