/**
 * The playground page: the real kernel (`@ctrlrun/kernel/try-it`) over the sql.js store, in this
 * tab, persisted in IndexedDB. The page owns the controls only; every outcome line is rendered
 * from what `step()` returns. The Approve button is the only way to grant.
 *
 * @module
 */
import initSqlJs from 'sql.js';
import wasmUrl from 'sql.js/dist/sql-wasm-browser.wasm?url';
import { runDemo } from '@ctrlrun/kernel/demo';
import { createTryIt, TRY_IT_POLICY_YAML, type RemoteCallCounter, type TryIt } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore, indexedDbPersistence, type IndexedDbPersistence, type SqlJsModule, type SqlJsStore } from '@ctrlrun/store-sqljs';
import { GUIDE, type GuideAction } from './guide.js';
import { entryElement, h } from './dom.js';
import { formatMinor, parseAmount } from './input.js';
import { emptyState, forgetStore, legacyRecord, memoryKeeper, shelfKeeper, type Keeper, type LogItem, type PageState } from './kept.js';
import { errorOf } from './render.js';
import { approveRequest, chainView, runRefundForm, type ChainRow } from './session.js';
import './style.css';

/** The IndexedDB database the store lives in, and the page's own record beside it. */
const STORE_DB = 'ctrlrun-playground';
/** Where earlier versions kept the page's record; read once if the store's database has none. */
const LEGACY_PAGE_DB = 'ctrlrun-playground-page';

declare const __CTRLRUN_VERSIONS__: { kernel: string; sqljs: string };

// ------------------------------------------------------------------------------ DOM helpers

function el<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

const ui = {
  status: el('status'),
  guide: el<HTMLOListElement>('guide'),
  paymentId: el<HTMLInputElement>('payment_id'),
  amount: el<HTMLInputElement>('amount'),
  amountHint: el('amount-hint'),
  loseReply: el<HTMLInputElement>('lose_reply'),
  approvalId: el<HTMLInputElement>('approval_id'),
  refundForm: el<HTMLFormElement>('refund-form'),
  run: el<HTMLButtonElement>('run'),
  requestId: el<HTMLInputElement>('request_id'),
  approveForm: el<HTMLFormElement>('approve-form'),
  approve: el<HTMLButtonElement>('approve'),
  output: el('output'),
  entries: el<HTMLOListElement>('entries'),
  chain: el('chain'),
  receipts: el<HTMLTableSectionElement>('receipts-body'),
  reset: el<HTMLButtonElement>('reset'),
  policy: el<HTMLTextAreaElement>('policy'),
  policyHash: el('policy-hash'),
  policyState: el('policy-state'),
  policyError: el('policy-error'),
  loadPolicy: el<HTMLButtonElement>('load-policy'),
  restorePolicy: el<HTMLButtonElement>('restore-policy'),
  runDemo: el<HTMLButtonElement>('run-demo'),
  demoOutput: el('demo-output'),
  versions: el('versions'),
};

// ------------------------------------------------------------------------------ state

interface Live {
  SQL: SqlJsModule;
  keeper: Keeper;
  state: PageState;
  store: SqlJsStore;
  tryIt: TryIt;
  /** The policy text in force. */
  policyYaml: string;
  persistent: boolean;
}

let live: Live | null = null;

/** Every action runs after the previous one finished: one tab, one writer. */
let queue: Promise<void> = Promise.resolve();
function serial(fn: () => Promise<void>): void {
  queue = queue.then(async () => {
    ui.output.setAttribute('aria-busy', 'true');
    try {
      await fn();
    } catch (err) {
      await log({ kind: 'refused', asked: 'the page', error: errorOf(err) }).catch(() => undefined);
    } finally {
      ui.output.setAttribute('aria-busy', 'false');
    }
  });
}

/** The fake remote's counter, kept in the page's record. */
function keptCounter(): RemoteCallCounter {
  return {
    get: (id) => live?.state.calls[id] ?? 0,
    record: async (id) => {
      if (!live) throw new Error('the playground is not running');
      live.state.calls[id] = (live.state.calls[id] ?? 0) + 1;
      await live.keeper.save(live.state);
    },
  };
}

function makeTryIt(store: SqlJsStore, policyYaml: string): TryIt {
  return createTryIt({ store, policyYaml, remoteCalls: keptCounter() });
}

/** The store, with the page's keeper: beside it in IndexedDB, or both in memory. */
async function openStore(SQL: SqlJsModule, persistent: boolean): Promise<{ store: SqlJsStore; keeper: Keeper }> {
  if (!persistent) return { store: await createSqlJsStore({ SQL }), keeper: memoryKeeper() };
  const persistence: IndexedDbPersistence = indexedDbPersistence(STORE_DB);
  return { store: await createSqlJsStore({ SQL, persistence }), keeper: shelfKeeper(persistence, () => legacyRecord(LEGACY_PAGE_DB)) };
}

// ------------------------------------------------------------------------------ output

/** A scroll to the newest entry is queued for the next frame (reading the height now would lay the page out once per entry). */
let scrollQueued = false;

function show(item: LogItem): void {
  ui.entries.append(entryElement(item));
  if (scrollQueued) return;
  scrollQueued = true;
  requestAnimationFrame(() => {
    scrollQueued = false;
    ui.output.scrollTop = ui.output.scrollHeight;
  });
}

/** Shows an entry and keeps it; resolves once it is kept (a reload right after still shows it). */
async function log(item: LogItem): Promise<void> {
  show(item);
  if (live) {
    live.state.log.push(item);
    await live.keeper.save(live.state);
  }
}

// ------------------------------------------------------------------------------ receipts

/** Everything a receipt row is drawn from. */
function rowSource(row: ChainRow): string {
  return JSON.stringify([row.seq, row.receiptId, row.hash, row.document]);
}

/** `apr_f4346158…` for a table cell; the full id is its tooltip and in the output. */
function shortId(v: unknown): string {
  return typeof v === 'string' && v.length > 16 ? `${v.slice(0, 12)}…` : v == null ? '-' : String(v);
}

/** One receipt row as the table shows it; rows already shown are kept while the chain only grows. */
function receiptRow(row: ChainRow): HTMLTableRowElement {
  const doc = row.document;
  const args = (doc['arguments'] ?? {}) as Record<string, unknown>;
  const amount = typeof args['amount'] === 'number' ? formatMinor(args['amount']) : '-';
  const tr = h(
    'tr',
    {},
    h('td', {}, String(row.seq ?? '-')),
    h('td', {}, String(args['payment_id'] ?? '-')),
    h('td', { class: 'num' }, amount),
    h('td', {}, String(doc['decision'] ?? '-')),
    h('td', {}, String(doc['result'] ?? '-')),
    h('td', doc['approval_id'] ? { title: String(doc['approval_id']) } : {}, shortId(doc['approval_id'])),
    h('td', {}, row.receiptId),
  );
  return tr;
}

/** What a shown row was drawn from: the same text in the same place needs no new row. */
const shownFrom = new WeakMap<HTMLTableRowElement, string>();

async function showReceipts(): Promise<void> {
  if (!live) return;
  const { rows, report } = await chainView(live.store);
  // Rows drawn from exactly the stored text they show are kept; from the first that differs on,
  // the table is drawn again. Most steps only append.
  const shown = [...ui.receipts.rows];
  let same = 0;
  while (same < rows.length && same < shown.length && shownFrom.get(shown[same]!) === rowSource(rows[same]!)) same++;
  for (const tr of shown.slice(same)) tr.remove();
  ui.receipts.append(
    ...rows.slice(same).map((row) => {
      const tr = receiptRow(row);
      shownFrom.set(tr, rowSource(row));
      return tr;
    }),
  );
  const total = report.chained + report.unchained;
  const verdict = report.ok ? 'the chain is intact' : report.breaks.map((b) => `${b.name}${b.seq === null ? '' : ` at seq ${b.seq}`}: ${b.detail}`).join('; ');
  ui.chain.textContent = total === 0 ? 'no receipts yet' : `chain: ${report.verified} of ${total} receipts verified in this tab — ${verdict}`;
  ui.chain.dataset['ok'] = String(report.ok);
  ui.chain.dataset['count'] = String(total);
}

// ------------------------------------------------------------------------------ the form

function updateAmountHint(): void {
  const parsed = parseAmount(ui.amount.value);
  ui.amountHint.textContent = parsed.ok ? `= ${formatMinor(parsed.amount)}` : 'whole cents, e.g. 50000 = €500.00';
}

/**
 * Where the page stands before a step: if the step's last save fails, the store goes back to its
 * last saved state, and so does the page — its entries (shown and kept) and the ids the step filled in.
 */
function undoPoint(): () => void {
  const state = live?.state;
  const logged = state?.log.length ?? 0;
  const shown = ui.entries.children.length;
  const ids = { requestId: state?.requestId ?? null, approvalId: state?.approvalId ?? null };
  const fields = { requestId: ui.requestId.value, approvalId: ui.approvalId.value };
  return () => {
    if (state !== undefined) {
      state.log.length = Math.min(state.log.length, logged);
      state.requestId = ids.requestId;
      state.approvalId = ids.approvalId;
    }
    while (ui.entries.children.length > shown) ui.entries.lastElementChild!.remove();
    ui.requestId.value = fields.requestId;
    ui.approvalId.value = fields.approvalId;
  };
}

async function onRun(): Promise<void> {
  if (!live) return;
  const { tryIt, store } = live;
  const undo = undoPoint();
  let kept: Promise<void> = Promise.resolve();
  let receipts: Promise<void> = Promise.resolve();
  // The step runs with the store's saves held, so its last save carries the page's record too:
  // the step's commit and its entry are kept in one IndexedDB transaction. The save the kernel
  // makes inside (the reservation, before the remote is called) is not held back.
  const step = store.holdSaves(async () => {
    const item = await runRefundForm(tryIt, store, {
      payment_id: ui.paymentId.value,
      amount: ui.amount.value,
      lose_reply: ui.loseReply.checked,
      approval_id: ui.approvalId.value,
    });
    if (item.kind === 'refund' && item.result.outcome === 'approval_required' && item.result.request_id) {
      if (live) live.state.requestId = item.result.request_id;
      ui.requestId.value = item.result.request_id;
    }
    // The entry goes out with the step's last save; the receipts are read meanwhile. The next
    // action waits for both.
    kept = log(item);
    if (item.kind === 'refund') receipts = showReceipts();
  });
  try {
    await step;
  } catch (err) {
    // The last save failed and the store went back to its last saved state: the step's entry
    // goes too, and the table drawn meanwhile may show a receipt it took back, so it is drawn
    // again from what is stored.
    await Promise.allSettled([kept, receipts]);
    undo();
    await showReceipts().catch(() => undefined);
    throw err;
  }
  await Promise.all([kept, receipts]);
}

async function onApprove(): Promise<void> {
  if (!live) return;
  const { tryIt, store } = live;
  const undo = undoPoint();
  let kept: Promise<void> = Promise.resolve();
  // As in onRun: the grant and its entry are kept together.
  const step = store.holdSaves(async () => {
    const item = await approveRequest(tryIt, ui.requestId.value);
    if (item.kind === 'approve') {
      if (live) live.state.approvalId = item.result.approval_id;
      ui.approvalId.value = item.result.approval_id;
    }
    kept = log(item);
  });
  try {
    await step;
  } catch (err) {
    // The entry was to go out with the failed save: its rejection is this one. The grant is undone, and so is its entry.
    await Promise.allSettled([kept]);
    undo();
    throw err;
  }
  await kept;
}

function fill(action: GuideAction): void {
  for (const node of ui.guide.querySelectorAll('[aria-current]')) node.removeAttribute('aria-current');
  document.getElementById(`fill-${action.id}`)?.setAttribute('aria-current', 'step');
  const f = action.fill;
  if (f.kind === 'approve') {
    if (live?.state.requestId) ui.requestId.value = live.state.requestId;
    ui.approve.focus();
    return;
  }
  ui.paymentId.value = f.payment_id;
  ui.amount.value = String(f.amount);
  ui.loseReply.checked = f.lose_reply;
  ui.approvalId.value = f.present ? (live?.state.approvalId ?? live?.state.requestId ?? '') : '';
  updateAmountHint();
  ui.run.focus();
}

function renderGuide(): void {
  ui.guide.replaceChildren(
    ...GUIDE.map((step) =>
      h(
        'li',
        { class: 'step', id: `step-${step.n}` },
        h('h3', {}, step.title),
        h('p', {}, step.body),
        h(
          'p',
          { class: 'actions' },
          ...step.actions.map((a) => {
            const b = h('button', { type: 'button', id: `fill-${a.id}`, class: 'fill' }, a.label);
            b.addEventListener('click', () => fill(a));
            return b;
          }),
        ),
        h('p', { class: 'watch' }, h('strong', {}, 'Watch for: '), step.watch),
      ),
    ),
  );
}

// ------------------------------------------------------------------------------ the policy

function showPolicy(): void {
  if (!live) return;
  ui.policyHash.textContent = live.tryIt.policyHash;
  markPolicyEdited();
}

function markPolicyEdited(): void {
  if (!live) return;
  const edited = ui.policy.value !== live.policyYaml;
  const original = live.policyYaml === TRY_IT_POLICY_YAML;
  ui.policyState.textContent = edited
    ? 'edited — not loaded yet: the policy above the hash is still in force'
    : original
      ? 'the module’s own policy, in force'
      : 'your edited policy, in force';
}

async function onLoadPolicy(text: string): Promise<void> {
  if (!live) return;
  let next: TryIt;
  try {
    next = makeTryIt(live.store, text);
  } catch (err) {
    const e = errorOf(err);
    ui.policyError.textContent = `${e.name}: ${e.message} — the previous policy stays in force.`;
    ui.policyError.hidden = false;
    return await log({ kind: 'refused', asked: 'load the edited policy', error: e });
  }
  // Kept first, in force after: a policy the page's record could not keep is not put in force (a
  // reload would bring back the one kept).
  const undo = undoPoint();
  const kept = live.state.policyYaml;
  live.state.policyYaml = text === TRY_IT_POLICY_YAML ? null : text;
  try {
    await log({ kind: 'note', text: `policy loaded: ${next.policyHash}` });
  } catch (err) {
    undo();
    live.state.policyYaml = kept;
    const e = errorOf(err);
    ui.policyError.textContent = `${e.name}: ${e.message} — the policy could not be kept; the previous policy stays in force.`;
    ui.policyError.hidden = false;
    throw err;
  }
  ui.policyError.textContent = '';
  ui.policyError.hidden = true;
  live.tryIt = next;
  live.policyYaml = text;
  ui.policy.value = text;
  showPolicy();
}

// ------------------------------------------------------------------------------ reset and demo

async function onReset(): Promise<void> {
  if (!live) return;
  await live.store.close();
  if (live.persistent) await forgetStore(STORE_DB);
  live.state = emptyState();
  ({ store: live.store, keeper: live.keeper } = await openStore(live.SQL, live.persistent));
  await live.keeper.save(live.state);
  live.tryIt = makeTryIt(live.store, TRY_IT_POLICY_YAML);
  live.policyYaml = TRY_IT_POLICY_YAML;
  ui.policy.value = TRY_IT_POLICY_YAML;
  ui.policyError.hidden = true;
  for (const input of [ui.paymentId, ui.amount, ui.approvalId, ui.requestId]) input.value = '';
  ui.loseReply.checked = false;
  updateAmountHint();
  ui.entries.replaceChildren();
  showPolicy();
  await log({ kind: 'note', text: 'reset: a fresh store, no receipts, no approvals, the remote counts at zero' });
  await showReceipts();
}

async function onRunDemo(): Promise<void> {
  if (!live) return;
  const lines: string[] = [];
  ui.demoOutput.textContent = 'running…';
  const store = await createSqlJsStore({ SQL: live.SQL });
  try {
    const report = await runDemo({ store, write: (line) => void lines.push(line) });
    if (!report.ok) lines.push('', 'the demo failed here:', ...report.failures, '', LOCAL_COMMAND);
  } catch (err) {
    lines.push('', `the demo could not run: ${errorOf(err).message}`, LOCAL_COMMAND);
  } finally {
    await store.close();
  }
  ui.demoOutput.textContent = lines.join('\n');
}

const LOCAL_COMMAND = 'Run it on your machine instead, from a checkout of the repository: npm ci && npm run demo   (the page: npm run playground)';

// ------------------------------------------------------------------------------ boot

function wire(): void {
  ui.refundForm.addEventListener('submit', (event) => {
    event.preventDefault();
    serial(onRun);
  });
  // The only path to a grant: this form, submitted by the reader.
  ui.approveForm.addEventListener('submit', (event) => {
    event.preventDefault();
    serial(onApprove);
  });
  ui.amount.addEventListener('input', updateAmountHint);
  ui.policy.addEventListener('input', markPolicyEdited);
  ui.loadPolicy.addEventListener('click', () => serial(() => onLoadPolicy(ui.policy.value)));
  ui.restorePolicy.addEventListener('click', () => serial(() => onLoadPolicy(TRY_IT_POLICY_YAML)));
  ui.reset.addEventListener('click', () => serial(onReset));
  ui.runDemo.addEventListener('click', () => serial(onRunDemo));
}

function idbAvailable(): boolean {
  return typeof indexedDB !== 'undefined';
}

/** How long a page waits for another tab (or the page it replaces) to let go of the store. */
const TAB_LOCK_WAIT_MS = 2000;

/**
 * One tab at a time owns the IndexedDB store: each save writes the whole database, so two tabs
 * would overwrite each other's reservations. The lock is held until the page goes away; a page
 * that cannot get it runs in memory and says so.
 */
function ownTheStore(): Promise<boolean> {
  const locks = (navigator as { locks?: LockManager }).locks;
  if (!locks) return Promise.resolve(true);
  return new Promise((resolve) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), TAB_LOCK_WAIT_MS);
    locks
      .request(STORE_DB, { signal: abort.signal }, () => {
        clearTimeout(timer);
        resolve(true);
        return new Promise<never>(() => undefined);
      })
      .catch(() => resolve(false));
  });
}

async function boot(): Promise<void> {
  wire();
  renderGuide();
  ui.policy.value = TRY_IT_POLICY_YAML;
  updateAmountHint();
  const [SQL, owner] = await Promise.all([
    initSqlJs({ locateFile: () => wasmUrl }) as Promise<unknown> as Promise<SqlJsModule>,
    idbAvailable() ? ownTheStore() : false,
  ]);
  let persistent = idbAvailable() && owner;
  let keeper: Keeper;
  let state: PageState;
  let store: SqlJsStore | undefined;
  try {
    ({ store, keeper } = await openStore(SQL, persistent));
    state = await keeper.load();
    if (idbAvailable() && !owner) {
      state.log.push({
        kind: 'note',
        text: 'the playground is open in another tab, which keeps the store: this tab runs in memory, and a reload here starts over',
      });
    }
  } catch (err) {
    // IndexedDB refused (some private windows): run in memory and say so.
    persistent = false;
    await store?.close().catch(() => undefined);
    ({ store, keeper } = await openStore(SQL, false));
    state = emptyState();
    state.log.push({ kind: 'note', text: `IndexedDB is not usable here (${errorOf(err).message}): this session lives in memory and a reload starts over` });
  }
  let policyYaml = state.policyYaml ?? TRY_IT_POLICY_YAML;
  live = { SQL, keeper, state, store, persistent, policyYaml, tryIt: null as unknown as TryIt };
  try {
    live.tryIt = makeTryIt(store, policyYaml);
  } catch (err) {
    policyYaml = TRY_IT_POLICY_YAML;
    live.policyYaml = policyYaml;
    live.state.policyYaml = null;
    live.tryIt = makeTryIt(store, policyYaml);
    state.log.push({ kind: 'note', text: `the kept policy no longer loads (${errorOf(err).message}); the module's own policy is in force` });
  }
  ui.policy.value = policyYaml;
  ui.requestId.value = state.requestId ?? '';
  for (const item of state.log) show(item);
  showPolicy();
  await showReceipts();
  const db = new SQL.Database();
  let sqlite = '?';
  try {
    const rows = db.prepare('SELECT sqlite_version()');
    if (rows.step()) sqlite = String(rows.get()[0]);
    rows.free();
  } finally {
    db.close();
  }
  ui.versions.textContent = `@ctrlrun/kernel ${__CTRLRUN_VERSIONS__.kernel}, sql.js ${__CTRLRUN_VERSIONS__.sqljs} (SQLite ${sqlite}), in this tab`;
  ui.status.textContent = persistent
    ? 'Ready. The kernel and its SQLite store run in this tab and are kept in IndexedDB: a reload keeps everything. Nothing is sent anywhere.'
    : `Ready. The kernel and its SQLite store run in this tab, in memory${idbAvailable() && !owner ? ' (another tab has the kept store)' : ''}: a reload starts over. Nothing is sent anywhere.`;
  document.body.dataset['persistent'] = String(persistent);
  document.body.dataset['ready'] = 'true';
  performance.mark('ctrlrun-ready');
}

boot().catch((err: unknown) => {
  ui.status.textContent = `The playground could not start in this browser: ${errorOf(err).message}. ${LOCAL_COMMAND}`;
  ui.status.classList.add('failed');
  document.body.dataset['ready'] = 'failed';
});
