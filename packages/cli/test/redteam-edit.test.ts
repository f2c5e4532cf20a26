// Red team of `ctrlrun approve --edit`: what is printed is what was hashed, for any JSON the kernel takes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseJson } from '@ctrlrun/kernel';
import { run, seed } from './support.js';

describe('ctrlrun approve --edit, red team', () => {
  it('--json prints an edit holding an integer beyond 2^53 (and a __proto__ key) exactly as hashed, instead of failing after the grant was written', async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 150000, "ref": 123456789012345678901234567890, "__proto__": {"x": 1}}\n');
    const r = await run(['approve', id, '--edit', 'edit.json', '--as', 'alice', '--json'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = parseJson(r.stdout.trim()) as Record<string, unknown>;
    const approved = out['approved_arguments'] as Record<string, unknown>;
    expect(approved['ref']).toBe(123456789012345678901234567890n);
    expect(Object.prototype.hasOwnProperty.call(approved, '__proto__')).toBe(true);
  });
});

describe('ctrlrun approvals --json, red team', () => {
  it('lists a request whose agent-chosen arguments hold an integer beyond 2^53 (one such request hid every request from the JSON view)', async () => {
    const s = await seed();
    const id = s.pending[0];
    writeFileSync(join(s.dir, 'edit.json'), '{"payment_id": "txn_2", "amount": 150000, "ref": 123456789012345678901234567890}\n');
    expect((await run(['approve', id, '--edit', 'edit.json', '--as', 'alice'], { cwd: s.dir })).code).toBe(0);
    const r = await run(['approvals', '--status', 'all', '--json'], { cwd: s.dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const doc = parseJson(r.stdout.trim()) as { approvals: { action: { arguments: Record<string, unknown> } }[] };
    expect(doc.approvals.some((a) => a.action.arguments['ref'] === 123456789012345678901234567890n)).toBe(true);
  });
});
