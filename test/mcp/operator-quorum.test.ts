// The operator's MCP server is a resolving surface (spec 05 §4.1): the human its identity source
// names is recorded as a verified approver, so two of them grant a request needing two, and the
// first is told "1 of 2 approvals: ana"; the same human again is refused and says so.
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ApprovalRequired, Control, loadPolicy, protect } from '@ctrlrun/kernel';
import { createOperatorServer, type OperatorIdentity } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

const POLICY = `schema: ctrlrun.policy/v6
controls:
  refund-limit: {title: Refund limit, approver_role: finance}
actions:
  pay.refund:
    effect: "refund:{id}"
    approvals_required: 2
    controls: [refund-limit]
    decision: approve
`;

const structured = (result: unknown) => ((result as { structuredContent?: unknown }).structuredContent ?? {}) as Record<string, unknown>;

describe('mcp-operator answers as a verified approver', () => {
  it('ana is counted (1 of 2), ana again is refused, bo grants; the roles claim entitles them; the action runs once', async () => {
    const store = await createSqlJsStore();
    const control = new Control({
      policy: loadPolicy(POLICY),
      store,
      principal: { agent: 'refund-agent' },
      approvers: { rolesClaim: 'roles' },
      logger: { warn: () => {} },
    });
    let who: OperatorIdentity = null;
    const server = createOperatorServer({ control, identify: async () => who });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = new Client({ name: 'human', version: '1.0.0' });
    await client.connect(b);

    let runs = 0;
    const refund = protect(() => ++runs, { control, name: 'pay.refund' });
    const err = await refund({ id: 'r1', amount: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalRequired);
    const id = (err as ApprovalRequired).requestId;

    who = { agent: 'mcp', user: 'ana', issuer: 'https://idp.example', claims: { roles: ['finance'] } };
    const first = await client.callTool({ name: 'approve', arguments: { request_id: id } });
    expect(structured(first)).toMatchObject({ status: 'pending', request_id: id, progress: '1 of 2 approvals: ana' });
    const again = await client.callTool({ name: 'approve', arguments: { request_id: id } }).catch((e: unknown) => e);
    expect(String((again as Error).message ?? JSON.stringify(again))).toContain('already approved it');

    who = { agent: 'mcp', user: 'bo', issuer: 'https://idp.example', claims: { roles: ['finance'] } };
    expect(structured(await client.callTool({ name: 'approve', arguments: { request_id: id } }))).toMatchObject({ status: 'granted' });
    const record = await store.getApproval(id);
    expect(record?.approvers?.map((x) => [x.user, x.entitled])).toEqual([
      ['ana', ['refund-limit']],
      ['bo', ['refund-limit']],
    ]);
    expect(await refund({ id: 'r1', amount: 5 }, { approvalId: id })).toBe(1);
    expect(runs).toBe(1);
    await client.close();
  });
});
