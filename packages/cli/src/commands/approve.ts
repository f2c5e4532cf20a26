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
 * @module
 */
import { evidenceTime, parseTime } from '@ctrlrun/kernel/store';
import { type Control, type JsonObject, type Policy, type StateStore } from '@ctrlrun/kernel';
import { readRequest, requestJson, requestLines, type RequestView } from '../approval-view.js';
import { AS_APPROVER, STORE_URL, type Command, type Invocation } from '../command.js';
import { answeringControl } from '../control.js';
import { CliRefusal } from '../errors.js';

/** Refuses an unknown, altered or already answered request while only a reader is open. */
async function pendingRequest(reader: StateStore, id: string): Promise<RequestView> {
  const view = await readRequest(reader, id);
  if (view.record.status !== 'pending') throw new CliRefusal(`approval request ${id} is ${view.record.status}, not pending: an answer is given once`);
  return view;
}

/** Shows the request and asks on a terminal; refuses (exit 1, nothing written) unless the answer is yes. */
async function confirmOnTerminal(inv: Invocation, verb: 'grant' | 'deny', view: RequestView, policy: Policy, who: string): Promise<void> {
  const { io, values, out, err } = inv;
  if (values['yes'] === true || io.interactive !== true || io.ask === undefined) return;
  // With --json, stdout carries only the JSON: the person reads the request on stderr.
  const show = values['json'] === true ? err : out;
  for (const line of requestLines(view, policy)) show(line);
  const id = view.record.request.requestId;
  const answer = await io.ask(`${verb} ${id} (${view.record.request.action.name}) as ${who}? [y/N] `);
  if (answer === null || !/^\s*y(es)?\s*$/i.test(answer)) {
    throw new CliRefusal(`not ${verb === 'grant' ? 'granted' : 'denied'}: ${answer === null ? 'no answer (end of input)' : `the answer was ${JSON.stringify(answer.trim())}`}; nothing was written (give --yes to answer without asking)`);
  }
}

/** A command that answers one pending request as `--as NAME` through the operator's Control. */
function answerCommand(name: 'approve' | 'deny', summary: string, answer: (control: Control, view: RequestView, approver: string, inv: Invocation) => Promise<void>): Command {
  return {
    name,
    summary,
    positionals: ['REQUEST_ID'],
    options: {
      as: AS_APPROVER,
      yes: { type: 'boolean', short: 'y', help: 'answer without showing the request and asking (the default when standard input is not a terminal)' },
      json: { type: 'boolean', help: 'the answer and the whole request it answered, as JSON' },
      'store-url': STORE_URL,
    },
    details:
      'On a terminal, the exact action is shown first (name, every argument as hashed, hash, requester, expiry, rule) and you are asked [y/N]; ' +
      'anything but y/yes answers nothing (exit 1). Not on a terminal, the answer is given without asking, as in scripts.',
    async run(inv) {
      const id = inv.positionals[0]!;
      let view: RequestView | undefined;
      return answeringControl(
        inv,
        async (reader) => void (view = await pendingRequest(reader, id)),
        (control, approver) => answer(control, view!, approver, inv),
        (_reader, policy, who) => confirmOnTerminal(inv, name === 'approve' ? 'grant' : 'deny', view!, policy, who),
      );
    },
  };
}

function answered(view: RequestView, fields: JsonObject): string {
  return JSON.stringify({ ...fields, request: requestJson(view) });
}

export const approve: Command = answerCommand('approve', 'grant a pending approval request (bound to its action hash, used once)', async (control, view, approver, { out, json, values }) => {
  const id = view.record.request.requestId;
  const approval = await control.grantApproval(id, { approver });
  const expires = evidenceTime(parseTime(approval.expiresAt));
  if (values['json'] === true) {
    json(answered(view, { approval_id: id, status: 'granted', approver, action_hash: approval.actionHash, expires_at: expires }));
    return;
  }
  out(`granted ${id} for ${approval.actionHash} by ${approver}`);
  out(`expires ${expires}`);
});

export const deny: Command = answerCommand('deny', 'deny a pending approval request', async (control, view, approver, { out, json, values }) => {
  const id = view.record.request.requestId;
  await control.denyApproval(id, { approver });
  if (values['json'] === true) {
    json(answered(view, { approval_id: id, status: 'denied', approver, action_hash: view.record.request.actionHash }));
    return;
  }
  out(`denied ${id} by ${approver}`);
});
