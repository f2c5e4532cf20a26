/**
 * How `scripts/portability.ts` judges the three runtimes' reports: masking what varies from run
 * to run, finding the first difference, and checking each call against spec 04 §4's table.
 * Plain functions over JSON, tested in `test/portability.test.ts`.
 */

/**
 * Masks what differs from run to run, wherever it appears (whole values or inside messages):
 * minted ids become `<apr#1>`-style names numbered by first appearance (so "the approval id is
 * the request id" still compares), times become `<time>`, and `sha256:` digests are numbered the
 * same way, except action and policy hashes, which cover content only and must match exactly.
 */
export function mask(value: unknown): unknown {
  const kept = new Set<string>();
  const collect = (v: unknown, key: string): void => {
    if (typeof v === 'string' && /^(?:action|policy)_?hash$/i.test(key)) kept.add(v);
    else if (v !== null && typeof v === 'object') for (const [k, item] of Object.entries(v)) collect(item, Array.isArray(v) ? key : k);
  };
  collect(value, '');
  const names = new Map<string, string>();
  const counts = new Map<string, number>();
  const name = (kind: string, original: string): string => {
    let named = names.get(original);
    if (named === undefined) {
      const n = (counts.get(kind) ?? 0) + 1;
      counts.set(kind, n);
      named = `<${kind}#${n}>`;
      names.set(original, named);
    }
    return named;
  };
  const text = (v: string): string =>
    v
      .replace(/\b([a-z]+)_[0-9a-f]{32}\b/g, (id, kind: string) => name(kind, id))
      .replace(/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})/g, '<time>')
      .replace(/sha256:[0-9a-f]{64}/g, (digest) => (kept.has(digest) ? digest : name('sha256', digest)));
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return text(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, walk(item)]));
    return v;
  };
  return walk(value);
}

/** The first place two masked results differ, as a path and both values. */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (JSON.stringify(a) === JSON.stringify(b)) return undefined;
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const found = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
      if (found) return found;
    }
  }
  return `${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}

/**
 * What spec 04 §4 says each call returns, as `outcome[/reason] r<remote calls> [receipt result]`
 * (reason only where the table names one), so three runtimes agreeing on a wrong answer fails too.
 */
export const EXPECTED = [
  '1 executed r1 committed',
  '2 approval_required r0',
  '2 approved',
  '2 approval_mismatch/mismatch r0 blocked',
  '2 executed r1 committed',
  '3 approval_mismatch/consumed r1 blocked',
  '4 denied r0 denied',
  '5 reply_lost r1 ambiguous',
  '5 ambiguous_retry r1 blocked',
  '6 duplicate r1 blocked',
  'fresh denied r0 denied',
];

export function signature(entry: unknown): string {
  const { step, result = {} } = (entry ?? {}) as { step?: unknown; result?: Record<string, unknown> };
  const receipt = result['receipt'] as { result?: unknown } | undefined;
  const outcome = String(result['outcome']) + (result['outcome'] === 'approval_mismatch' ? `/${String(result['reason'])}` : '');
  const remote = result['remote_calls'] === undefined ? [] : [`r${String(result['remote_calls'])}`];
  return [String(step), outcome, ...remote, ...(receipt ? [String(receipt.result)] : [])].join(' ');
}

/** The first call whose result is not what the spec's table says, or undefined. */
export function unexpected(steps: unknown[]): string | undefined {
  const got = steps.map(signature);
  for (let i = 0; i < Math.max(got.length, EXPECTED.length); i++) {
    if (got[i] !== EXPECTED[i]) return `call ${i + 1}: expected "${EXPECTED[i] ?? '(nothing)'}", got "${got[i] ?? '(nothing)'}"`;
  }
  return undefined;
}

/** The outcome of every call, e.g. `1:executed 2:approval_required 2:approved …`. */
export function outcomes(steps: unknown[]): string {
  return steps
    .map((s) => {
      const { step, result } = (s ?? {}) as { step?: unknown; result?: { outcome?: unknown } };
      return `${String(step)}:${String(result?.outcome)}`;
    })
    .join(' ');
}
