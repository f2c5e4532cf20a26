// The README's walkthrough: one refund protected by ctrlrun, run from the directory `ctrlrun init`
// wrote (it reads ./ctrlrun.yaml and keeps its state in ./.ctrlrun/state.db).
import { readFileSync } from 'node:fs';
import { ApprovalRequired, Control, loadPolicy, protect } from '@ctrlrun/kernel';
import { openStore } from '@ctrlrun/store-node';

const store = await openStore('.ctrlrun/state.db');
const control = new Control({
  policy: loadPolicy(readFileSync('ctrlrun.yaml', 'utf8'), { source: 'ctrlrun.yaml' }),
  store,
  principal: { agent: 'refund-agent' },
});
const refund = protect(async ({ payment_id, amount }) => ({ id: `re_${String(payment_id)}`, amount }), { control, name: 'stripe.refund' });

const approvalId = process.argv[2]; // the request a human granted, on the second run
try {
  const result = await refund({ payment_id: 'txn_42', amount: 120000 }, approvalId ? { approvalId } : {});
  console.log('refunded', JSON.stringify(result));
} catch (err) {
  if (!(err instanceof ApprovalRequired)) throw err;
  console.log(`a human must approve: ctrlrun approve ${err.requestId}`);
} finally {
  await store.close();
}
