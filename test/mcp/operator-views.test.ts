// What the operator server shows a human. Its list tools read the store a page at a time: an agent that files many
// approval requests (or a long receipt chain) cannot make `list_pending_approvals` or `receipts`
// load every row. The store here refuses the unbounded reads outright, so a tool that still used
// them fails; the answers are checked against what the paged reads must give. Its text shows
// every invisible character an agent put in an argument as a JSON escape, and parses to exactly
// the hashed value.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { canonicalJson, Control, createAction, loadPolicy, type StateStore } from '@ctrlrun/kernel';
import { createOperatorServer } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const POLICY = `schema: ctrlrun.policy/v2
actions:
  pay.refund:
    effect: "refund:{id}"
    rules:
      - when: {amount_lte: 100}
        decision: allow
      - decision: approve
`;

/** The store, with the reads that load every row refused. */
function noUnboundedReads(store: StateStore): StateStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'listApprovals' || prop === 'receipts') {
        return () => Promise.reject(new Error(`the operator read every row (${String(prop)})`));
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

async function operator(control: Control): Promise<Client> {
  const server = createOperatorServer({ control, identify: async () => null });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'human', version: '1.0.0' });
  await client.connect(b);
  return client;
}

function structured(result: unknown): Record<string, unknown> {
  return ((result as { structuredContent?: unknown }).structuredContent ?? {}) as Record<string, unknown>;
}

describe('mcp-operator list tools are bounded', () => {
  it('list_pending_approvals and receipts page through the store (never every row), oldest pending first, newest receipts last', async () => {
    const raw = await createSqlJsStore();
    try {
      const policy = loadPolicy(POLICY);
      const filer = new Control({ policy, store: raw, logger: { warn: () => {} } });
      // 450 pending requests (more than two pages) and 430 receipts.
      for (let i = 0; i < 450; i++) {
        const action = createAction({
          name: 'pay.refund',
          arguments: { id: `a${String(i).padStart(3, '0')}`, amount: 500 },
          principal: { agent: 'agent-1' },
          environment: filer.environment,
        });
        await filer.execute(action, () => 'never').catch(() => undefined);
      }
      for (let i = 0; i < 430; i++) {
        const action = createAction({
          name: 'pay.refund',
          arguments: { id: `r${i}`, amount: 5 },
          principal: { agent: 'agent-1' },
          environment: filer.environment,
        });
        await filer.execute(action, () => 'ok');
      }
      const control = new Control({ policy, store: noUnboundedReads(raw), logger: { warn: () => {} } });
      const client = await operator(control);

      const listed = structured(await client.callTool({ name: 'list_pending_approvals', arguments: { limit: 200 } }))['approvals'] as {
        action: { arguments: { id: string } };
      }[];
      // Oldest first (requests made in the same millisecond in request id order).
      const expected = (await raw.listApprovals('pending'))
        .map((a) => [a.request.createdAt, a.request.requestId, a.request.action.canonicalArguments['id']] as const)
        .sort((x, y) => (x[0] === y[0] ? (x[1] < y[1] ? -1 : 1) : x[0] < y[0] ? -1 : 1))
        .slice(0, 200)
        .map((x) => x[2]);
      expect(listed.map((a) => a.action.arguments.id)).toEqual(expected);

      const receipts = structured(await client.callTool({ name: 'receipts', arguments: { limit: 3 } }))['receipts'] as { arguments: { id: string } }[];
      const all = (await raw.receipts()).map((r) => (JSON.parse(r.json!) as { arguments: { id: string } }).arguments.id);
      expect(receipts.map((r) => r.arguments.id)).toEqual(all.slice(-3));
      expect(all.at(-1)).toBe('r429');
      expect(structured(await client.callTool({ name: 'receipts', arguments: { control: 'SOC2-CC6.1' } }))['receipts']).toEqual([]);
      await client.close();
    } finally {
      await raw.close();
    }
  }, 180_000);
});

describe('mcp-operator text shows what was hashed', () => {
  it('an argument with bidi overrides, zero-width or C1 characters (in a key or a value, __proto__ included) is written as JSON escapes, and the text parses to the hashed arguments', async () => {
    const store = await createSqlJsStore();
    try {
      const control = new Control({
        policy: loadPolicy('schema: ctrlrun.policy/v2\nactions:\n  pay.refund: {decision: approve}\n'),
        store,
        logger: { warn: () => {} },
      });
      const client = await operator(control);
      const invisible = fc.constantFrom(
        '\u202e',
        '\u202d',
        '\u2066',
        '\u2069',
        '\u200b',
        '\u200f',
        '\u2028',
        '\u0085',
        '\u009b',
        '\u007f',
        '\ufeff',
        '\u{e0041}',
        '\u061c',
      );
      const text = fc.array(fc.oneof(invisible, fc.string({ maxLength: 4 })), { maxLength: 6 }).map((p) => p.join(''));
      const key = fc.oneof(text, fc.constantFrom('__proto__', 'constructor', 'amount'));
      let n = 0;
      await fc.assert(
        fc.asyncProperty(fc.dictionary(key, text, { maxKeys: 4 }), text, async (extra, value) => {
          const args = JSON.parse(JSON.stringify({ ...extra, id: `c${n++}${value}` })) as Record<string, unknown>;
          const action = createAction({ name: 'pay.refund', arguments: args, principal: { agent: 'agent-1' }, environment: control.environment });
          await control.execute(action, () => 'never').catch(() => undefined);
          const result = await client.callTool({ name: 'list_pending_approvals', arguments: { limit: 200 } });
          const shown = (result.content as { type: string; text: string }[])[0]!.text;
          expect(shown.replace(/\n/g, '')).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
          const parsed = JSON.parse(shown) as { approvals: { action_hash: string; action: { arguments: Record<string, unknown> }; hashed: string }[] };
          const mine = parsed.approvals.find((a) => a.action_hash === action.actionHash)!;
          expect(canonicalJson(mine.action.arguments as never)).toBe(canonicalJson(action.canonicalArguments));
          expect(mine.hashed).toBe(action.canonical);
        }),
        { numRuns: 40 },
      );
      await client.close();
    } finally {
      await store.close();
    }
  }, 180_000);

  it('an integer beyond 2^53 in the arguments is shown as its digits, exactly as hashed (the structured value carries them as a string)', async () => {
    const store = await createSqlJsStore();
    try {
      const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } });
      const big = 123456789012345678901234567890n;
      const action = createAction({
        name: 'pay.refund',
        arguments: { id: 'p1', amount: 500, note: `ctrlrun-integer-00-${big}`, big },
        principal: { agent: 'a' },
      });
      await control.execute(action, () => 1).catch(() => undefined);
      const client = await operator(control);
      const result = await client.callTool({ name: 'list_pending_approvals', arguments: {} });
      const shown = (result.content as { type: string; text: string }[])[0]!.text;
      expect(action.canonical).toContain(`"big":${big}`);
      expect(shown).toContain(`"big": ${big}`);
      expect(shown).not.toContain(`"big": "${big}"`);
      // A string that looks like the marker stays a string.
      expect(shown).toContain(`"note": "ctrlrun-integer-00-${big}"`);
      const approvals = structured(result)['approvals'] as { action: { arguments: Record<string, unknown> }; hashed: string }[];
      expect(approvals[0]!.action.arguments['big']).toBe(String(big));
      expect(approvals[0]!.hashed).toBe(action.canonical);
      await client.close();
    } finally {
      await store.close();
    }
  });
});
