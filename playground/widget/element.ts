/**
 * `<ctrlrun-try-it>`: the playground as a custom element any docs page can embed with one
 * `<script type="module">` and one tag. Shadow DOM, no global CSS. The real kernel
 * (`@ctrlrun/kernel/try-it`) runs over its own in-memory sql.js store per element, so two
 * elements on a page are two independent stores. The wasm is fetched only when the element comes
 * into view (IntersectionObserver) or is first used.
 *
 * Attributes: `policy` (inline YAML, or a URL to fetch it from; default: the module's policy),
 * `layout` (`compact` | `full`), `theme` (`auto` | `light` | `dark`; `auto` follows
 * `prefers-color-scheme`), `wasm` (where sql.js's wasm is; default: next to this module).
 *
 * The page's logic is shared with `playground/src` (guide, form reading, rendering, the session
 * calls, the machinery); this file is the element's DOM only.
 *
 * @module
 */
import type { RefundRequest } from '@ctrlrun/kernel/try-it';
import { entryElement, entryFor, h } from '../src/dom.js';
import { GUIDE, type GuideAction } from '../src/guide.js';
import { formatMinor, parseAmount } from '../src/input.js';
import type { LogItem } from '../src/kept.js';
import { errorOf } from '../src/render.js';
import type { Live } from './engine.js';
import { dedentAttribute, isPolicyUrl } from './policy-attribute.js';
import css from './style.css?inline';

/** The element's tag. */
export const TAG = 'ctrlrun-try-it';

/** The wasm's file name next to the built module. */
export const WASM_FILE = 'ctrlrun-sql.wasm';

/** The kernel side, loaded when an element starts (inlined in the one-file build, a chunk in the split one). */
type Engine = typeof import('./engine.js');
let engine: Promise<Engine> | null = null;
function loadEngine(): Promise<Engine> {
  engine ??= import('./engine.js').catch((err: unknown) => {
    engine = null;
    throw err;
  });
  return engine;
}

/** The flat list of the guide's actions, in order (the keyboard moves through it). */
const ACTIONS: readonly { step: number; action: GuideAction }[] = GUIDE.flatMap((s, i) => s.actions.map((action) => ({ step: i, action })));

let instances = 0;

/** `<ctrlrun-try-it>`. */
export class CtrlrunTryIt extends HTMLElement {
  static readonly observedAttributes = ['policy', 'layout', 'theme'];

  readonly #root: ShadowRoot;
  readonly #n = ++instances;
  #built = false;
  #live: Live | null = null;
  /** Set once the kernel side has loaded (before any step runs). */
  #engine: Engine | null = null;
  #booting: Promise<Live> | null = null;
  #observer: IntersectionObserver | null = null;
  #queue: Promise<void> = Promise.resolve();
  #current = 0;
  /** The guide action whose values are in the form (after it runs, the next one gets the focus). */
  #filled: string | null = null;
  #requestId: string | null = null;
  #approvalId: string | null = null;
  #ui!: {
    root: HTMLDivElement;
    status: HTMLParagraphElement;
    steps: HTMLOListElement;
    refund: HTMLFormElement;
    paymentId: HTMLInputElement;
    amount: HTMLInputElement;
    amountHint: HTMLSpanElement;
    loseReply: HTMLInputElement;
    approvalId: HTMLInputElement;
    run: HTMLButtonElement;
    /** The last outcome, beside Run, so it is in view with the form and the current step. */
    latest: HTMLParagraphElement;
    approveForm: HTMLFormElement;
    requestId: HTMLInputElement;
    approve: HTMLButtonElement;
    output: HTMLElement;
    entries: HTMLOListElement;
    chainVerdict: HTMLParagraphElement;
    chain: HTMLOListElement;
    chainSummary: HTMLElement;
    policy: HTMLPreElement;
    policyHash: HTMLElement;
    announce: HTMLParagraphElement;
  };

  constructor() {
    super();
    // Ids inside are per shadow root, so two elements on one page never collide.
    this.#root = this.attachShadow({ mode: 'open' });
  }

  connectedCallback(): void {
    if (!this.#built) this.#build();
    this.#ui.root.dataset['layout'] = this.getAttribute('layout') === 'full' ? 'full' : 'compact';
    if (!this.#live && !this.#booting) this.#watch();
  }

  disconnectedCallback(): void {
    this.#observer?.disconnect();
    this.#observer = null;
    // Removed for good (not just moved, which reconnects at once): free the store's wasm memory.
    // Put back later, the element starts over on a fresh store.
    queueMicrotask(() => {
      if (!this.isConnected) this.#serial(() => this.#close());
    });
  }

  attributeChangedCallback(name: string, old: string | null, value: string | null): void {
    if (!this.#built || old === value) return;
    if (name === 'layout') this.#ui.root.dataset['layout'] = value === 'full' ? 'full' : 'compact';
    // A new policy on a running element: a fresh store under it, said in the output.
    if (name === 'policy' && this.#live) this.#serial(() => this.#restart());
  }

  /** Starts the kernel now (the wasm is fetched if it was not). Resolves when the first step can run. */
  ready(): Promise<void> {
    return this.#boot().then(() => undefined);
  }

  // ---------------------------------------------------------------------------- loading

  /** The wasm is fetched when the element is about to be seen, or on first use, whichever is first. */
  #watch(): void {
    const start = (): void => void this.#boot().catch(() => undefined);
    for (const type of ['pointerdown', 'focusin', 'keydown']) this.addEventListener(type, start, { once: true, capture: true });
    if (typeof IntersectionObserver === 'undefined') return start();
    this.#observer = new IntersectionObserver(
      (seen) => {
        if (seen.some((e) => e.isIntersecting)) {
          this.#observer?.disconnect();
          this.#observer = null;
          start();
        }
      },
      { rootMargin: '200px' },
    );
    this.#observer.observe(this);
  }

  #wasmUrl(): string {
    const attr = this.getAttribute('wasm');
    return attr ? new URL(attr, document.baseURI).href : new URL(`./${WASM_FILE}`, import.meta.url).href;
  }

  async #policyText(defaultYaml: string): Promise<string> {
    const attr = this.getAttribute('policy');
    if (attr === null || attr.trim() === '') return defaultYaml;
    if (!isPolicyUrl(attr)) return dedentAttribute(attr);
    const url = new URL(attr.trim(), document.baseURI);
    const res = await fetch(url, { credentials: 'same-origin' });
    if (!res.ok) throw new Error(`the policy attribute names ${url.href}, which answered ${res.status} ${res.statusText}`.trim());
    return res.text();
  }

  #boot(): Promise<Live> {
    if (this.#live) return Promise.resolve(this.#live);
    if (!this.#booting) {
      this.#observer?.disconnect();
      this.#observer = null;
      this.dataset['state'] = 'loading';
      this.#ui.status.textContent = 'Starting the kernel in this tab…';
      this.#booting = (async () => {
        const eng = await loadEngine();
        this.#engine = eng;
        const [policyYaml] = await Promise.all([this.#policyText(eng.TRY_IT_POLICY_YAML), eng.sqlFor(this.#wasmUrl())]);
        const live = await eng.openLive(policyYaml, this.#wasmUrl());
        this.#live = live;
        this.#showPolicy();
        await this.#showChain();
        this.#ui.status.textContent = 'Ready: the kernel and its SQLite store run in this tab, in memory. Nothing is sent anywhere.';
        this.dataset['state'] = 'ready';
        this.dataset['readyAt'] = String(Math.round(performance.now()));
        performance.mark(`${TAG}-ready-${this.#n}`);
        this.dispatchEvent(new CustomEvent('ctrlrun-ready', { bubbles: true, composed: true }));
        return live;
      })().catch((err: unknown) => {
        this.#booting = null;
        const e = errorOf(err);
        this.dataset['state'] = 'failed';
        this.#ui.status.textContent = `The kernel could not start here: ${e.name === 'Error' ? '' : `${e.name}: `}${e.message}`;
        this.#ui.status.classList.add('failed');
        this.#say(`Could not start: ${e.message}`);
        throw err;
      });
    }
    return this.#booting;
  }

  async #restart(): Promise<void> {
    const old = this.#live;
    this.#live = null;
    this.#booting = null;
    await old?.store.close();
    this.#clear();
    await this.#boot();
    this.#log({ kind: 'note', text: `a new policy: a fresh store under ${this.#live!.tryIt.policyHash}` });
  }

  async #close(): Promise<void> {
    if (this.isConnected) return;
    const live = this.#live ?? (this.#booting ? await this.#booting.catch(() => null) : null);
    if (this.isConnected) return;
    this.#live = null;
    this.#booting = null;
    await live?.store.close();
    this.#clear();
    this.dataset['state'] = 'closed';
    this.#ui.status.textContent = 'Closed: this element was removed from the page. Put back, it starts over.';
  }

  /** Forgets the session's ids and output and goes back to step 1. */
  #clear(): void {
    this.#ui.entries.replaceChildren();
    this.#ui.chain.replaceChildren();
    this.#ui.chainVerdict.textContent = 'no receipts yet';
    this.#ui.chainVerdict.dataset['count'] = '0';
    this.#requestId = this.#approvalId = null;
    this.#filled = null;
    for (const input of [this.#ui.paymentId, this.#ui.amount, this.#ui.approvalId, this.#ui.requestId]) input.value = '';
    this.#ui.loseReply.checked = false;
    this.#ui.latest.textContent = '';
    this.#renderSteps();
  }

  // ---------------------------------------------------------------------------- building

  #build(): void {
    this.#built = true;
    const sheet = h('style', {}, css);
    const ui = {
      root: h('div', { class: 'root', 'data-layout': 'compact' }),
      status: h('p', { class: 'status', role: 'status' }, 'The kernel starts when this comes into view.'),
      steps: h('ol', { class: 'steps', 'aria-label': 'The six steps' }),
      refund: h('form', { class: 'refund', novalidate: '', 'aria-label': 'Refund' }),
      paymentId: h('input', { id: 'payment_id', name: 'payment_id', autocomplete: 'off', spellcheck: 'false', placeholder: 'txn_1' }),
      amount: h('input', {
        id: 'amount',
        name: 'amount',
        inputmode: 'numeric',
        autocomplete: 'off',
        spellcheck: 'false',
        placeholder: '50000',
        'aria-describedby': 'amount-hint',
      }),
      amountHint: h('span', { id: 'amount-hint', class: 'hint' }),
      loseReply: h('input', { id: 'lose_reply', name: 'lose_reply', type: 'checkbox', 'aria-describedby': 'lose-hint' }),
      approvalId: h('input', { id: 'approval_id', name: 'approval_id', autocomplete: 'off', spellcheck: 'false', placeholder: 'apr_…' }),
      run: h('button', { type: 'submit', class: 'primary run' }, 'Run'),
      latest: h('p', { class: 'latest' }),
      approveForm: h('form', { class: 'approve', novalidate: '', 'aria-label': 'Approve as the human' }),
      requestId: h('input', {
        id: 'request_id',
        name: 'request_id',
        autocomplete: 'off',
        spellcheck: 'false',
        placeholder: 'apr_…',
        'aria-describedby': 'approve-hint',
      }),
      approve: h('button', { type: 'submit', class: 'approve' }, 'Approve'),
      output: h('section', { class: 'output', 'aria-label': 'What happened', tabindex: '0' }),
      entries: h('ol', { class: 'entries' }),
      chainVerdict: h('p', { class: 'chain-verdict' }, 'no receipts yet'),
      chain: h('ol', { class: 'chain', 'aria-label': 'Receipts, oldest first' }),
      chainSummary: h('summary', {}, 'Receipt chain'),
      policy: h('pre', {}),
      policyHash: h('code', {}, '…'),
      announce: h('p', { class: 'sr-only', role: 'status', 'aria-live': 'polite', 'aria-atomic': 'true' }),
    };
    this.#ui = ui;

    ui.refund.append(
      h('div', { class: 'field' }, h('label', { for: 'payment_id' }, 'Payment id'), ui.paymentId),
      h('div', { class: 'field' }, h('label', { for: 'amount' }, 'Amount, in cents'), ui.amount, ui.amountHint),
      h(
        'div',
        { class: 'field check' },
        ui.loseReply,
        h('label', { for: 'lose_reply' }, 'Lose the reply'),
        h('span', { id: 'lose-hint', class: 'hint' }, 'the remote commits, then its answer never arrives'),
      ),
      h('div', { class: 'field' }, h('label', { for: 'approval_id' }, 'Approval to present (optional)'), ui.approvalId),
      h('div', { class: 'buttons' }, ui.run, ui.latest),
    );
    ui.approveForm.append(
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'request_id' }, 'Request awaiting a human'),
        ui.requestId,
        h('span', { id: 'approve-hint', class: 'hint' }, 'You are the human: nothing else here can grant.'),
      ),
      h('div', { class: 'buttons' }, ui.approve),
    );
    ui.output.append(ui.entries);
    ui.root.append(
      h(
        'header',
        {},
        h('h2', {}, 'Try it: break a protected action'),
        h(
          'p',
          { class: 'hint' },
          'You are an agent refunding payments through ',
          h('code', {}, 'stripe.refund'),
          '. Each step fills the form; press Run (or Approve).',
        ),
        ui.status,
      ),
      ui.steps,
      ui.refund,
      ui.approveForm,
      ui.output,
      h('details', { class: 'panel' }, ui.chainSummary, ui.chainVerdict, ui.chain),
      h('details', { class: 'panel policy' }, h('summary', {}, 'The policy'), h('p', { class: 'hint' }, 'policy hash ', ui.policyHash), ui.policy),
      ui.announce,
    );
    this.#root.append(sheet, ui.root);
    this.#renderSteps();
    this.#updateHint();

    ui.refund.addEventListener('submit', (event) => {
      event.preventDefault();
      this.#serial(() => this.#onRun());
    });
    // The only path to a grant: this form, submitted by the reader.
    ui.approveForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.#serial(() => this.#onApprove());
    });
    ui.amount.addEventListener('input', () => this.#updateHint());
    for (const input of [ui.paymentId, ui.amount, ui.approvalId]) input.addEventListener('input', () => (this.#filled = null));
    ui.loseReply.addEventListener('change', () => (this.#filled = null));
  }

  #renderSteps(): void {
    this.#ui.steps.replaceChildren(
      ...GUIDE.map((step, i) => {
        const body = h(
          'div',
          { class: 'step-body', id: `step-${step.n}-body` },
          h('p', {}, step.body),
          h(
            'p',
            { class: 'actions' },
            ...step.actions.map((a) => {
              const b = h('button', { type: 'button', class: 'fill', 'data-fill': a.id }, a.label);
              b.addEventListener('click', () => this.#fill(a));
              return b;
            }),
          ),
          h('p', { class: 'watch' }, h('strong', {}, 'Watch for: '), step.watch),
        );
        const head = h(
          'button',
          { type: 'button', class: 'step-head', 'aria-expanded': 'false', 'aria-controls': `step-${step.n}-body` },
          h('span', { class: 'n' }, `${step.n}.`),
          step.title,
          h('span', { class: 'done' }),
        );
        head.addEventListener('click', () => this.#setCurrent(i));
        return h('li', { class: 'step', 'data-step': String(step.n) }, h('h3', {}, head), body);
      }),
    );
    this.#setCurrent(0);
  }

  #stepItem(i: number): HTMLLIElement {
    return this.#ui.steps.children[i] as HTMLLIElement;
  }

  #setCurrent(i: number): void {
    this.#current = i;
    [...this.#ui.steps.children].forEach((li, k) => {
      const on = k === i;
      li.toggleAttribute('aria-current', on);
      if (on) li.setAttribute('aria-current', 'step');
      li.querySelector('.step-head')?.setAttribute('aria-expanded', String(on));
      (li.querySelector('.step-body') as HTMLElement).hidden = !on;
    });
  }

  #updateHint(): void {
    const parsed = parseAmount(this.#ui.amount.value);
    this.#ui.amountHint.textContent = parsed.ok ? `= ${formatMinor(parsed.amount)}` : 'whole cents, e.g. 50000 = €500.00';
  }

  #fill(action: GuideAction): void {
    const ui = this.#ui;
    void this.#boot().catch(() => undefined);
    const at = ACTIONS.find((x) => x.action.id === action.id);
    if (at) this.#setCurrent(at.step);
    for (const node of ui.steps.querySelectorAll('button.fill[aria-current]')) node.removeAttribute('aria-current');
    ui.steps.querySelector(`button.fill[data-fill="${action.id}"]`)?.setAttribute('aria-current', 'true');
    this.#filled = action.id;
    const f = action.fill;
    if (f.kind === 'approve') {
      if (this.#requestId) ui.requestId.value = this.#requestId;
      ui.approve.focus();
      return;
    }
    ui.paymentId.value = f.payment_id;
    ui.amount.value = String(f.amount);
    ui.loseReply.checked = f.lose_reply;
    ui.approvalId.value = f.present ? (this.#approvalId ?? this.#requestId ?? '') : '';
    this.#updateHint();
    this.#filled = action.id;
    ui.run.focus();
  }

  // ---------------------------------------------------------------------------- running

  #serial(fn: () => Promise<void>): void {
    this.#queue = this.#queue.then(async () => {
      this.#ui.output.setAttribute('aria-busy', 'true');
      try {
        await fn();
      } catch (err) {
        this.#log({ kind: 'refused', asked: 'the element', error: errorOf(err) });
      } finally {
        this.#ui.output.setAttribute('aria-busy', 'false');
      }
    });
  }

  async #onRun(): Promise<void> {
    const ui = this.#ui;
    const live = await this.#boot();
    const filled = this.#filled;
    const item = await this.#engine!.runRefundForm(live.tryIt, live.store, {
      payment_id: ui.paymentId.value,
      amount: ui.amount.value,
      lose_reply: ui.loseReply.checked,
      approval_id: ui.approvalId.value,
    });
    if (item.kind === 'refund' && item.result.outcome === 'approval_required' && item.result.request_id) {
      this.#requestId = item.result.request_id;
      ui.requestId.value = item.result.request_id;
    }
    this.#log(item);
    if (item.kind === 'refund') await this.#showChain();
    this.#advance(filled);
  }

  async #onApprove(): Promise<void> {
    const live = await this.#boot();
    const filled = this.#filled === '2b' ? '2b' : null;
    const item = await this.#engine!.approveRequest(live.tryIt, this.#ui.requestId.value);
    if (item.kind === 'approve') {
      this.#approvalId = item.result.approval_id;
      this.#ui.approvalId.value = item.result.approval_id;
    }
    this.#log(item);
    this.#advance(filled);
  }

  async #onResolve(effectKey: string, state: 'committed' | 'failed', group: HTMLElement): Promise<void> {
    const live = await this.#boot();
    const item = await this.#engine!.resolveAs(live.tryIt, effectKey, state);
    if (item.kind === 'resolve') {
      for (const b of this.#ui.entries.querySelectorAll<HTMLButtonElement>('.resolve button')) if (b.dataset['effect'] === effectKey) b.disabled = true;
    }
    this.#log(item);
    await this.#showChain();
    group.querySelector('button')?.blur();
  }

  /** After a guided action ran: the next guided action's button gets the focus, so Enter, Enter walks the six steps. */
  #advance(filled: string | null): void {
    if (filled === null) return;
    const i = ACTIONS.findIndex((x) => x.action.id === filled);
    const next = ACTIONS[i + 1];
    const head = this.#stepItem(ACTIONS[i]?.step ?? this.#current).querySelector('.done');
    if (head && ACTIONS[i + 1]?.step !== ACTIONS[i]?.step) head.textContent = 'done';
    if (next) {
      this.#setCurrent(next.step);
      this.#ui.steps.querySelector<HTMLButtonElement>(`button.fill[data-fill="${next.action.id}"]`)?.focus({ preventScroll: true });
    }
    this.#showCurrent();
  }

  /** Scrolls so the current step is in view, and the last outcome beside Run with it when both fit. */
  #showCurrent(): void {
    const li = this.#stepItem(this.#current);
    li.scrollIntoView({ block: 'nearest' });
    const top = li.getBoundingClientRect().top;
    const bottom = this.#ui.latest.getBoundingClientRect().bottom;
    if (bottom > window.innerHeight && bottom - top <= window.innerHeight) this.#ui.latest.scrollIntoView({ block: 'nearest' });
  }

  // ---------------------------------------------------------------------------- output

  /** Says the outcome to a screen reader (once per outcome, even when the text repeats). */
  #say(text: string): void {
    const region = this.#ui.announce;
    region.textContent = '';
    requestAnimationFrame(() => (region.textContent = text));
  }

  #log(item: LogItem): void {
    const li = entryElement(item);
    if (item.kind === 'refund') li.append(this.#machinery(item.request, item.result.receipt as Record<string, unknown> | undefined, item.result.outcome));
    if (item.kind === 'approve') li.append(this.#grantMachinery(item.result.action_hash));
    if (item.kind === 'refund' && (item.result.outcome === 'reply_lost' || item.result.outcome === 'ambiguous_retry')) {
      const key = String((item.result.receipt as Record<string, unknown> | undefined)?.['effect_key'] ?? `refund:${item.request.payment_id}`);
      li.append(this.#resolveControl(key));
    }
    this.#ui.entries.append(li);
    this.#ui.output.scrollTop = this.#ui.output.scrollHeight;
    const entry = entryFor(item);
    this.#ui.latest.textContent = entry.title;
    this.#ui.latest.className = `latest tone-${entry.tone}`;
    this.#ui.latest.dataset['outcome'] = li.dataset['outcome'] ?? '';
    const calls = item.kind === 'refund' ? ` Remote refund calls for ${item.request.payment_id}: ${item.result.remote_calls}.` : '';
    this.#say(`${entry.title}.${calls}`);
  }

  #copyable(label: string, text: string, cls: string): HTMLElement {
    const pre = h('pre', { class: cls }, text);
    const button = h('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${label}` }, 'Copy');
    button.addEventListener('click', () => {
      const done = (ok: boolean): void => {
        button.textContent = ok ? 'Copied' : 'Select and copy';
        if (!ok) getSelection()?.selectAllChildren(pre);
      };
      if (navigator.clipboard?.writeText)
        navigator.clipboard.writeText(text).then(
          () => done(true),
          () => done(false),
        );
      else done(false);
    });
    return h('div', {}, pre, button);
  }

  /** What is behind a refund step: the hashed text, the rule that decided, the TypeScript. */
  #machinery(req: RefundRequest, receipt: Record<string, unknown> | undefined, outcome: string): HTMLElement {
    const live = this.#live!;
    const { canonicalAction, decidingRule, evaluateRule, protectCall } = this.#engine!;
    const action = canonicalAction(req);
    const stated = typeof receipt?.['action_hash'] === 'string' ? receipt['action_hash'] : null;
    const rule =
      receipt && typeof receipt['decision_reason'] === 'string'
        ? decidingRule(live.policy, receipt['decision_reason'], String(receipt['decision']))
        : evaluateRule(live.policy, req);
    const check =
      stated === null
        ? h('p', { class: 'hint' }, 'no receipt yet: this is the hash the approval request is bound to')
        : stated === action.actionHash
          ? h('p', { class: 'check-ok' }, '✓ recomputed in this tab: the receipt’s action_hash is the SHA-256 of exactly this text')
          : h('p', { class: 'check-bad' }, `✗ the receipt says ${stated}`);
    const box = h(
      'div',
      { class: 'machinery', 'data-action-hash': action.actionHash, 'data-hash-matches': String(stated === action.actionHash), 'data-rule': rule.reason },
      h('h4', {}, 'Action hash'),
      h('p', {}, h('code', { class: 'action-hash' }, action.actionHash), ' is SHA-256 of this canonical JSON:'),
      this.#copyable('the canonical JSON', action.canonical, 'canonical'),
      check,
      h('h4', {}, 'The rule that decided'),
      h('p', { class: 'rule' }, h('code', {}, rule.text)),
      h('h4', {}, 'The same step in TypeScript'),
      this.#copyable('the TypeScript', protectCall(req), 'code'),
    );
    return h('details', { class: 'machinery-details', 'data-for': outcome }, h('summary', {}, 'Show the machinery: hash, rule, TypeScript'), box);
  }

  #grantMachinery(actionHash: string): HTMLElement {
    return h('p', { class: 'hint' }, 'The grant is bound to ', h('code', {}, actionHash), ': only an action whose canonical JSON hashes to it can use it.');
  }

  #resolveControl(effectKey: string): HTMLElement {
    const group = h(
      'div',
      { class: 'resolve', role: 'group', 'aria-label': `Resolve ${effectKey} as the operator` },
      h('span', {}, `You are the operator: did the provider make this refund?`),
    );
    for (const [state, label] of [
      ['committed', 'Resolve: committed (it happened)'],
      ['failed', 'Resolve: failed (it did not)'],
    ] as const) {
      const b = h('button', { type: 'button', 'data-resolve': state, 'data-effect': effectKey }, label);
      b.addEventListener('click', () => this.#serial(() => this.#onResolve(effectKey, state, group)));
      group.append(b);
    }
    return group;
  }

  #showPolicy(): void {
    if (!this.#live) return;
    this.#ui.policy.textContent = this.#live.tryIt.policyYaml;
    this.#ui.policyHash.textContent = this.#live.tryIt.policyHash;
  }

  /** The receipt chain as linked rows: each row's prev hash is the hash of the row above. */
  async #showChain(): Promise<void> {
    if (!this.#live) return;
    const { rows, report } = await this.#engine!.chainView(this.#live.store);
    const short = (v: string | null): string => (v === null ? '-' : v.length > 23 ? `${v.slice(0, 19)}…${v.slice(-4)}` : v);
    this.#ui.chain.replaceChildren(
      ...rows.map((row) => {
        const doc = row.document;
        const args = (doc['arguments'] ?? {}) as Record<string, unknown>;
        const what = `${String(args['payment_id'] ?? '-')} ${typeof args['amount'] === 'number' ? formatMinor(args['amount']) : ''} · ${String(doc['decision'] ?? '-')} · ${String(doc['result'] ?? '-')}`;
        return h(
          'li',
          { class: 'link', 'data-seq': String(row.seq ?? ''), 'data-prev': row.prevHash ?? '', 'data-hash': row.hash ?? '', 'data-linked': String(row.linked) },
          h('span', { class: 'seq' }, `#${row.seq ?? '?'}`),
          h('span', {}, what),
          h(
            'span',
            { class: 'hashes' },
            h('code', { title: row.prevHash ?? '' }, short(row.prevHash)),
            row.linked ? ' → ' : ' ✗ does not follow the row above → ',
            h('code', { title: row.hash ?? '' }, short(row.hash)),
          ),
        );
      }),
    );
    const total = report.chained + report.unchained;
    this.#ui.chainVerdict.dataset['ok'] = String(report.ok);
    this.#ui.chainVerdict.dataset['count'] = String(total);
    this.#ui.chainVerdict.textContent =
      total === 0
        ? 'no receipts yet'
        : report.ok
          ? `verifyChain: all ${report.verified} receipts verified, each prev hash is the hash above it`
          : `verifyChain: broken — ${report.breaks.map((b) => b.name).join(', ')}`;
    this.#ui.chainSummary.textContent = `Receipt chain (${total})`;
  }
}

if (!customElements.get(TAG)) customElements.define(TAG, CtrlrunTryIt);

declare global {
  interface HTMLElementTagNameMap {
    'ctrlrun-try-it': CtrlrunTryIt;
  }
}
