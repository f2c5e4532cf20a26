// Forged rows in the operator's terminal (issue 10, finding 4): agent-controlled text (an action
// name, an argument, a principal, an effect key) reaches every human-readable line with its
// control, bidi and line-separator characters escaped, so each record stays one row; JSON output
// stays exact.
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, Control, EXAMPLE_POLICY_YAML, loadPolicy, createAction, showInvisible } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';
import { writeFileSync, mkdirSync } from 'node:fs';
import { scaled } from '../../../test/support/load.js';
import { visible } from '../src/format.js';
import { run, tempDir } from './support.js';

/** What must never reach a terminal raw. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/u;

/** Characters an attacker reaches for: CR, LF, ESC sequences, C1, DEL, bidi, separators, zero-width, a lone surrogate. */
const HOSTILE = [
  '\n',
  '\r',
  '\r\n',
  '\x1b[2K',
  '\x1b]0;owned\x07',
  '\x9b31m',
  '\x7f',
  '\x00',
  '\t',
  '\u202e',
  '\u202a',
  '\u2066',
  '\u2069',
  '\u200f',
  '\u2028',
  '\u2029',
  '\u200b',
  '\ufeff',
  '\u0085',
  '\u{e0041}',
  // Rendered as nothing or as a space: txn_1 + U+034F looks like txn_1.
  '\u034f',
  '\ufe0f',
  '\u{e0100}',
  '\u3164',
  '\u115f',
  '\u2800',
  '\u00a0',
  '\u3000',
];

/** Strings mixing printable text (ASCII and beyond) with hostile characters (well-formed Unicode: what a JSON document can hold). */
const hostileString = fc
  .array(
    fc.oneof(
      fc.constantFrom(...HOSTILE),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }),
    ),
    { minLength: 1, maxLength: 8 },
  )
  .map((parts) => parts.join(''))
  .filter((s) => s.trim() !== '');

describe('visible(text): the one escape of every text line', () => {
  it('property: no control, format, surrogate or separator character survives; safe text is unchanged', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          hostileString,
          fc.constantFrom('\ud800', 'a\udfffb'),
          fc.string({ unit: 'binary' }),
          fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)) }),
        ),
        (s) => {
          const shown = visible(s);
          expect(shown).not.toMatch(UNSAFE);
          if (!UNSAFE.test(s)) expect(shown).toBe(s);
          // Nothing but the unsafe characters is touched: removing them from both sides leaves the same text.
          const kept = [...s].filter((c) => !UNSAFE.test(c)).join('');
          expect(shown.replace(/\\(?:[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|u\{[0-9a-f]+\})/g, '')).toBe(
            kept.replace(/\\(?:[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|u\{[0-9a-f]+\})/g, ''),
          );
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("escapes exactly the characters the kernel's showInvisible does (its own copy of that set, kept equal)", () => {
    const differ: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const c = String.fromCodePoint(cp);
      if ((visible(c) !== c) !== (showInvisible(c) !== c)) differ.push(`U+${cp.toString(16).padStart(4, '0')}`);
    }
    expect(differ).toEqual([]);
  });

  it('writes the escapes a person can read', () => {
    expect(visible('a\nb\r\tc\x1b[2J\x7f\x9b')).toBe('a\\nb\\r\\tc\\x1b[2J\\x7f\\x9b');
    expect(visible('evil\u202etxt.exe \u2066x\u2069 \u2028\u2029 \ud800 \u{e0041}')).toBe(
      'evil\\u202etxt.exe \\u2066x\\u2069 \\u2028\\u2029 \\ud800 \\u{e0041}',
    );
    expect(visible('Zoë ✓ 東京 👩‍💻'.replace('\u200d', ''))).toBe('Zoë ✓ 東京 👩💻');
    expect(visible('txn_1\u034f amount\u3164 \u2800 a\u00a0b')).toBe('txn_1\\u034f amount\\u3164 \\u2800 a\\xa0b');
  });
});

/** A store in `dir` (example policy beside it) holding one denied, one allowed and one pending action per hostile string. */
async function hostileStore(
  dir: string,
  strings: { name: string; agent: string; payment: string; user: string },
): Promise<{ receipts: number; effects: number; actions: string[] }> {
  writeFileSync(join(dir, 'ctrlrun.yaml'), EXAMPLE_POLICY_YAML);
  mkdirSync(join(dir, '.ctrlrun'), { recursive: true });
  const store = await openStore(join(dir, '.ctrlrun', 'state.db'));
  const control = new Control({ policy: loadPolicy(EXAMPLE_POLICY_YAML), store, logger: { warn: () => {} } });
  const principal = { agent: strings.agent, user: strings.user };
  const actions: string[] = [];
  // Unknown action, hostile name: denied, with a receipt.
  const unknown = createAction({ name: strings.name, arguments: { note: strings.payment, [strings.user]: strings.name }, principal });
  actions.push(unknown.actionId);
  await control.execute(unknown, () => 'never').catch(() => undefined);
  // A refund whose effect key carries the hostile payment id: committed, with an effect record.
  const refund = createAction({ name: 'stripe.refund', arguments: { payment_id: strings.payment, amount: 100 }, principal });
  actions.push(refund.actionId);
  await control.execute(refund, () => ({ id: strings.payment }));
  // One waiting for a human: its approval request holds the hostile arguments.
  const big = createAction({ name: 'stripe.refund', arguments: { payment_id: `${strings.payment}-big`, amount: 200000 }, principal });
  actions.push(big.actionId);
  await control
    .execute(big, () => 'never')
    .catch((e: unknown) => {
      if (!(e instanceof ApprovalRequired)) throw e;
    });
  await store.close();
  return { receipts: 2, effects: 1, actions };
}

describe('every text output of agent-controlled text', () => {
  it(
    'property: receipts, effects, inspect and stats print no control/bidi character and one row per record; --json is exact',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.record({ name: hostileString, agent: hostileString, payment: hostileString, user: hostileString }), async (strings) => {
          const dir = tempDir();
          const seeded = await hostileStore(dir, strings);
          const outputs: string[] = [];
          const text = async (argv: string[]) => {
            const r = await run(argv, { cwd: dir, userName: () => 'ana' });
            expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(0);
            // Newlines end rows; nothing else unsafe is left.
            expect(r.stdout.replace(/\n/g, '')).not.toMatch(UNSAFE);
            expect(r.stderr).not.toMatch(UNSAFE);
            outputs.push(r.stdout);
            return r.stdout.replace(/\n$/, '').split('\n');
          };
          expect(await text(['receipts'])).toHaveLength(seeded.receipts);
          expect(await text(['effects'])).toHaveLength(seeded.effects);
          for (const id of seeded.actions) {
            const lines = await text(['inspect', id]);
            // The header row names the action id first; no line begins with anything the agent wrote.
            expect(lines[0]!.startsWith(`${id}  `)).toBe(true);
            for (const line of lines.slice(1)) expect(line).toMatch(/^( {2}[ \d]{3} {2}\S+ {2}[A-Z_]+|[a-z]+ +\S)/);
          }
          await text(['stats']);
          // JSON output is the stored document, exactly.
          const store = await openStore(join(dir, '.ctrlrun', 'state.db'), { readOnly: true });
          const stored = (await store.receipts()).map((r) => r.json);
          await store.close();
          const json = await run(['receipts', '--json'], { cwd: dir });
          expect(json.stdout).toBe(stored.map((j) => `${j}\n`).join(''));
          const parsed = json.stdout
            .trimEnd()
            .split('\n')
            .map((l) => JSON.parse(l) as { action: string; principal: { agent: string } });
          expect(parsed[0]!.action).toBe(strings.name);
          expect(parsed[0]!.principal.agent).toBe(strings.agent);
        }),
        { numRuns: 15 },
      );
    },
    scaled(60_000),
  );

  it('a forged row in an action name is shown as one row with the escape visible', async () => {
    const dir = tempDir();
    const forged =
      'x\r2026-01-01T00:00:00.000Z  ctr_00000000000000000000000000000000  stripe.refund  allow/committed  refund:ok  trusted-agent\n\x1b[1A\x1b[2K';
    await hostileStore(dir, { name: forged, agent: 'agent\u202eevil', payment: 'p\u2028q', user: 'u' });
    const r = await run(['receipts'], { cwd: dir });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('x\\r2026-01-01T00:00:00.000Z  ctr_');
    expect(lines[0]).toContain('trusted-agent\\n\\x1b[1A\\x1b[2K');
    expect(lines[0]).toMatch(/ {2}agent\\u202eevil$/);
    expect((await run(['effects'], { cwd: dir })).stdout).toMatch(/^refund:p\\u2028q {2}committed /);
    // An error message quoting agent text is one line too.
    const err = await run(['inspect', 'act_\x1b[31mred\nError: forged'], { cwd: dir });
    expect(err.code).toBe(1);
    expect(err.stderr).toBe('Error: no action act_\\x1b[31mred Error: forged\n');
  });
});
