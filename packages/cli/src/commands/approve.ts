/**
 * `ctrlrun approve REQUEST_ID` and `ctrlrun deny REQUEST_ID`: a human answers a pending approval
 * request from a second terminal, through the kernel (`Control.grantApproval` / `denyApproval`),
 * so the answer and its event (`APPROVAL_GRANTED` with the hash it is bound to, or
 * `APPROVAL_DENIED`) are written by the one path every surface uses, on the kernel's clock, and
 * reach the configured sinks. Who answers is `--as NAME`, `$CTRLRUN_APPROVER`, or the OS login
 * name. An unknown request, an answered one, or one whose stored action no longer matches its
 * hash is refused before any write connection is opened.
 *
 * On a terminal (standard input is a TTY) the command first shows the exact action — name, every
 * canonical argument as hashed, the hash, the requester, the expiry and the rule — and asks
 * `[y/N]`; only `y` or `yes` answers. `--yes` answers without asking. Not on a terminal (a
 * script, a pipe, CI) it answers without asking and prints what it always printed, so scripts
 * keep working; `--json` shows the whole request there too.
 *
 * Before `approve` asks (or answers), an effect the request's action would reserve that already
 * happened since it was filed (or is ambiguous) is named on standard error with the action and
 * receipt that hold it: a grant could only be refused as `DuplicateEffect` / `AmbiguousEffect`.
 *
 * `approve --edit FILE` (`-`: standard input) approves the arguments in FILE, a JSON object,
 * instead of the proposed ones (edit-then-approve): read as a regular file of bounded size and
 * parsed strictly before any store is opened, then decided again by the policy (a deny refuses
 * the edit and leaves the request pending). It prints the proposed and the approved arguments and
 * the new request id the grant is bound to.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import { evidenceTime, parseTime } from '@ctrlrun/kernel/store';
import {
  ApprovalMismatch,
  approvalProgress,
  argumentsForDisplay,
  canonicalJson,
  orderedJson,
  parseJson,
  resolveEffectTemplate,
  resolveCommands,
  type Control,
  type JsonObject,
  type Policy,
  type StateStore,
  type VerifiedPrincipal,
} from '@ctrlrun/kernel';
import { readRequest, requestJson, requestLines, type RequestView } from '../approval-view.js';
import { AS_APPROVER, STORE_URL, type Command, type Invocation } from '../command.js';
import { answeringControl } from '../control.js';
import { CliRefusal } from '../errors.js';
import { JWT_OPTIONS } from '../jwt-options.js';
import { verifiedIdentity } from '../verified-identity.js';
import { MAX_INPUT_BYTES, readRegularFile } from '../files.js';
import { isObject } from '../format.js';

/** Refuses an unknown, altered or already answered request while only a reader is open. */
async function pendingRequest(reader: StateStore, id: string): Promise<RequestView> {
  const view = await readRequest(reader, id);
  if (view.record.status !== 'pending') throw new CliRefusal(`approval request ${id} is ${view.record.status}, not pending: an answer is given once`);
  return view;
}

/** Each argument as `"key": value` in canonical order (what is hashed), or `(none)`. */
function argumentLines(args: JsonObject): string[] {
  const keys = Object.keys(args).sort();
  if (keys.length === 0) return ['(none)'];
  return keys.map((k) => `${JSON.stringify(k)}: ${canonicalJson(args[k])}`);
}

/**
 * The edited arguments of `approve --edit FILE` (`-`: standard input): a regular file of at most
 * {@link MAX_INPUT_BYTES}, strict JSON (no floats, no duplicate keys, `__proto__` kept as data),
 * one object whose values have a canonical form. Read before any store is opened; null without `--edit`.
 */
async function readEdit(inv: Invocation): Promise<JsonObject | null> {
  const file = inv.values['edit'];
  if (file === undefined) return null;
  if (typeof file !== 'string' || file === '')
    throw new CliRefusal('--edit needs a FILE holding a JSON object of the edited arguments (or - for standard input)');
  let where: string;
  let text: string;
  if (file === '-') {
    where = 'standard input';
    if (inv.io.readStdin === undefined) throw new CliRefusal('--edit -: standard input cannot be read here; give a FILE');
    try {
      text = await inv.io.readStdin(MAX_INPUT_BYTES);
    } catch (e) {
      throw new CliRefusal(`the edit on standard input cannot be read: ${(e as Error).message}`);
    }
  } else {
    const path = resolvePath(inv.io.cwd, file);
    where = `the edit file ${path}`;
    try {
      text = readRegularFile(path);
    } catch (e) {
      throw new CliRefusal(`${where} cannot be read: ${(e as Error).message}`);
    }
  }
  let doc: unknown;
  try {
    doc = parseJson(text, { what: where });
    if (!isObject(doc))
      throw new Error(`it holds ${Array.isArray(doc) ? 'an array' : doc === null ? 'null' : `a ${typeof doc}`}, not an object of the edited arguments`);
    canonicalJson(doc);
  } catch (e) {
    throw new CliRefusal(`${where}: ${(e as Error).message}`);
  }
  return doc as JsonObject;
}

/** Shows the request and asks on a terminal; refuses (exit 1, nothing written) unless the answer is yes. */
async function confirmOnTerminal(
  inv: Invocation,
  verb: 'grant' | 'deny',
  view: RequestView,
  policy: Policy,
  who: string,
  edit: JsonObject | null,
): Promise<void> {
  const { io, values, out, err } = inv;
  if (values['yes'] === true || io.interactive !== true || io.ask === undefined) return;
  // With --json, stdout carries only the JSON: the person reads the request on stderr.
  const show = values['json'] === true ? err : out;
  for (const line of requestLines(view, policy)) show(line);
  if (edit !== null) argumentLines(edit).forEach((line, i) => show(`${i === 0 ? '  edited to   ' : '             '}${line}`));
  // Arguments too long for a screen: every key again, long strings cut and marked, right above
  // the question, so that a value padded with thousands of spaces cannot push the part that
  // matters (prod-eu-1 …) off the screen the person answers on. The whole text is above.
  for (const [name, args] of [
    ['in short', view.record.request.action.canonicalArguments],
    ['edited, short', edit],
  ] as const) {
    if (args !== null && canonicalJson(args).length > IN_SHORT) {
      show(`  ${name.padEnd(12)}${argumentsForDisplay(args, IN_SHORT).text}   (long strings cut: the whole arguments are above)`);
    }
  }
  const id = view.record.request.requestId;
  const what = edit === null ? '' : ' with the edited arguments';
  const answer = await io.ask(`${verb} ${id} (${view.record.request.action.name})${what} as ${who}? [y/N] `);
  if (answer === null || !/^\s*y(es)?\s*$/i.test(answer)) {
    throw new CliRefusal(
      `not ${verb === 'grant' ? 'granted' : 'denied'}: ${answer === null ? 'no answer (end of input)' : `the answer was ${JSON.stringify(answer.trim())}`}; nothing was written (give --yes to answer without asking)`,
    );
  }
}

/**
 * The effect key the request's action reserves when it runs: the one its `APPROVAL_REQUESTED`
 * recorded (a caller's key included), else the policy's template for its arguments; null when
 * it has none.
 */
async function effectKeyOf(reader: StateStore, view: RequestView, policy: Policy): Promise<string | null> {
  const { request } = view.record;
  const asked = reader.lastApprovalEvent
    ? await reader.lastApprovalEvent(request.requestId, 'APPROVAL_REQUESTED')
    : ((await reader.events()).filter((e) => e.approvalId === request.requestId && e.type === 'APPROVAL_REQUESTED').at(-1) ?? null);
  if (asked !== null) return asked.effectKey;
  const template = policy.action(request.action.name)?.effect ?? null;
  if (template === null) return null;
  try {
    return resolveEffectTemplate(template, request.action.canonicalArguments, request.action.resource);
  } catch {
    return null;
  }
}

/**
 * What the human must know before granting: the effect already happened (committed since the
 * request was filed) or nobody knows whether it did (ambiguous). Either way a grant can only be
 * refused when the agent presents it. The lines name the effect, the action that holds it and its
 * receipt; none when the effect is free.
 */
async function effectWarning(reader: StateStore, view: RequestView, policy: Policy): Promise<string[]> {
  const key = await effectKeyOf(reader, view, policy);
  const effect = key === null ? null : await reader.getEffect(key);
  if (effect === null || (effect.state !== 'committed' && effect.state !== 'ambiguous')) return [];
  const receipt = (await reader.receipts()).filter((r) => r.action_id === effect.actionId).at(-1)?.receipt_id ?? null;
  const by = `action ${effect.actionId}${typeof receipt === 'string' ? `, receipt ${receipt}` : ''}`;
  if (effect.state === 'committed') {
    return [
      `this effect already happened: ${effect.effectKey} was committed by ${by}`,
      `  a grant cannot run it again (the call is refused as DuplicateEffect); deny the request instead (see: ctrlrun inspect ${effect.actionId})`,
    ];
  }
  return [
    `nobody knows whether this effect happened: ${effect.effectKey} is ambiguous (left by ${by})`,
    `  a grant cannot run it until a human says what happened: ${resolveHint(effect.effectKey)}`,
  ];
}

/** Past this many characters of canonical arguments, the question is preceded by a short view of them. */
const IN_SHORT = 400;

/** How the operator settles the AMBIGUOUS effect `key` (the agent chose it: see `resolveCommands`). */
function resolveHint(key: string): string {
  const commands = resolveCommands(key);
  if (commands === null)
    return 'its key holds a NUL or a lone surrogate, which no command line can carry: resolve it through ctrlrun mcp-operator or POST /v1/effects/:key/resolve';
  return `${commands.committed} (or --failed)`;
}

/** A command that answers one pending request as `--as NAME` through the operator's Control. */
function answerCommand(
  name: 'approve' | 'deny',
  summary: string,
  answer: (
    control: Control,
    view: RequestView,
    approver: string,
    inv: Invocation,
    edit: JsonObject | null,
    verified: VerifiedPrincipal | null,
  ) => Promise<void>,
): Command {
  return {
    name,
    summary,
    positionals: ['REQUEST_ID'],
    options: {
      ...(name === 'approve'
        ? {
            edit: {
              type: 'string' as const,
              value: 'FILE',
              help: 'approve the arguments in FILE (a JSON object; - reads standard input) instead of the proposed ones: decided again by the policy, bound to their own hash, under a new request id',
            },
          }
        : {}),
      as: AS_APPROVER,
      ...JWT_OPTIONS,
      'approver-token-file': {
        type: 'string',
        value: 'FILE',
        help: 'with --identity-jwt …: a file holding your token; verified, it names who answers and records you as a verified approver (what counts toward approvals_required)',
      },
      'approver-roles-claim': {
        type: 'string',
        value: 'CLAIM',
        help: "with --identity-jwt …: the token's claim listing your roles (copy it with --identity-jwt-claim)",
      },
      yes: { type: 'boolean', short: 'y', help: 'answer without showing the request and asking (the default when standard input is not a terminal)' },
      json: { type: 'boolean', help: 'the answer and the whole request it answered, as JSON' },
      'store-url': STORE_URL,
    },
    details:
      'On a terminal, the exact action is shown first (name, every argument as hashed, hash, requester, expiry, rule) and you are asked [y/N]; ' +
      'anything but y/yes answers nothing (exit 1). Not on a terminal, the answer is given without asking, as in scripts.',
    async run(inv) {
      const id = inv.positionals[0]!;
      const edit = await readEdit(inv);
      const identity = await verifiedIdentity(inv, { commands: 'approve and deny', who: 'who answers', action: 'ctrlrun.approve' });
      let view: RequestView | undefined;
      return answeringControl(
        inv,
        async (reader) => void (view = await pendingRequest(reader, id)),
        (control, approver) => answer(control, view!, approver, inv, edit, identity?.principal ?? null),
        async (reader, policy, who) => {
          // Said before any question, on standard error (standard output stays what scripts read).
          if (name === 'approve' && edit === null) for (const line of await effectWarning(reader, view!, policy)) inv.err(line);
          await confirmOnTerminal(inv, name === 'approve' ? 'grant' : 'deny', view!, policy, who, edit);
        },
        identity === null ? null : { who: identity.who, approvers: identity.approvers },
      );
    },
  };
}

function answered(view: RequestView, fields: JsonObject): string {
  // orderedJson: arguments may hold integers beyond 2^53 (bigint), which JSON.stringify throws on.
  return orderedJson({ ...fields, request: requestJson(view) });
}

export const approve: Command = answerCommand(
  'approve',
  'grant a pending approval request (bound to its action hash, used once), or with --edit approve edited arguments',
  async (control, view, approver, { out, json, values }, edit, verified) => {
    const id = view.record.request.requestId;
    let approval;
    try {
      approval = await control.grantApproval(
        id,
        edit === null ? { approver, ...(verified ? { verified } : {}) } : { approver, via: 'cli', edit: { arguments: edit } },
      );
    } catch (err) {
      // Counted, not yet granted: said, exit 0 (the yes is recorded).
      if (!(err instanceof ApprovalMismatch) || !err.counted) throw err;
      const record = await control.store.getApproval(id);
      const progress = record === null ? null : approvalProgress(record);
      if (values['json'] === true) {
        json(answered(view, { request_id: id, approval_id: id, status: 'pending', approver, action_hash: view.record.request.actionHash, progress }));
        return;
      }
      out(`recorded ${approver}'s approval of ${id}: ${progress ?? 'counted'}; it stays pending until enough verified approvers say yes`);
      return;
    }
    const expires = evidenceTime(parseTime(approval.expiresAt));
    if (approval.approvalId !== id) {
      const edited = await control.approvalEdit(approval.approvalId);
      const proposedArguments = edited?.proposedArguments ?? view.record.request.action.canonicalArguments;
      const approvedArguments = edited?.approvedArguments ?? edit ?? {};
      if (values['json'] === true) {
        json(
          answered(view, {
            request_id: approval.approvalId,
            approval_id: approval.approvalId,
            edited_from: id,
            status: 'granted',
            approver,
            action_hash: approval.actionHash,
            proposed_hash: view.record.request.actionHash,
            proposed_arguments: proposedArguments,
            approved_arguments: approvedArguments,
            expires_at: expires,
          }),
        );
        return;
      }
      out(`granted ${approval.approvalId} for ${approval.actionHash} by ${approver}: an edit of ${id}, which is now denied`);
      argumentLines(proposedArguments).forEach((line, i) => out(`${i === 0 ? 'proposed  ' : '          '}${line}`));
      argumentLines(approvedArguments).forEach((line, i) => out(`${i === 0 ? 'approved  ' : '          '}${line}`));
      out(`the agent's call of ${id} now runs the approved arguments, once`);
      out(`expires ${expires}`);
      return;
    }
    if (values['json'] === true) {
      json(answered(view, { request_id: id, approval_id: id, status: 'granted', approver, action_hash: approval.actionHash, expires_at: expires }));
      return;
    }
    out(`granted ${id} for ${approval.actionHash} by ${approver}`);
    out(`expires ${expires}`);
  },
);

export const deny: Command = answerCommand(
  'deny',
  'deny a pending approval request',
  async (control, view, approver, { out, json, values }, _edit, verified) => {
    const id = view.record.request.requestId;
    await control.denyApproval(id, { approver, ...(verified ? { verified } : {}) });
    if (values['json'] === true) {
      json(answered(view, { request_id: id, approval_id: id, status: 'denied', approver, action_hash: view.record.request.actionHash }));
      return;
    }
    out(`denied ${id} by ${approver}`);
  },
);
