/**
 * YAML as the reference read it: PyYAML's `safe_load` (YAML 1.1 scalars) with duplicate keys
 * refused. The `yaml` package parses the syntax; every scalar is then resolved here by PyYAML's
 * own rules, because the two disagree on exactly the values a policy cares about (`yes`/`on`/`off`
 * are booleans, `1e5` is a string, `0x1f` and `1_000` are integers, `2026-01-01` is a date).
 *
 * The result is a small tree ({@link YMap}, {@link YSeq}, scalars) that keeps the line of every
 * key so that a refusal can name it. Integers are `bigint` here; floats, timestamps, binary and
 * sets are marker objects the policy loader refuses or renders.
 *
 * @module
 */
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode, type Scalar } from 'yaml';
import { PolicyError } from '../errors.js';

/** A float (`1.5`, `.inf`): never accepted by the policy, kept only to say so. */
export class YFloat {
  constructor(
    readonly text: string,
    readonly value: number,
  ) {}
}

/** A YAML timestamp, rendered as Python's `isoformat()` renders the value PyYAML builds. */
export class YTimestamp {
  constructor(
    /** `YYYY-MM-DD` for a date, else `YYYY-MM-DDTHH:MM:SS[.ffffff][+HH:MM]`. */
    readonly iso: string,
    /** What makes two keys equal: the date, the naive wall time, or the instant. */
    readonly identity: string,
  ) {}
}

/** `!!binary`, `!!set`: values the policy hash cannot encode. */
export class YOther {
  constructor(readonly kind: 'binary' | 'set') {}
}

/** One `key: value` of a mapping, with the 1-based line of its key. */
export interface YEntry {
  readonly key: YValue;
  readonly value: YValue;
  readonly line: number;
}

/** A mapping in document order. */
export class YMap {
  constructor(
    readonly entries: readonly YEntry[],
    readonly line: number,
  ) {}
  /** The entry whose key is the string `key`. */
  entry(key: string): YEntry | undefined {
    for (const e of this.entries) if (e.key === key) return e;
    return undefined;
  }
  has(key: string): boolean {
    return this.entry(key) !== undefined;
  }
  get(key: string): YValue | undefined {
    return this.entry(key)?.value;
  }
}

/** A sequence, with the 1-based line of each item. */
export class YSeq {
  constructor(
    readonly items: readonly YValue[],
    readonly lines: readonly number[],
    readonly line: number,
  ) {}
}

/** Anything the loader yields. */
export type YValue = string | bigint | boolean | null | YFloat | YTimestamp | YOther | YMap | YSeq;

// PyYAML's implicit resolvers (yaml/resolver.py), tried in its registration order.
const BOOL = /^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/;
const FLOAT =
  /^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
const INT = /^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$/;
const NULL = /^(?:~|null|Null|NULL|)$/;
const TIMESTAMP =
  /^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$/;
// PyYAML's constructor regex, with the parts it reads.
const TIMESTAMP_PARTS =
  /^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ \t]+)([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]*))?(?:[ \t]*(Z|([-+])([0-9]{1,2})(?::([0-9]{2}))?))?)?$/;
/** What PyYAML's reader refuses in the raw text (`NON_PRINTABLE`). */
const NON_PRINTABLE = /[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

const TAG = 'tag:yaml.org,2002:';
/** Expanding aliases beyond this many nodes is refused (a "billion laughs" document). */
const MAX_NODES = 1_000_000;
/**
 * The most a document may weigh once its aliases are expanded, in UTF-8 bytes of its scalars plus
 * one byte per node. The node budget alone lets a few kilobytes alias one long string into
 * gigabytes, which the policy hash would then try to build; real policies are kilobytes.
 */
export const MAX_EXPANDED_BYTES = 8 * 1024 * 1024;

/** The UTF-8 length of `s` (a lone surrogate counts 3, as its replacement would). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1;
  }
  return n;
}

function tooBig(line: number | null, expanded: boolean, path: string | null = null): YamlRefusal {
  const what = expanded ? 'once its aliases are expanded, the document is larger than' : 'the document is larger than';
  return new YamlRefusal(
    `${what} the size limit of ${MAX_EXPANDED_BYTES} bytes (8 MiB, MAX_EXPANDED_BYTES); a policy is kilobytes, and reading this one would exhaust memory while it is hashed`,
    line,
    path === '' ? null : path,
  );
}

/** A refusal raised while reading; the loader prefixes the source. */
export class YamlRefusal extends Error {
  constructor(
    message: string,
    readonly line: number | null,
    readonly path: string | null = null,
  ) {
    super(message);
  }
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** PyYAML's `construct_yaml_timestamp` followed by Python's `isoformat()`. */
export function constructTimestamp(text: string, line: number): YTimestamp {
  const m = TIMESTAMP_PARTS.exec(text);
  if (!m) throw new YamlRefusal(`${JSON.stringify(text)} is not a timestamp`, line);
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) {
    throw new YamlRefusal(`${JSON.stringify(text)} is not a valid date`, line);
  }
  const date = `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`;
  if (m[4] === undefined) return new YTimestamp(date, `date:${date}`);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  if (hour > 23 || minute > 59 || second > 59) throw new YamlRefusal(`${JSON.stringify(text)} is not a valid time`, line);
  const fraction = m[7] ? Number(m[7].slice(0, 6).padEnd(6, '0')) : 0;
  let iso = `${date}T${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}${fraction ? `.${pad(fraction, 6)}` : ''}`;
  if (m[8] === undefined) return new YTimestamp(iso, `naive:${iso}`);
  let offset = 0; // minutes east of UTC
  if (m[9] !== undefined) {
    offset = Number(m[10]) * 60 + Number(m[11] ?? 0);
    if (m[9] === '-') offset = -offset;
    if (Math.abs(offset) >= 24 * 60) throw new YamlRefusal(`${JSON.stringify(text)} has an offset of a day or more`, line);
  }
  const abs = Math.abs(offset);
  iso += `${offset < 0 ? '-' : '+'}${pad(Math.floor(abs / 60), 2)}:${pad(abs % 60, 2)}`;
  const instant = Date.UTC(year, month - 1, day, hour, minute, second) - offset * 60_000;
  // Date.UTC maps years 0-99 to 1900-1999; the instant only serves as an equality key, so
  // qualify it with the year to keep distinct dates distinct.
  return new YTimestamp(iso, `aware:${year}:${instant}:${fraction}`);
}

/** PyYAML's `construct_yaml_int` (underscores dropped, `0b`, `0x`, leading-`0` octal, `a:b:c` base 60). */
export function constructInt(text: string, line: number): bigint {
  let v = text.replace(/_/g, '').trim();
  let sign = 1n;
  if (v.startsWith('-')) sign = -1n;
  if (v.startsWith('-') || v.startsWith('+')) v = v.slice(1);
  const bad = (): never => {
    throw new YamlRefusal(`${JSON.stringify(text)} is not an integer`, line);
  };
  if (v === '0') return 0n;
  if (v.startsWith('0b')) return /^[01]+$/.test(v.slice(2)) ? sign * BigInt(`0b${v.slice(2)}`) : bad();
  if (v.startsWith('0x')) return /^[0-9a-fA-F]+$/.test(v.slice(2)) ? sign * BigInt(`0x${v.slice(2)}`) : bad();
  if (v.startsWith('0')) return /^[0-7]+$/.test(v) ? sign * BigInt(`0o${v}`) : bad();
  if (v.includes(':')) {
    let total = 0n;
    for (const part of v.split(':')) {
      if (!/^[0-9]+$/.test(part)) bad();
      total = total * 60n + BigInt(part);
    }
    return sign * total;
  }
  return /^[0-9]+$/.test(v) ? sign * BigInt(v) : bad();
}

const BOOL_VALUES: Record<string, boolean> = { yes: true, no: false, true: true, false: false, on: true, off: false };

/** A plain scalar as PyYAML's implicit resolvers read it. */
function resolvePlain(text: string, line: number): YValue {
  if (BOOL.test(text)) return BOOL_VALUES[text.toLowerCase()]!;
  if (FLOAT.test(text)) return new YFloat(text, Number(text.replace(/_/g, '')));
  if (INT.test(text)) return constructInt(text, line);
  if (text === '<<') throw new YamlRefusal('merge keys (<<) are not supported', line);
  if (NULL.test(text)) return null;
  if (TIMESTAMP.test(text)) return constructTimestamp(text, line);
  if (text === '=') throw new YamlRefusal("could not determine a constructor for the tag 'tag:yaml.org,2002:value'", line);
  return text;
}

/** A scalar with an explicit tag, as PyYAML's `SafeConstructor` builds it. */
function resolveTagged(tag: string, text: string, line: number): YValue {
  switch (tag) {
    case `${TAG}str`:
      return text;
    case `${TAG}null`:
      return null;
    case `${TAG}bool`: {
      const b = BOOL_VALUES[text.toLowerCase()];
      if (b === undefined || !Object.prototype.hasOwnProperty.call(BOOL_VALUES, text.toLowerCase())) {
        throw new YamlRefusal(`${JSON.stringify(text)} is not a boolean`, line);
      }
      return b;
    }
    case `${TAG}int`:
      if (text === '') throw new YamlRefusal('an empty !!int', line);
      return constructInt(text, line);
    case `${TAG}float`:
      return new YFloat(text, Number(text.replace(/_/g, '')));
    case `${TAG}timestamp`:
      return constructTimestamp(text, line);
    case `${TAG}binary`:
      return new YOther('binary');
    default:
      throw new YamlRefusal(`could not determine a constructor for the tag ${JSON.stringify(tag)}`, line);
  }
}

/** The identity two mapping keys are compared by (Python `==`: `1 == true`, `1 == 1.0`). */
function keyIdentity(key: YValue): string | null {
  if (typeof key === 'string') return `s:${key}`;
  if (typeof key === 'bigint') return `n:${key}`;
  if (typeof key === 'boolean') return key ? 'n:1' : 'n:0';
  if (key === null) return 'null';
  if (key instanceof YFloat) {
    if (Number.isNaN(key.value)) return null; // NaN equals nothing
    return Number.isInteger(key.value) ? `n:${BigInt(key.value)}` : `f:${key.value}`;
  }
  if (key instanceof YTimestamp) return `t:${key.identity}`;
  return null;
}

/** Parses `text` as a single YAML document; refusals carry the line they concern. */
export function readYaml(text: string): YValue {
  // Refused before parsing, so an oversized text costs nothing either.
  if (text.length > MAX_EXPANDED_BYTES || utf8Length(text) > MAX_EXPANDED_BYTES) throw tooBig(null, false);
  const lines = new LineCounter();
  const lineAt = (offset: number | undefined): number => (offset === undefined ? 0 : lines.linePos(offset).line);
  const bad = NON_PRINTABLE.exec(text);
  if (bad) {
    // `lines` is empty until the parse; count the line by hand.
    const line = text.slice(0, bad.index).split(/\r\n|\r|\n/).length;
    throw new YamlRefusal(
      `unacceptable character U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}: special characters are not allowed`,
      line,
    );
  }
  // PyYAML reads U+0085, U+2028 and U+2029 as line breaks and the `yaml` package as content;
  // a text the two would read differently is refused rather than guessed at.
  const odd = /[\x85\u2028\u2029]/.exec(text);
  if (odd) {
    const line = text.slice(0, odd.index).split(/\r\n|\r|\n/).length;
    throw new YamlRefusal(
      `the line separator U+${odd[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} is not supported; use a newline, or an escape in a double-quoted string`,
      line,
    );
  }
  let doc: Document.Parsed;
  try {
    doc = parseDocument(text, { schema: 'failsafe', version: '1.1', uniqueKeys: false, merge: false, lineCounter: lines, prettyErrors: true });
  } catch (err) {
    throw new YamlRefusal(`not valid YAML: ${err instanceof Error ? err.message : String(err)}`, null);
  }
  const first = doc.errors[0];
  if (first) {
    const line = first.linePos?.[0].line ?? null;
    throw new YamlRefusal(`not valid YAML: ${first.message.split(' at line ')[0]!.split('\n')[0]}`, line);
  }

  // PyYAML refuses an anchor defined twice (the `yaml` package lets the later one win).
  const anchors = new Set<string>();
  const walk = (node: unknown): void => {
    if (node === null || typeof node !== 'object' || isAlias(node)) return;
    const anchor = (node as { anchor?: string }).anchor;
    if (anchor !== undefined) {
      const range = (node as { range?: [number, number, number] }).range;
      if (anchors.has(anchor)) throw new YamlRefusal(`found duplicate anchor ${JSON.stringify(anchor)}`, range ? lineAt(range[0]) : null);
      anchors.add(anchor);
    }
    if (isMap(node)) {
      for (const pair of node.items) {
        walk(pair.key);
        walk(pair.value);
      }
    } else if (isSeq(node)) {
      for (const item of node.items) walk(item);
    }
  };
  walk(doc.contents);

  const aliasTargets = new Map<YamlNode, YamlNode | undefined>();
  const active = new Set<YamlNode>();
  let budget = MAX_NODES;
  let bytes = 0;

  const convert = (node: YamlNode | null, parentLine: number, path: string): YValue => {
    if (--budget < 0) throw new YamlRefusal(`the document expands to more than ${MAX_NODES} nodes through its aliases`, parentLine);
    if (++bytes > MAX_EXPANDED_BYTES) throw tooBig(parentLine, true, path);
    if (node === null || node === undefined) return null;
    const line = node.range ? lineAt(node.range[0]) : parentLine;
    if (isAlias(node)) {
      let target = aliasTargets.get(node);
      if (!aliasTargets.has(node)) {
        target = node.resolve(doc);
        aliasTargets.set(node, target);
      }
      if (target === undefined) throw new YamlRefusal(`found undefined alias ${JSON.stringify(node.source)}`, line);
      if (active.has(target)) throw new YamlRefusal(`alias ${JSON.stringify(node.source)} refers to a node that contains it`, line);
      return convert(target, line, path);
    }
    const tag = node.tag;
    if (isScalar(node)) {
      const s = node as Scalar<unknown>;
      const value = typeof s.value === 'string' ? s.value : String(s.value);
      bytes += utf8Length(value);
      if (bytes > MAX_EXPANDED_BYTES) throw tooBig(line, true, path);
      try {
        // PyYAML resolves the non-specific tag `!` as if the scalar were plain.
        if (tag === undefined) return s.type === 'PLAIN' ? resolvePlain(value, line) : value;
        if (tag === '!') return resolvePlain(value, line);
        return resolveTagged(tag, value, line);
      } catch (err) {
        if (err instanceof YamlRefusal && err.path === null && path !== '') throw new YamlRefusal(err.message, err.line, path);
        throw err;
      }
    }
    active.add(node);
    try {
      if (isMap(node)) {
        if (tag !== undefined && tag !== '!' && tag !== `${TAG}map` && tag !== `${TAG}set`) {
          throw new YamlRefusal(`could not determine a constructor for the tag ${JSON.stringify(tag)}`, line);
        }
        const entries: YEntry[] = [];
        const seen = new Set<string>();
        for (const pair of node.items) {
          const keyNode = pair.key as YamlNode | null;
          const keyLine = keyNode && 'range' in keyNode && keyNode.range ? lineAt(keyNode.range[0]) : line;
          const key = convert(keyNode, keyLine, path);
          if (key instanceof YMap || key instanceof YSeq || key instanceof YOther) {
            throw new YamlRefusal('found unhashable key (a mapping key must be a scalar)', keyLine);
          }
          const id = keyIdentity(key);
          if (id !== null) {
            if (seen.has(id)) throw new YamlRefusal(`duplicate key ${describeKey(key)}`, keyLine, path || 'top level');
            seen.add(id);
          }
          const childPath =
            typeof key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path ? `${path}.` : ''}${key}` : `${path}[${describeKey(key)}]`;
          entries.push({ key, value: convert(pair.value as YamlNode | null, keyLine, childPath), line: keyLine });
        }
        return tag === `${TAG}set` ? new YOther('set') : new YMap(entries, line);
      }
      if (isSeq(node)) {
        const pairs = tag === `${TAG}omap` || tag === `${TAG}pairs`;
        if (tag !== undefined && tag !== '!' && tag !== `${TAG}seq` && !pairs) {
          throw new YamlRefusal(`could not determine a constructor for the tag ${JSON.stringify(tag)}`, line);
        }
        const items: YValue[] = [];
        const itemLines: number[] = [];
        for (const item of node.items) {
          const itemNode = item as YamlNode | null;
          const itemLine = itemNode && itemNode.range ? lineAt(itemNode.range[0]) : line;
          let value = convert(itemNode, itemLine, `${path}[${items.length}]`);
          if (pairs) {
            // PyYAML builds `(key, value)` tuples, which the hash writes as two-item lists.
            if (!(value instanceof YMap) || value.entries.length !== 1) {
              throw new YamlRefusal(`expected a single mapping item in ${tag}`, itemLine);
            }
            const only = value.entries[0]!;
            value = new YSeq([only.key, only.value], [itemLine, itemLine], itemLine);
          }
          items.push(value);
          itemLines.push(itemLine);
        }
        return new YSeq(items, itemLines, line);
      }
    } finally {
      active.delete(node);
    }
    throw new YamlRefusal('unsupported YAML node', line);
  };

  return convert((doc.contents ?? null) as YamlNode | null, 1, '');
}

/** A key as the reference's messages show it. */
export function describeKey(key: YValue): string {
  if (typeof key === 'string') return `'${key}'`;
  if (typeof key === 'bigint') return key.toString();
  if (typeof key === 'boolean') return key ? 'True' : 'False';
  if (key === null) return 'None';
  if (key instanceof YFloat) return key.text;
  if (key instanceof YTimestamp) return key.iso;
  return typeName(key);
}

/** The reference's name for a value's type, for messages (`str`, `int`, `list`, `dict`, …). */
export function typeName(v: YValue | undefined): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'bigint') return 'integer';
  if (typeof v === 'boolean') return 'boolean';
  if (v instanceof YFloat) return 'float';
  if (v instanceof YTimestamp) return v.iso.length === 10 ? 'date' : 'datetime';
  if (v instanceof YOther) return v.kind;
  if (v instanceof YMap) return 'mapping';
  return 'list';
}

/** Wraps a reader refusal as the policy error the loader raises. */
export function refusalToPolicyError(err: YamlRefusal, source: string): PolicyError {
  const line = err.line !== null ? `line ${err.line}` : null;
  const at = err.path !== null ? `${err.path}${line !== null ? ` (${line})` : ''}` : line;
  return new PolicyError(`${source}: ${at !== null ? `${at}: ` : ''}${err.message}`, { cause: err });
}
