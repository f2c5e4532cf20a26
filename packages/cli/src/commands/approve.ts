/**
 * `ctrlrun approve REQUEST_ID` and `ctrlrun deny REQUEST_ID`: a human answers a pending approval
 * request from a second terminal. The store records the answer as `cli:local`, then the event
 * (`APPROVAL_GRANTED` with the hash it is bound to, or `APPROVAL_DENIED`). An unknown request is
 * refused before any write connection is opened.
 *
 * @module
 */
import { evidenceTime, parseTime, type StateStore } from '@ctrlrun/kernel';
import { CLI_ACTOR, STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal } from '../errors.js';
import { openAnswerer } from '../stores.js';

/** Refuses an unknown or already answered request while only a reader is open. */
async function requestMustExist(reader: StateStore, id: string): Promise<void> {
  const record = await reader.getApproval(id);
  if (record === null) throw new CliRefusal(`no approval request ${id}`);
  if (record.status !== 'pending') throw new CliRefusal(`approval request ${id} is ${record.status}, not pending: an answer is given once`);
}

/**
 * A command that answers one pending request: refuses an unknown or answered one while only a
 * reader is open, then runs `answer` on the writer and always closes it.
 */
function answerCommand(name: string, summary: string, answer: (store: StateStore, id: string, out: (line: string) => void) => Promise<void>): Command {
  return {
    name,
    summary,
    positionals: ['REQUEST_ID'],
    options: { 'store-url': STORE_URL },
    async run({ io, values, positionals, out }) {
      const id = positionals[0]!;
      const store = await openAnswerer(storeTarget(io, values['store-url'] as string | undefined), (r) => requestMustExist(r, id));
      try {
        await answer(store, id, out);
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}

export const approve: Command = answerCommand('approve', 'grant a pending approval request (bound to its action hash, used once)', async (store, id, out) => {
  const approval = await store.grantApproval(id, CLI_ACTOR);
  await store.appendEvent({
    ts: evidenceTime(new Date()),
    type: 'APPROVAL_GRANTED',
    actionId: null,
    effectKey: null,
    approvalId: id,
    data: { approver: CLI_ACTOR, action_hash: approval.actionHash },
  });
  out(`granted ${id} for ${approval.actionHash}`);
  out(`expires ${evidenceTime(parseTime(approval.expiresAt))}`);
});

export const deny: Command = answerCommand('deny', 'deny a pending approval request', async (store, id, out) => {
  await store.denyApproval(id, CLI_ACTOR);
  await store.appendEvent({ ts: evidenceTime(new Date()), type: 'APPROVAL_DENIED', actionId: null, effectKey: null, approvalId: id, data: { approver: CLI_ACTOR } });
  out(`denied ${id}`);
});
