/**
 * `ctrlrun approve REQUEST_ID` and `ctrlrun deny REQUEST_ID`: a human answers a pending approval
 * request from a second terminal, through the kernel (`Control.grantApproval` / `denyApproval`),
 * so the answer and its event (`APPROVAL_GRANTED` with the hash it is bound to, or
 * `APPROVAL_DENIED`) are written by the one path every surface uses, on the kernel's clock, and
 * reach the configured sinks. Who answers is `--as NAME`, `$CTRLRUN_APPROVER`, or the OS login
 * name. An unknown request is refused before any write connection is opened.
 *
 * @module
 */
import { evidenceTime, parseTime } from '@ctrlrun/kernel/store';
import { type Control, type StateStore } from '@ctrlrun/kernel';
import { AS_APPROVER, STORE_URL, type Command } from '../command.js';
import { answeringControl } from '../control.js';
import { CliRefusal } from '../errors.js';

/** Refuses an unknown or already answered request while only a reader is open. */
async function requestMustExist(reader: StateStore, id: string): Promise<void> {
  const record = await reader.getApproval(id);
  if (record === null) throw new CliRefusal(`no approval request ${id}`);
  if (record.status !== 'pending') throw new CliRefusal(`approval request ${id} is ${record.status}, not pending: an answer is given once`);
}

/** A command that answers one pending request as `--as NAME` through the operator's Control. */
function answerCommand(name: string, summary: string, answer: (control: Control, id: string, approver: string, out: (line: string) => void) => Promise<void>): Command {
  return {
    name,
    summary,
    positionals: ['REQUEST_ID'],
    options: { as: AS_APPROVER, 'store-url': STORE_URL },
    async run(inv) {
      const id = inv.positionals[0]!;
      return answeringControl(inv, (reader) => requestMustExist(reader, id), (control, approver) => answer(control, id, approver, inv.out));
    },
  };
}

export const approve: Command = answerCommand('approve', 'grant a pending approval request (bound to its action hash, used once)', async (control, id, approver, out) => {
  const approval = await control.grantApproval(id, { approver });
  out(`granted ${id} for ${approval.actionHash} by ${approver}`);
  out(`expires ${evidenceTime(parseTime(approval.expiresAt))}`);
});

export const deny: Command = answerCommand('deny', 'deny a pending approval request', async (control, id, approver, out) => {
  await control.denyApproval(id, { approver });
  out(`denied ${id} by ${approver}`);
});
