// The operator server's list tools read the store a page at a time: an agent that files many
// approval requests (or a long receipt chain) cannot make `list_pending_approvals` or `receipts`
// load every row. The store here refuses the unbounded reads outright, so a tool that still used
// them fails; the answers are checked against what the paged reads must give.
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Control, createAction, loadPolicy, type StateStore } from '@ctrlrun/kernel';
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
        const action = createAction({ name: 'pay.refund', arguments: { id: `a${String(i).padStart(3, '0')}`, amount: 500 }, principal: { agent: 'agent-1' }, environment: filer.environment });
        await filer.execute(action, () => 'never').catch(() => undefined);
      }
      for (let i = 0; i < 430; i++) {
        const action = createAction({ name: 'pay.refund', arguments: { id: `r${i}`, amount: 5 }, principal: { agent: 'agent-1' }, environment: filer.environment });
        await filer.execute(action, () => 'ok');
      }
      const control = new Control({ policy, store: noUnboundedReads(raw), logger: { warn: () => {} } });
      const client = await operator(control);

      const listed = structured(await client.callTool({ name: 'list_pending_approvals', arguments: { limit: 200 } }))['approvals'] as { action: { arguments: { id: string } } }[];
      expect(listed).toHaveLength(200);
      expect(listed[0]!.action.arguments.id).toBe('a000');
      expect(listed[199]!.action.arguments.id).toBe('a199');

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
