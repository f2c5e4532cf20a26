// The playground bench's second page: the guide's ten steps through the same modules the
// playground calls (runRefundForm, approveRequest, the try-it module, the sql.js store with
// IndexedDB persistence, each step with its saves held as the page holds them), and no page
// around them: no DOM, no entries, no receipts table, no page record. What the playground's
// figure costs before any page work.
import initSqlJs from 'sql.js';
import { createTryIt, TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore, indexedDbPersistence, type SqlJsModule } from '@ctrlrun/store-sqljs';
import { GUIDE } from '../../../playground/src/guide.js';
import { approveRequest, runRefundForm } from '../../../playground/src/session.js';

const SQL = (await initSqlJs({ locateFile: () => '/sqljs/sql-wasm-browser.wasm' })) as unknown as SqlJsModule;
let opened = 0;

/** A fresh store (its own IndexedDB database) and try-it module, as the page has after a load or a Reset. */
async function fresh() {
  const store = await createSqlJsStore({ SQL, persistence: indexedDbPersistence(`ctrlrun-bench-kernel-${++opened}`) });
  const calls: Record<string, number> = {};
  const tryIt = createTryIt({
    store,
    policyYaml: TRY_IT_POLICY_YAML,
    remoteCalls: { get: (id) => calls[id] ?? 0, record: async (id) => void (calls[id] = (calls[id] ?? 0) + 1) },
  });
  return { store, tryIt };
}

/** The ten steps on a fresh store, each timed from its call until its last save is kept: [id, ms, outcome]. */
async function tenSteps(): Promise<[string, number, string][]> {
  const { store, tryIt } = await fresh();
  let requestId = '';
  let approvalId = '';
  const out: [string, number, string][] = [];
  for (const action of GUIDE.flatMap((s) => s.actions)) {
    const fill = action.fill;
    const t0 = performance.now();
    const item = await store.holdSaves(async () =>
      fill.kind === 'approve'
        ? approveRequest(tryIt, requestId)
        : runRefundForm(tryIt, store, {
            payment_id: fill.payment_id,
            amount: String(fill.amount),
            lose_reply: fill.lose_reply,
            approval_id: fill.present ? approvalId || requestId : '',
          }),
    );
    if (item.kind === 'refund' && item.result.request_id) requestId = item.result.request_id;
    if (item.kind === 'approve') approvalId = item.result.approval_id;
    out.push([action.id, performance.now() - t0, item.kind === 'refund' ? item.result.outcome : item.kind === 'approve' ? 'approved' : item.kind]);
  }
  await store.close();
  return out;
}

Object.assign(globalThis, { tenSteps });
document.body.dataset['ready'] = 'true';
