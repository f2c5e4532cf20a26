// The real `ctrlrun mcp-operator --stdio` over a SQLite file where one receipt's stored json was
// overwritten by raw SQL (issue 27): the receipts tool lists that row as unreadable — its seq,
// receipt id and the break's name, never the stored bytes — and every other receipt as usual;
// inspect_action says the action's receipt cannot be read instead of showing none.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Control, createAction, loadPolicy } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { CLI, NODE_TS, POLICY, ROOT, workDir } from './support.js';

const TIMEOUT = 180_000;
/** What raw SQL writes over one receipt: not JSON, with a terminal escape and a bidi override in it. */
const DAMAGE = '{"broken\u001b[31m\u202e';

type Json = Record<string, unknown>;

function structured(result: unknown): Json {
  return ((result as { structuredContent?: unknown }).structuredContent ?? {}) as Json;
}

function text(result: unknown): string {
  return ((result as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');
}

describe('ctrlrun mcp-operator on a store with a damaged receipt', () => {
  it(
    'receipts lists the unreadable row as such and the rest as usual; inspect_action names it',
    async () => {
      const dir = workDir();
      const state = join(dir, 'state.db');
      const store = await openStore(state);
      const actions: string[] = [];
      try {
        const control = new Control({ policy: loadPolicy(POLICY), store, logger: { warn: () => {} } });
        for (const id of ['p1', 'p2', 'p3']) {
          const action = createAction({
            name: 'mcp.pay.refund',
            arguments: { payment_id: id, amount: 5 },
            principal: { agent: 'agent-1' },
            environment: control.environment,
          });
          actions.push(action.actionId);
          await control.execute(action, () => 'ok');
        }
      } finally {
        await store.close();
      }
      const db = new Database(state);
      const ids = (db.prepare('SELECT receipt_id FROM receipts ORDER BY seq').all() as { receipt_id: string }[]).map((r) => r.receipt_id);
      db.prepare('UPDATE receipts SET json = ? WHERE seq = 2').run(DAMAGE);
      db.close();

      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [...NODE_TS, CLI, 'mcp-operator', '--stdio'],
        cwd: ROOT,
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', CTRLRUN_CONFIG: join(dir, 'ctrlrun.yaml'), CTRLRUN_STATE: state },
        stderr: 'pipe',
      });
      const human = new Client({ name: 'human', version: '1.0.0' });
      await human.connect(transport, { timeout: 120_000 });
      try {
        const listed = await human.callTool({ name: 'receipts', arguments: {} });
        expect(listed.isError).toBeFalsy();
        const receipts = structured(listed)['receipts'] as Json[];
        expect(receipts).toHaveLength(3);
        expect(receipts[0]).toMatchObject({ receipt_id: ids[0], action: 'mcp.pay.refund', arguments: { payment_id: 'p1' } });
        expect(receipts[1]).toEqual({ unreadable: true, seq: 2, receipt_id: ids[1], break: 'content_altered', detail: expect.stringContaining('unreadable') });
        expect(receipts[2]).toMatchObject({ receipt_id: ids[2], action: 'mcp.pay.refund', arguments: { payment_id: 'p3' } });
        // The stored bytes are never echoed, escaped or not.
        for (const shown of [text(listed), JSON.stringify(listed)]) {
          expect(shown).not.toContain('broken');
          expect(shown).not.toContain('\u001b');
          expect(shown).not.toContain('\u202e');
        }

        // Whether the damaged row cites a control cannot be read: a filter still lists it.
        const cited = structured(await human.callTool({ name: 'receipts', arguments: { control: 'SOC2-CC6.1' } }))['receipts'] as Json[];
        expect(cited).toEqual([expect.objectContaining({ unreadable: true, seq: 2, receipt_id: ids[1] })]);
        const newest = structured(await human.callTool({ name: 'receipts', arguments: { limit: 2 } }))['receipts'] as Json[];
        expect(newest.map((r) => r['receipt_id'])).toEqual(ids.slice(1));

        const inspected = await human.callTool({ name: 'inspect_action', arguments: { action_id: actions[1]! } });
        expect(inspected.isError).toBeFalsy();
        expect(structured(inspected)).toMatchObject({
          action_id: actions[1],
          receipt: null,
          receipt_unreadable: { receipt_id: ids[1], break: 'content_altered' },
        });
        expect(text(inspected)).not.toContain('broken');
        expect(structured(await human.callTool({ name: 'inspect_action', arguments: { action_id: actions[0]! } }))).toMatchObject({
          receipt: { receipt_id: ids[0] },
        });
        expect(structured(await human.callTool({ name: 'inspect_action', arguments: { action_id: actions[0]! } }))).not.toHaveProperty('receipt_unreadable');
      } finally {
        await human.close();
      }
    },
    TIMEOUT,
  );
});
