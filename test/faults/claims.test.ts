/**
 * docs/claims.md can't lie: every promise it quotes is in the README, every code reference's line
 * holds the symbol its row names, and every named test is in its file. A change that moves or
 * removes what a row points at fails here, naming the row and what it expected.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const CLAIMS = readFileSync(join(ROOT, 'docs', 'claims.md'), 'utf8');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

interface Row {
  promise: string;
  code: { path: string; line: number; symbol: string }[];
  tests: { path: string; title: string }[];
}

/** The table's rows: `| "promise" | path:line `symbol`; … | path `title`; … |`. */
export function parseClaims(text: string): Row[] {
  const rows: Row[] = [];
  for (const line of text.split('\n')) {
    const m = /^\| "(.+?)" \| (.+?) \| (.+?) \|$/.exec(line.trim());
    if (!m) continue;
    const code = [...m[2]!.matchAll(/(\S+?):(\d+) `([^`]+)`/g)].map((c) => ({ path: c[1]!, line: Number(c[2]), symbol: c[3]! }));
    const tests = [...m[3]!.matchAll(/(\S+) `([^`]+)`/g)].map((t) => ({ path: t[1]!, title: t[2]! }));
    rows.push({ promise: m[1]!, code, tests });
  }
  return rows;
}

/** Every problem with one row, in words (an empty list: the row holds). */
export function checkRow(row: Row, readme: string, read: (path: string) => string | null): string[] {
  const problems: string[] = [];
  const flat = (s: string) => s.replace(/\s+/g, ' ');
  if (!flat(readme).includes(flat(row.promise))) problems.push(`the README no longer says "${row.promise}"`);
  if (row.code.length === 0) problems.push('names no code');
  if (row.tests.length === 0) problems.push('names no test');
  for (const c of row.code) {
    const text = read(c.path);
    if (text === null) problems.push(`${c.path} does not exist`);
    else {
      const at = text.split('\n')[c.line - 1];
      if (at === undefined || !at.includes(c.symbol))
        problems.push(
          `${c.path}:${c.line} does not hold ${JSON.stringify(c.symbol)} (it reads ${JSON.stringify(at?.trim().slice(0, 80) ?? '<past the end>')})`,
        );
    }
  }
  for (const t of row.tests) {
    const text = read(t.path);
    if (text === null) problems.push(`${t.path} does not exist`);
    else if (!text.includes(t.title)) problems.push(`${t.path} has no test ${JSON.stringify(t.title)}`);
  }
  return problems;
}

const read = (path: string) => (existsSync(join(ROOT, path)) ? readFileSync(join(ROOT, path), 'utf8') : null);

describe('docs/claims.md', () => {
  const rows = parseClaims(CLAIMS);

  it('has a row for each promise, each with code and tests', () => {
    expect(rows.length).toBeGreaterThanOrEqual(8);
  });

  for (const row of rows) {
    it(`holds: ${row.promise}`, () => {
      expect(checkRow(row, README, read)).toEqual([]);
    });
  }

  it('fails when a line no longer holds what the row names, or a test or a promise is gone', () => {
    const row = rows[0]!;
    const moved = { ...row, code: [{ ...row.code[0]!, line: row.code[0]!.line + 1 }] };
    expect(checkRow(moved, README, read).join('\n')).toMatch(/does not hold/);
    const renamed = { ...row, tests: [{ ...row.tests[0]!, title: 'a test nobody wrote' }] };
    expect(checkRow(renamed, README, read).join('\n')).toMatch(/has no test/);
    expect(checkRow(row, README.replaceAll(row.promise, ''), read).join('\n')).toMatch(/no longer says/);
    expect(checkRow({ ...row, code: [{ path: 'nowhere.ts', line: 1, symbol: 'x' }] }, README, read).join('\n')).toMatch(/does not exist/);
  });
});
