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

export const approve: Command = {
  name: 'approve',
  summary: 'grant a pending approval request (bound to its action hash, used once)',
  positionals: ['REQUEST_ID'],
  options: { 'store-url': STORE_URL },
  async run({ io, values, positionals, out }) {
    const id = positionals[0]!;
    const store = await openAnswerer(storeTarget(io, values['store-url'] as string | undefined), (r) => requestMustExist(r, id));
    try {
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
      return 0;
    } finally {
      await store.close();
    }
  },
};

export const deny: Command = {
  name: 'deny',
  summary: 'deny a pending approval request',
  positionals: ['REQUEST_ID'],
  options: { 'store-url': STORE_URL },
  async run({ io, values, positionals, out }) {
    const id = positionals[0]!;
    const store = await openAnswerer(storeTarget(io, values['store-url'] as string | undefined), (r) => requestMustExist(r, id));
    try {
      await store.denyApproval(id, CLI_ACTOR);
      await store.appendEvent({ ts: evidenceTime(new Date()), type: 'APPROVAL_DENIED', actionId: null, effectKey: null, approvalId: id, data: { approver: CLI_ACTOR } });
      out(`denied ${id}`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
