/**
 * "Show the machinery": what is behind each step, computed in the tab from the kernel itself —
 * the canonical JSON an action hash is the SHA-256 of, the policy rule that decided, and the
 * `protect()` call a user would write for the same step. DOM-free.
 *
 * @module
 */
import { createAction, loadPolicy, type Condition, type Policy } from '@ctrlrun/kernel';
import { TRY_IT_PRINCIPAL, type RefundRequest } from '@ctrlrun/kernel/try-it';

/** The action try-it protects. */
export const ACTION_NAME = 'stripe.refund';

/** The canonical action behind a refund request: the exact text hashed, and its hash. */
export interface CanonicalAction {
  /** The canonical JSON, byte for byte what is hashed. */
  readonly canonical: string;
  /** `sha256:` + hex of {@link canonical}. */
  readonly actionHash: string;
}

/**
 * The action `protect()` builds for this request (name, arguments, the playground's principal,
 * the default environment, no resource), rebuilt here so the reader can see what the hash is a
 * hash of and check it against the receipt's `action_hash`.
 */
export function canonicalAction(req: Pick<RefundRequest, 'payment_id' | 'amount'>): CanonicalAction {
  const action = createAction({ name: ACTION_NAME, arguments: { payment_id: req.payment_id, amount: req.amount }, principal: { ...TRY_IT_PRINCIPAL } });
  return { canonical: action.canonical, actionHash: action.actionHash };
}

function operand(v: unknown): string {
  return typeof v === 'bigint' ? v.toString() : JSON.stringify(v);
}

/** `{ <key>: <operand>, … }`, as the policy wrote the conditions. */
export function conditionsText(conditions: readonly Condition[]): string {
  return `{ ${conditions.map((c) => `${c.key}: ${operand(c.operand)}`).join(', ')} }`;
}

/** The rule that decided, as the reader can find it in the policy. */
export interface DecidingRule {
  /** `rule[N]`, `decision`, `no_matching_rule`, `unknown_action`, or a kernel reason such as `effect_key_error`. */
  readonly reason: string;
  readonly decision: string;
  /** One line: `rule[N]: when { <conditions as written> } → <decision>`. */
  readonly text: string;
}

/**
 * The rule behind `reason` in `policy` for {@link ACTION_NAME}. `reason` comes from the receipt's
 * `decision_reason` (or, before any receipt, `policy.evaluate`). A reason that names no rule
 * says what it is instead.
 */
export function decidingRule(policy: Policy, reason: string, decision: string): DecidingRule {
  const rules = policy.rules(ACTION_NAME) ?? [];
  const m = /^rule\[(\d+)\]$/.exec(reason);
  const rule = m ? rules[Number(m[1])] : reason === 'decision' ? rules[0] : undefined;
  if (rule) {
    const when = rule.conditions.length ? `when ${conditionsText(rule.conditions)}` : 'otherwise';
    return { reason, decision, text: `${rule.reason}: ${when} → ${rule.decision}` };
  }
  const why: Record<string, string> = {
    no_matching_rule: 'no rule matched, so the default applies → deny',
    unknown_action: `the policy does not list ${ACTION_NAME} → deny`,
  };
  return { reason, decision, text: why[reason] ?? `${reason} → ${decision}` };
}

/** Which rule decides these arguments under `policy` (for a step that wrote no receipt). */
export function evaluateRule(policy: Policy, req: Pick<RefundRequest, 'payment_id' | 'amount'>): DecidingRule {
  const ev = policy.evaluate(ACTION_NAME, { payment_id: req.payment_id, amount: req.amount });
  return decidingRule(policy, ev.reason, ev.decision);
}

/** Loads the policy text try-it loaded (for {@link decidingRule}). */
export function policyOf(yamlText: string): Policy {
  return loadPolicy(yamlText, { source: 'try-it' });
}

/**
 * The TypeScript a user would write for this step: the same policy text, a store, the
 * principal, `protect()` around their own refund function, and this call. String literals are
 * JSON-quoted, so any payment id reads as data.
 */
export function protectCall(req: RefundRequest): string {
  const call = req.approval_id ? `, { approvalId: ${JSON.stringify(req.approval_id)} }` : '';
  const lose = req.lose_reply ? '\n// here the provider commits the refund and its reply is lost: the effect becomes AMBIGUOUS' : '';
  return [
    "import { Control, loadPolicy, protect } from '@ctrlrun/kernel';",
    "import { createSqlJsStore } from '@ctrlrun/store-sqljs';",
    '',
    'const control = new Control({',
    '  policy: loadPolicy(policyYaml), // the policy shown here',
    '  store: await createSqlJsStore(),',
    `  principal: { agent: ${JSON.stringify(TRY_IT_PRINCIPAL.agent)}, user: null },`,
    '});',
    `const refund = protect(stripeRefund, { control, name: ${JSON.stringify(ACTION_NAME)} });`,
    '',
    `await refund({ payment_id: ${JSON.stringify(req.payment_id)}, amount: ${req.amount} }${call});${lose}`,
  ].join('\n');
}
