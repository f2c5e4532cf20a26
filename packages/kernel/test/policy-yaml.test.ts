// The policy's YAML is read as the reference read it: PyYAML safe_load, YAML 1.1 scalars,
// duplicate keys refused (PITFALLS.md; spec 01 §14).
import { describe, expect, it } from 'vitest';
import { loadAuthority, loadGrant, loadPolicy, PolicyError } from '@ctrlrun/kernel';
import { loadPolicyDocument } from '../src/policy/policy.js';
import { MAX_EXPANDED_BYTES, readYaml, YFloat, YMap, YTimestamp, type YValue } from '../src/policy/yaml.js';
import { refusal } from './policy.fixtures.js';

/** The value of `k` in a one-key document. */
function scalar(text: string): YValue {
  const doc = readYaml(`k: ${text}\n`);
  const entry = doc instanceof YMap ? doc.entry('k') : undefined;
  if (!entry) throw new Error('not a one-key mapping');
  return entry.value;
}

const hint = (value: string): string => `schema: ctrlrun.policy/v2\nactions:\n  a:\n    mcp: {not_executed_on_error: ${value}}\n    decision: allow\n`;
const bound = (operand: string): string =>
  `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {v_lte: ${operand}}\n        decision: allow\n`;
const equals = (operand: string): string =>
  `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {v_eq: ${operand}}\n        decision: allow\n`;

describe('YAML 1.1 scalars', () => {
  it('yes/no/on/off are booleans; y/n are strings', () => {
    for (const yes of ['yes', 'Yes', 'YES', 'on', 'On', 'ON', 'true', 'True', 'TRUE']) {
      expect(loadPolicy(hint(yes)).action('a')?.notExecutedOnError, yes).toBe(true);
    }
    for (const no of ['no', 'No', 'NO', 'off', 'Off', 'OFF', 'false', 'False', 'FALSE']) {
      expect(loadPolicy(hint(no)).action('a')?.notExecutedOnError, no).toBe(false);
    }
    for (const str of ['y', 'n', 'Y', 'oN', 'nO', '"yes"', "'true'"]) {
      expect(refusal(hint(str)).message, str).toMatch(/must be true or false, got string/);
    }
    // So `mode: off` names no mode.
    expect(refusal('schema: ctrlrun.policy/v3\nmode: off\nactions: {}\n').message).toMatch(/got boolean False/);
  });

  it('integers: underscores, 0x, 0b, leading-0 octal, base 60, any size', () => {
    const p = (operand: string) => loadPolicy(bound(operand));
    const at = (operand: string, v: unknown) => p(operand).evaluate('a', { v }).decision;
    expect([at('0x64', 100), at('0x64', 101)]).toEqual(['allow', 'deny']);
    expect([at('1_000', 1000), at('1_000', 1001)]).toEqual(['allow', 'deny']);
    expect([at('0b101', 5), at('0b101', 6)]).toEqual(['allow', 'deny']);
    expect([at('017', 15), at('017', 16)]).toEqual(['allow', 'deny']);
    expect([at('1:30', 90), at('1:30', 91)]).toEqual(['allow', 'deny']);
    expect([at('-0x10', -16), at('-0x10', -15)]).toEqual(['allow', 'deny']);
    expect([at('+7', 7), at('+7', 8)]).toEqual(['allow', 'deny']);
    expect([
      at('123456789012345678901234567890', 123456789012345678901234567890n),
      at('123456789012345678901234567890', 123456789012345678901234567891n),
    ]).toEqual(['allow', 'deny']);
    // `0o17` and `09` are strings in YAML 1.1, so not a numeric operand.
    expect(refusal(bound('0o17')).message).toMatch(/integer operand, got string/);
    expect(refusal(bound('09')).message).toMatch(/integer operand, got string/);
  });

  it('floats are floats only with a dot: 1e5 is a string, 1.0 and .inf are refused', () => {
    expect(loadPolicy(equals('1e5')).evaluate('a', { v: '1e5' }).decision).toBe('allow');
    expect(loadPolicy(equals('1e5')).evaluate('a', { v: 100000 }).decision).toBe('deny');
    for (const f of ['1.0', '20.0', '.5', '1.', '-.inf', '.nan', '1.5e+3', '1:30.5', '!!float 1']) {
      expect(refusal(equals(f)).message, f).toMatch(/float operands are not allowed/);
      expect(refusal(bound(f)).message, f).toMatch(/got float/);
    }
    expect(scalar('1e5')).toBe('1e5');
    expect(scalar('1.0')).toBeInstanceOf(YFloat);
  });

  it('null is ~, null, Null, NULL or nothing', () => {
    for (const n of ['~', 'null', 'Null', 'NULL', '']) {
      expect(loadPolicy(equals(n)).evaluate('a', { v: null }).decision, n).toBe('allow');
    }
    expect(loadPolicy(equals('nULL')).evaluate('a', { v: 'nULL' }).decision).toBe('allow');
  });

  it('unquoted timestamps are dates, rendered as Python renders them (isoformat)', () => {
    const iso = (text: string): string => (scalar(text) as YTimestamp).iso;
    expect(iso('2002-12-14')).toBe('2002-12-14');
    expect(iso('2001-12-14t21:59:43.10-05:00')).toBe('2001-12-14T21:59:43.100000-05:00');
    expect(iso('2001-12-14 21:59:43.10 -5')).toBe('2001-12-14T21:59:43.100000-05:00');
    expect(iso('2001-12-15 2:59:43.10')).toBe('2001-12-15T02:59:43.100000');
    expect(iso('2020-01-01T00:00:00Z')).toBe('2020-01-01T00:00:00+00:00');
    expect(iso('2020-01-01T00:00:00.1234567+01:75')).toBe('2020-01-01T00:00:00.123456+02:15');
    expect(iso('2020-01-01 00:00:00 -0:30')).toBe('2020-01-01T00:00:00-00:30');
    expect(iso('2024-02-29')).toBe('2024-02-29');
    // Single-digit month or day is a date only with a time.
    expect(scalar('2020-1-1')).toBe('2020-1-1');
    expect(scalar('"2020-01-01"')).toBe('2020-01-01');
    for (const bad of ['2026-02-30', '2023-02-29', '2026-13-01', '0000-01-01', '2020-01-01T24:00:00', '2020-01-01T10:00:00+24:00']) {
      expect(() => scalar(bad), bad).toThrow(/not a valid|offset/);
      expect(refusal(equals(bad)).message, bad).toMatch(/actions\.a\.rules\[0\]\.when\.v_eq \(line 5\)/);
    }
    expect(refusal(equals('2026-01-01')).message).toMatch(/date is not an allowed operand type/);
    expect(refusal(equals('2026-01-01T10:00:00Z')).message).toMatch(/datetime is not an allowed operand type/);
  });

  it('explicit tags are constructed as PyYAML constructs them', () => {
    expect(loadPolicy(equals('!!str 100')).evaluate('a', { v: '100' }).decision).toBe('allow');
    expect(loadPolicy(equals('!!int "100"')).evaluate('a', { v: 100 }).decision).toBe('allow');
    expect(loadPolicy(equals('!!bool "yes"')).evaluate('a', { v: true }).decision).toBe('allow');
    expect(loadPolicy(equals('! 12')).evaluate('a', { v: 12 }).decision).toBe('allow');
    expect(refusal(equals('!!bool maybe')).message).toMatch(/not a boolean/);
    expect(refusal(equals('!!int "twelve"')).message).toMatch(/not an integer/);
    expect(refusal(equals('!custom x')).message).toMatch(/could not determine a constructor for the tag "!custom"/);
    expect(refusal(equals('!!python/object:os.system x')).message).toMatch(/could not determine a constructor/);
    expect(refusal(equals('!!set {a, b}')).message).toMatch(/set is not an allowed operand type/);
    expect(refusal(equals('!!binary aGVsbG8=')).message).toMatch(/binary is not an allowed operand type/);
    expect(refusal(equals('=')).message).toMatch(/could not determine a constructor/);
  });
});

describe('duplicate keys', () => {
  it('are refused at every level, naming the key, its path and its line', () => {
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  a: {decision: allow}\n  b: {decision: allow}\n  a: {decision: deny}\n').message).toBe(
      "<string>: actions (line 5): duplicate key 'a'",
    );
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  a:\n    decision: allow\n    decision: deny\n').message).toMatch(
      /actions\.a \(line 5\): duplicate key 'decision'/,
    );
    expect(
      refusal('schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {amount_lte: 1, amount_lte: 2}\n        decision: allow\n').message,
    ).toMatch(/actions\.a\.rules\[0\]\.when \(line 5\): duplicate key 'amount_lte'/);
  });

  it('compare keys by value after resolution, as Python does', () => {
    expect(() => readYaml('a: 1\n"a": 2\n')).toThrow(/duplicate key 'a'/);
    expect(() => readYaml('yes: 1\non: 2\n')).toThrow(/duplicate key True/);
    expect(() => readYaml('1: a\ntrue: b\n')).toThrow(/duplicate key/);
    expect(() => readYaml('0x10: a\n16: b\n')).toThrow(/duplicate key 16/);
    expect(() => readYaml('2026-01-01: a\n2026-01-01: b\n')).toThrow(/duplicate key/);
    expect(() => readYaml('2026-01-01 10:00:00Z: a\n2026-01-01 11:00:00+01:00: b\n')).toThrow(/duplicate key/);
    expect(() => readYaml('1: a\n"1": b\n')).not.toThrow();
    expect(() => readYaml('2026-01-01: a\n"2026-01-01": b\n')).not.toThrow();
  });
});

describe('document structure', () => {
  it('anchors and aliases are read; duplicate, undefined and recursive ones are refused', () => {
    const p = loadPolicy(`schema: ctrlrun.policy/v1
actions:
  a:
    rules: &rules
      - when: {amount_lte: 10}
        decision: allow
      - decision: approve
  b:
    rules: *rules
`);
    expect(p.evaluate('b', { amount: 5 })).toMatchObject({ decision: 'allow', reason: 'rule[0]' });
    expect(p.policyHash).toBe(
      loadPolicy(
        'schema: ctrlrun.policy/v1\nactions:\n  a: {rules: [{when: {amount_lte: 10}, decision: allow}, {decision: approve}]}\n  b: {rules: [{when: {amount_lte: 10}, decision: allow}, {decision: approve}]}\n',
      ).policyHash,
    );
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  a: &x {decision: allow}\n  b: &x {decision: deny}\n').message).toMatch(
      /line 4: found duplicate anchor "x"/,
    );
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  a: *nowhere\n').message).toMatch(/undefined alias/);
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  a: &x {rules: [*x]}\n').message).toMatch(/refers to a node that contains it/);
  });

  it('an alias bomb is refused, not expanded', () => {
    const lines = ['schema: ctrlrun.policy/v1', 'l0: &l0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++)
      lines.push(
        `l${i}: &l${i} [${Array(10)
          .fill(`*l${i - 1}`)
          .join(', ')}]`,
      );
    lines.push('actions: {}');
    expect(refusal(`${lines.join('\n')}\n`).message).toMatch(/expands to more than/);
  });

  /** `&s` a 50 KB string, then five levels of ten aliases each: 50 KB of text, 5 GB expanded. */
  const longAliases = (indent: string): string => {
    const big = 'A'.repeat(50_000);
    const levels = [`&s "${big}"`, `&l1 [${Array(10).fill('*s').join(', ')}]`];
    for (let i = 2; i <= 5; i++)
      levels.push(
        `&l${i} [${Array(10)
          .fill(`*l${i - 1}`)
          .join(', ')}]`,
      );
    return `${indent}[${levels.join(', ')}]`;
  };
  const limit = new RegExp(`size limit of ${MAX_EXPANDED_BYTES} bytes`);
  const policyError = (f: () => unknown): PolicyError => {
    try {
      f();
    } catch (err) {
      expect(err).toBeInstanceOf(PolicyError);
      return err as PolicyError;
    }
    throw new Error('expected a PolicyError');
  };

  it('aliases that repeat a long string are refused by expanded size, not expanded (finding 6)', () => {
    // Far under the node budget (about 111 thousand nodes), about 5 GB once expanded: before the
    // byte bound this died out of memory while the policy hash was built.
    const attack = `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when:\n          x_in: ${longAliases('')}\n        decision: allow\n`;
    expect(attack.length).toBeLessThan(60_000);
    expect(refusal(attack).message).toMatch(limit);
    // Every YAML reader of the tree shares the bound: the standalone authority document and a grant file.
    const authority = `schema: ctrlrun.policy/v3\nauthority:\n  grants:\n    - id: g\n      subject: {agent: a}\n      actions: [a]\n      constraints: {x_in: ${longAliases('')}}\n`;
    expect(policyError(() => loadAuthority(authority)).message).toMatch(limit);
    expect(policyError(() => loadGrant(`subject: {agent: a}\nactions: [a]\nconstraints: {x_in: ${longAliases('')}}\n`)).message).toMatch(limit);
    // A text over the limit is refused before it is parsed.
    expect(refusal(`schema: ctrlrun.policy/v1\nactions: {}\n# ${'x'.repeat(MAX_EXPANDED_BYTES)}\n`).message).toMatch(
      /the document is larger than the size limit of/,
    );
    // The bound counts bytes, not characters: three-byte characters reach it sooner.
    expect(refusal(`schema: ctrlrun.policy/v1\nactions: {}\n# ${'€'.repeat(MAX_EXPANDED_BYTES / 3 + 1)}\n`).message).toMatch(limit);
  });

  it('aliases of a long string under the bound still load, and hash as written out', () => {
    const big = 'B'.repeat(100_000);
    const aliased = loadPolicy(
      `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {x_in: [&s "${big}", ${Array(9).fill('*s').join(', ')}]}\n        decision: allow\n`,
    );
    const written = loadPolicy(
      `schema: ctrlrun.policy/v1\nactions:\n  a:\n    rules:\n      - when: {x_in: [${Array(10).fill(`"${big}"`).join(', ')}]}\n        decision: allow\n`,
    );
    expect(aliased.policyHash).toBe(written.policyHash);
    expect(aliased.evaluate('a', { x: big }).decision).toBe('allow');
  });

  it('a parsed document that shares one long string many times is refused by size too', () => {
    const big = 'C'.repeat(1_000_000);
    let shared: unknown = [big, big];
    for (let i = 0; i < 20; i++) shared = [shared, shared]; // 2^21 references, 2 TB written out
    const err = policyError(() =>
      loadPolicyDocument({ schema: 'ctrlrun.policy/v1', actions: { a: { rules: [{ when: { x_in: shared }, decision: 'allow' }] } } }),
    );
    expect(err.message).toMatch(limit);
  });

  it('one document only; not a mapping; unprintable characters; merge keys', () => {
    expect(refusal('schema: ctrlrun.policy/v1\nactions: {}\n---\nschema: ctrlrun.policy/v1\nactions: {}\n').message).toMatch(/multiple documents/);
    expect(() => loadPolicy('---\nschema: ctrlrun.policy/v1\nactions: {}\n...\n')).not.toThrow();
    expect(refusal('just a string\n').message).toMatch(/policy must be a mapping with 'schema' and 'actions' keys, got string/);
    expect(refusal('- a\n').message).toMatch(/got list/);
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  "a\u0000": {decision: allow}\n').message).toMatch(/line 3: unacceptable character U\+0000/);
    expect(refusal('schema: ctrlrun.policy/v1\nactions: {}\nx: \u2028\n').message).toMatch(/line separator U\+2028/);
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  base: &b {decision: allow}\n  a:\n    <<: *b\n').message).toMatch(
      /actions\.a \(line 5\): merge keys \(<<\) are not supported/,
    );
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  ? [a, b]\n  : {decision: allow}\n').message).toMatch(/unhashable key/);
    // A byte-order mark and CRLF line ends are fine.
    expect(() => loadPolicy('\ufeffschema: ctrlrun.policy/v1\r\nactions: {}\r\n')).not.toThrow();
  });

  it('a lone surrogate escape cannot reach the hash', () => {
    expect(refusal('schema: ctrlrun.policy/v1\nactions:\n  "a\\ud800": {decision: allow}\n').message).toMatch(/lone surrogate/);
  });
});
