// A tampered SQLite file (issue 10, finding 8): whatever someone with write access put in a
// receipt row, every reading command answers — a malformed row is a named break in
// `receipts --verify-chain`, the listing and `inspect` describe it, and nothing exits with a bare
// error. End to end through main() on a real file edited with better-sqlite3.
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { run, seed, type Seeded } from './support.js';

/** Seeds a store, then runs `update` (an SQL SET clause) on receipt seq 2 (the committed refund). */
async function tampered(set: string): Promise<Seeded> {
  const s = await seed();
  const db = new BetterSqlite3(s.storePath);
  db.exec(`UPDATE receipts SET ${set} WHERE seq = 2`);
  db.close();
  return s;
}

/** Every reading command; each must answer with exit 0, or 1 for a chain that does not verify. */
async function readAll(s: Seeded): Promise<Record<string, { code: number; stdout: string; stderr: string }>> {
  const out: Record<string, { code: number; stdout: string; stderr: string }> = {};
  const commands = [
    ['receipts'],
    ['receipts', '--json'],
    ['receipts', '--last', '3'],
    ['receipts', '--control', 'SOC2-CC6.1'],
    ['receipts', '--verify-chain'],
    ['receipts', '--verify-chain', '--json'],
    ['inspect', s.actions.refund],
    ['inspect', s.actions.refund, '--json'],
    ['inspect', s.actions.read],
    ['effects'],
    ['stats'],
  ];
  for (const argv of commands) out[argv.join(' ')] = await run(argv, { cwd: s.dir });
  return out;
}

function answersEverything(results: Awaited<ReturnType<typeof readAll>>): void {
  for (const [argv, r] of Object.entries(results)) {
    const chain = argv.startsWith('receipts --verify-chain');
    expect(r.code, `${argv}: ${r.stderr}`).toBe(chain ? 1 : 0);
    expect(r.stderr, argv).toBe('');
    expect(r.stdout, argv).not.toBe('');
  }
}

const TAMPERINGS: [string, string, RegExp][] = [
  ['json is not JSON', "json = 'not json {'", /content_altered at seq 2: the stored document cannot be hashed/],
  ['json is NULL', 'json = NULL', /content_altered at seq 2: .*json column is null/],
  ['json is an array', "json = '[]'", /content_altered at seq 2/],
  [
    'fields of the wrong type',
    `json = '{"action": 7, "principal": "x", "finished_at": {}, "action_hash": 5, "effect_key": [1], "receipt_id": {"a": 1}, "result": null}'`,
    /content_altered at seq 2/,
  ],
  ['the hash is gone', 'hash = NULL', /hash_missing at seq 2/],
];

describe('a tampered receipt row is described, never a crash', () => {
  for (const [what, set, named] of TAMPERINGS) {
    it(`${what}: every reading command answers; --verify-chain names the break`, async () => {
      const s = await tampered(set);
      const results = await readAll(s);
      answersEverything(results);
      expect(results['receipts --verify-chain']!.stdout).toMatch(named);
      const report = JSON.parse(results['receipts --verify-chain --json']!.stdout) as { ok: boolean; breaks: { name: string; seq: number | null }[] };
      expect(report.ok).toBe(false);
      expect(report.breaks.length).toBeGreaterThan(0);
      // The listing keeps one row per receipt, the tampered one included.
      expect(results['receipts']!.stdout.trimEnd().split('\n')).toHaveLength(4);
    });
  }

  it('inspect says a receipt exists but its document cannot be shown (not "awaiting a human")', async () => {
    const s = await tampered("json = 'not json {'");
    const r = await run(['inspect', s.actions.refund], { cwd: s.dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^receipt {5}ctr_[0-9a-f]{32} {2}\(not shown: its stored document is not valid JSON .*; run ctrlrun receipts --verify-chain\)$/m);
    expect(r.stdout).not.toContain('awaiting a human');
    const doc = JSON.parse((await run(['inspect', s.actions.refund, '--json'], { cwd: s.dir })).stdout) as Record<string, unknown>;
    expect(doc['receipt']).toBeNull();
  });

  it('a receipt whose seq is not an integer is a named break, and the other commands still answer', async () => {
    const s = await tampered('seq = 2.5');
    const results = await readAll(s);
    answersEverything(results);
    expect(results['receipts --verify-chain']!.stdout).toMatch(/^ {2}[a-z_]+( at seq \d+)?: .*seq.*$/m);
    expect(results['receipts']!.stdout.trimEnd().split('\n')).toHaveLength(4);
  });
});
