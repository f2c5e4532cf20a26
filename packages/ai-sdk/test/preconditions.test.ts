// protectTool({ preconditions }): the request the SDK's needsApproval files pins the world's
// fingerprint, and the approved call runs only while the world is the one the human saw.
import { describe, expect, it } from 'vitest';
import { tool, type ModelMessage } from 'ai';
import { z } from 'zod';
import { preconditionFingerprint } from '@ctrlrun/kernel';
import { protectTool } from '@ctrlrun/ai-sdk';
import { setup } from './support.js';

describe('protectTool passes a precondition provider through', () => {
  it('the request pins the fingerprint; a changed world refuses the approved call (precondition_changed); the same world runs it once', async () => {
    const ctx = await setup();
    const order = { status: 'paid' };
    const refunds: unknown[] = [];
    const refund = protectTool(
      tool({
        inputSchema: z.object({ payment_id: z.string(), amount: z.number().int() }),
        execute: async ({ payment_id }) => (refunds.push(payment_id), { ok: true }),
      }),
      { control: ctx.control, name: 'stripe.refund', approver: 'app:ana', preconditions: () => ({ order: 'o1', status: order.status }) },
    );
    const input = { payment_id: 'p1', amount: 200000 };
    const needsApproval = refund.needsApproval as (input: unknown, o: { toolCallId: string; messages: ModelMessage[] }) => Promise<boolean>;
    expect(await needsApproval(input, { toolCallId: 'c1', messages: [] })).toBe(true);
    const [request] = await ctx.approvals('pending');
    expect(request!.request.preconditionFingerprint).toBe(preconditionFingerprint({ order: 'o1', status: 'paid' }));
    const messages: ModelMessage[] = [
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'c1', toolName: 'refund', input },
          { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: 'a1', approved: true }] },
    ];
    order.status = 'refunded';
    expect(await refund.execute!(input as never, { toolCallId: 'c1', messages })).toMatchObject({ refused: true, reason: 'precondition_changed' });
    expect(refunds).toEqual([]);
    order.status = 'paid';
    expect(await refund.execute!(input as never, { toolCallId: 'c1', messages })).toEqual({ ok: true });
    expect(refunds).toEqual(['p1']);
  });
});
