// The README's walkthrough: one refund protected by ctrlrun, run from the directory `ctrlrun init`
// wrote. fromFile() finds things as the CLI does: ./ctrlrun.yaml (or $CTRLRUN_CONFIG), the store
// .ctrlrun/state.db beside it (or $CTRLRUN_STATE), events.jsonl and receipts.jsonl there too.
import { answerCommands, ApprovalRequired, protect } from '@ctrlrun/kernel';
import { fromFile } from '@ctrlrun/store-node';

const control = await fromFile({ principal: { agent: 'refund-agent' } });
const refund = protect(async ({ payment_id, amount }) => ({ id: `re_${String(payment_id)}`, amount }), { control, name: 'stripe.refund' });

const approvalId = process.argv[2]; // the request a human granted, on the second run
try {
  const result = await refund({ payment_id: 'txn_42', amount: 120000 }, approvalId ? { approvalId } : {});
  console.log('refunded', JSON.stringify(result));
} catch (err) {
  if (!(err instanceof ApprovalRequired)) throw err;
  console.log(`a human must approve: ${answerCommands(err.requestId).approve}`);
} finally {
  await control.close();
}
