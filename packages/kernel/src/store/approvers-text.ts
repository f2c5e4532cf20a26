/**
 * The `approvals.approvers` and `approvals.required_roles` columns, written and read as the
 * original writes them (spec 05 §4.1): Python `json.dumps(list, sort_keys=True)` — keys sorted,
 * `", "` and `": "` separators, everything outside printable ASCII escaped `\uXXXX` (lowercase
 * hex, one per UTF-16 unit). NULL when the list is empty, never `"[]"`. A value that is not such
 * a list makes the approval unusable on read, as it does for the original.
 *
 * @module
 */
import { isPlainObject, parseJson } from '../canonical.js';
import { StoreError } from '../errors.js';
import type { RequiredRole, VerifiedApprover } from '../model.js';

type PyValue = string | number | null | readonly PyValue[] | { readonly [k: string]: PyValue };

const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

function pyString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    const c = s.charCodeAt(i);
    const short = SHORT[ch];
    if (short !== undefined) out += short;
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Python's `json.dumps(value, sort_keys=True)` for the strings, integers, nulls, lists and objects stored here. */
export function pythonJson(value: PyValue): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return pyString(value);
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return `[${(value as readonly PyValue[]).map(pythonJson).join(', ')}]`;
  const o = value as { readonly [k: string]: PyValue };
  // Python sorts str keys by code point; these keys are ASCII.
  const keys = Object.keys(o).sort();
  return `{${keys.map((k) => `${pyString(k)}: ${pythonJson(o[k]!)}`).join(', ')}}`;
}

/** The `approvers` column for `list`: its §4.1 text, or null when empty. */
export function approversText(list: readonly VerifiedApprover[]): string | null {
  if (list.length === 0) return null;
  return pythonJson(list.map((a) => ({ agent: a.agent, entitled: [...a.entitled], granted_at: a.grantedAt, issuer: a.issuer, user: a.user })));
}

/** The `required_roles` column for `roles`: its §4.1 text, or null when empty. */
export function requiredRolesText(roles: readonly RequiredRole[]): string | null {
  if (roles.length === 0) return null;
  return pythonJson(roles.map((r) => ({ control: r.control, role: r.role })));
}

function unreadable(id: string, column: string, why: string): StoreError {
  return new StoreError(`[kernel] approval ${id} is unreadable: its ${column} ${why}`);
}

function listOf(id: string, column: string, text: string): unknown[] {
  let v: unknown;
  try {
    v = parseJson(text);
  } catch {
    throw unreadable(id, column, 'is not JSON');
  }
  if (!Array.isArray(v)) throw unreadable(id, column, 'is not a JSON array');
  return v;
}

function text(v: unknown): v is string {
  return typeof v === 'string' && v !== '';
}

function textOrNull(v: unknown): v is string | null {
  return v === null || text(v);
}

/** The `approvers` column read back: `[]` for NULL; anything but a list of approver entries is refused. */
export function approversFromText(id: string, value: string | null | undefined): VerifiedApprover[] {
  if (value === null || value === undefined) return [];
  return listOf(id, 'approvers', value).map((e, i) => {
    const at = `entry ${i}`;
    if (!isPlainObject(e)) throw unreadable(id, 'approvers', `${at} is not an object`);
    const { agent, user, issuer, entitled, granted_at: grantedAt } = e as Record<string, unknown>;
    if (!text(agent)) throw unreadable(id, 'approvers', `${at} has no agent`);
    if (!textOrNull(user) || !textOrNull(issuer)) throw unreadable(id, 'approvers', `${at} has a user or issuer that is neither a non-empty string nor null`);
    if (!Array.isArray(entitled) || !entitled.every(text)) throw unreadable(id, 'approvers', `${at} has an entitled that is not a list of control ids`);
    if (!text(grantedAt)) throw unreadable(id, 'approvers', `${at} has no granted_at`);
    return Object.freeze({ agent, user, issuer, entitled: Object.freeze([...(entitled as string[])]), grantedAt });
  });
}

/** The `required_roles` column read back: `[]` for NULL; anything but a list of `{control, role}` is refused. */
export function requiredRolesFromText(id: string, value: string | null | undefined): RequiredRole[] {
  if (value === null || value === undefined) return [];
  return listOf(id, 'required_roles', value).map((e, i) => {
    if (!isPlainObject(e) || !text((e as Record<string, unknown>)['control']) || !text((e as Record<string, unknown>)['role']))
      throw unreadable(id, 'required_roles', `entry ${i} is not {control, role}`);
    const { control, role } = e as { control: string; role: string };
    return Object.freeze({ control, role });
  });
}
