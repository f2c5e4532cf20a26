/**
 * The playground, built and served from 127.0.0.1, driven in headless Chromium: the six steps
 * of spec 04 §4 clicked in order, every outcome and remote-call count as the spec's table gives
 * them, the state surviving a reload (IndexedDB), bad input, the policy editor, the only way to
 * grant, no request leaving the app. Screenshots and measurements go to `test-artifacts/`.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTryIt, TRY_IT_OUTCOMES, TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { GUIDE } from '../../playground/src/guide.js';
import { expectStep, SPEC } from './six-steps.js';
import {
  ARTIFACTS,
  BROWSER_TEST_TIMEOUT,
  describeInChromium,
  launchChromium,
  PAGE_TIMEOUT,
  progressWatchdog,
  ROOT,
  serveStatic,
  SETUP_CEILING,
  SETUP_STALL_MS,
  type StaticServer,
} from './support.js';

/** One entry of the output box, as the page shows it. */
interface Shown {
  data: Record<string, string | undefined>;
  text: string;
}

let dist = '';
let server: StaticServer;
let browser: Browser;
const metrics: Record<string, unknown> = {};
const contexts: BrowserContext[] = [];
/** Outside requests any page tried (must stay empty). */
const outside: string[] = [];

/** A browser context of its own (its own IndexedDB), closed after the file. */
async function freshContext(viewport = { width: 1280, height: 900 }): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport });
  context.setDefaultTimeout(PAGE_TIMEOUT);
  contexts.push(context);
  return context;
}

/**
 * A context in which, once `__fail` is set, the save that carries both pages and the page's
 * record (a step's last) fails as a full disk would (`__failed` then set); the reservation's save
 * and the fake remote's own record still land — unless `alsoAlone`: then every save of the page's
 * record fails.
 */
async function failingStepSaves(alsoAlone = false): Promise<BrowserContext> {
  const context = await freshContext();
  await context.addInitScript((alone: boolean) => {
    const g = globalThis as unknown as { __fail?: boolean; __failed?: boolean };
    const paged = new WeakSet<IDBTransaction>();
    const put = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
      if (typeof key === 'number') paged.add(this.transaction);
      if (g.__fail && key === 'record:page' && (alone || paged.has(this.transaction))) {
        g.__failed = true;
        throw new DOMException('the disk is full', 'QuotaExceededError');
      }
      return put.call(this, value, key);
    };
  }, alsoAlone);
  return context;
}

async function freshPage(viewport = { width: 1280, height: 900 }): Promise<Page> {
  const context = await freshContext(viewport);
  const page = await context.newPage();
  page.on('request', (r) => {
    if (!r.url().startsWith(server.origin + '/')) outside.push(r.url());
  });
  page.on('pageerror', (e) => outside.push(`page error: ${e.message}`));
  await open(page);
  return page;
}

async function open(page: Page, reload = false): Promise<void> {
  if (reload) await page.reload();
  else await page.goto(server.url);
  await page.waitForSelector('body[data-ready]');
  expect(await page.getAttribute('body', 'data-ready'), await page.locator('#status').innerText()).toBe('true');
}

async function entries(page: Page): Promise<number> {
  return page.locator('#entries > li').count();
}

/** The newest entry, once there are more than `before`. */
async function newest(page: Page, before: number): Promise<Shown> {
  const li = page.locator('#entries > li').nth(before);
  await li.waitFor();
  return { data: await li.evaluate((node) => ({ ...(node as HTMLElement).dataset })), text: await li.innerText() };
}

async function formNow(page: Page) {
  return page.evaluate(() => ({
    payment_id: (document.getElementById('payment_id') as HTMLInputElement).value,
    amount: (document.getElementById('amount') as HTMLInputElement).value,
    lose_reply: (document.getElementById('lose_reply') as HTMLInputElement).checked,
    approval_id: (document.getElementById('approval_id') as HTMLInputElement).value,
  }));
}

/** Clicks a guide button, then Run (or Approve), and returns what the output box shows for it. */
async function act(page: Page, id: string): Promise<Shown> {
  const before = await entries(page);
  await page.click(`#fill-${id}`);
  await page.click(id === '2b' ? '#approve' : '#run');
  return newest(page, before);
}

/** Fills the form by hand and runs it. */
async function runWith(page: Page, values: { payment_id: string; amount: string; lose_reply?: boolean; approval_id?: string }): Promise<Shown> {
  await page.fill('#payment_id', values.payment_id);
  await page.fill('#amount', values.amount);
  await page.setChecked('#lose_reply', values.lose_reply ?? false);
  await page.fill('#approval_id', values.approval_id ?? '');
  const before = await entries(page);
  await page.click('#run');
  return newest(page, before);
}

async function receiptCount(page: Page): Promise<number> {
  return Number((await page.getAttribute('#chain', 'data-count')) ?? '0');
}

function gz(file: string): { bytes: number; gzip: number } {
  const data = readFileSync(file);
  return { bytes: data.length, gzip: gzipSync(data, { level: 9 }).length };
}

describeInChromium('playground in Chromium', () => {
  beforeAll(async () => {
    const began = performance.now();
    dist = mkdtempSync(join(tmpdir(), 'ctrlrun-playground-'));
    await progressWatchdog('building the playground with vite', SETUP_STALL_MS, (progress) =>
      build({
        configFile: join(ROOT, 'playground', 'vite.config.ts'),
        logLevel: 'warn',
        build: { outDir: dist, emptyOutDir: true },
        // Every module transformed and every chunk rendered is progress: a slow build keeps going.
        plugins: [
          {
            name: 'ctrlrun-test-progress',
            transform: (_code: string, id: string) => void progress(`transformed ${id}`),
            renderChunk: (_code: string, chunk: { fileName: string }) => void progress(`rendered ${chunk.fileName}`),
          },
        ],
      }),
    );
    // Served below a path, not at the root: the relative base works from any static host.
    server = await serveStatic(dist, '/try/');
    const built = performance.now();
    browser = await progressWatchdog('launching Chromium', SETUP_STALL_MS, () => launchChromium());
    // How long setup took, so a slow run says where its time went (a hook that times out reports every test of the file as skipped).
    metrics['setup_ms'] = { build: Math.round(built - began), launch: Math.round(performance.now() - built) };
    const assets = readdirSync(join(dist, 'assets'));
    const sum = (ext: string) =>
      assets
        .filter((f) => f.endsWith(ext))
        .reduce(
          (a, f) => {
            const s = gz(join(dist, 'assets', f));
            return { bytes: a.bytes + s.bytes, gzip: a.gzip + s.gzip };
          },
          { bytes: 0, gzip: 0 },
        );
    metrics['size'] = { js: sum('.js'), wasm: sum('.wasm'), css: sum('.css'), html: gz(join(dist, 'index.html')) };
  }, SETUP_CEILING);

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await server?.close();
    if (dist) rmSync(dist, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    metrics['chromium'] = browser?.version();
    writeFileSync(join(ARTIFACTS, 'playground-metrics.json'), `${JSON.stringify(metrics, null, 2)}\n`);
    console.log(`playground metrics: ${JSON.stringify(metrics)}`);
  }, BROWSER_TEST_TIMEOUT);

  it('test_the_playground_runs_the_sequence_the_page_tells_the_reader_to_try', async () => {
    // The guide is the spec's sequence, in order.
    expect(GUIDE.flatMap((s) => s.actions.map((a) => a.id))).toEqual(SPEC.map(([id]) => id));
    const wasmBefore = server.requested.filter((p) => p.endsWith('.wasm')).length;
    const page = await freshPage();
    metrics['readyMs'] = await page.evaluate(() => performance.getEntriesByName('ctrlrun-ready')[0]?.startTime ?? null);

    let requestId = '';
    const seen: Record<string, Shown> = {};
    for (const [id, want] of SPEC) {
      if (want.form) {
        await page.click(`#fill-${id}`);
        const f = await formNow(page);
        expect({ payment_id: f.payment_id, amount: f.amount, lose_reply: f.lose_reply, presents: f.approval_id !== '' }, `step ${id}: the form`).toEqual(
          want.form,
        );
        if (want.form.presents) expect(f.approval_id, `step ${id}: presents the approval granted in step 2`).toBe(requestId);
      }
      const shown = await act(page, id);
      seen[id] = shown;
      const d = shown.data;
      expectStep(id, want, shown);
      if (id === '2a') {
        requestId = d['requestId'] ?? '';
        expect(requestId).toMatch(/^apr_[0-9a-f]{32}$/);
        expect(await page.inputValue('#request_id')).toBe(requestId);
      }
      if (id === '2b') {
        expect(d['approvalId'], 'the grant is the same id').toBe(requestId);
        expect(d['actionHash']).toMatch(/^sha256:[0-9a-f]{64}$/);
      }
      if (id === '2d') expect(d['approvalId'], 'the receipt carries the approval').toBe(requestId);
      if (id === '4') expect(d['requestId'], 'a denial asks nobody').toBeUndefined();
    }
    expect(await page.getAttribute('#chain', 'data-ok')).toBe('true');
    const receipts = await receiptCount(page);
    expect(receipts).toBeGreaterThan(0);
    expect(await page.locator('#receipts-body tr').count()).toBe(receipts);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'playground.png'), fullPage: true });

    // A reload keeps everything: the output, the receipts, the approvals, the remote's counts.
    const shownBefore = await entries(page);
    await open(page, true);
    expect(await entries(page)).toBe(shownBefore);
    expect(await receiptCount(page)).toBe(receipts);
    expect(await page.getAttribute('#chain', 'data-ok')).toBe('true');
    const again = await act(page, '6');
    expect([again.data['outcome'], again.data['remoteCalls']]).toEqual(['duplicate', '1']);
    const replay = await act(page, '3');
    expect([replay.data['outcome'], replay.data['reason'], replay.data['remoteCalls']]).toEqual(['approval_mismatch', 'consumed', '1']);
    const ambiguous = await act(page, '5b');
    expect([ambiguous.data['outcome'], ambiguous.data['remoteCalls']]).toEqual(['ambiguous_retry', '1']);
    expect(outside, 'requests outside the app').toEqual([]);
    expect(server.requested.filter((p) => p.endsWith('.wasm')).length - wasmBefore, 'the wasm, fetched once per load (preload and sql.js agree)').toBe(2);

    // Reset forgets it all.
    await page.click('#reset');
    await page.waitForFunction(() => document.getElementById('chain')?.dataset['count'] === '0');
    const fresh = await act(page, '1');
    expect([fresh.data['outcome'], fresh.data['remoteCalls']]).toEqual(['executed', '1']);
  });

  it('test_the_page_names_every_outcome_the_module_can_return', async () => {
    // Each outcome the module can return, produced by the real module in the tab, named on the page.
    const page = await freshPage();
    const names: Record<string, string[]> = {
      executed: ['EXECUTED'],
      approval_required: ['ApprovalRequired'],
      approval_mismatch: ['ApprovalMismatch'],
      denied: ['ActionDenied'],
      duplicate: ['DuplicateEffect'],
      ambiguous_retry: ['AmbiguousEffect', 'AMBIGUOUS'],
      reply_lost: ['AMBIGUOUS'],
    };
    const seen = new Set<string>();
    for (const [id] of SPEC) {
      const shown = await act(page, id);
      const outcome = shown.data['outcome']!;
      if (outcome === 'approved') continue;
      seen.add(outcome);
      for (const name of names[outcome] ?? [`(no name for ${outcome})`]) expect(shown.text, `${outcome} names ${name}`).toContain(name);
      expect(shown.text, `${outcome} shows the remote call count`).toMatch(/remote refund calls for \S+: \d+/);
      if (shown.data['result']) expect(shown.text, `${outcome} shows the receipt`).toMatch(/receipt ctr_[0-9a-f]{32}/);
    }
    // A negative amount in a fresh session: denied, never sent.
    await page.click('#reset');
    await page.waitForFunction(() => document.getElementById('chain')?.dataset['count'] === '0');
    const negative = await runWith(page, { payment_id: 'txn_1', amount: '-500' });
    expect([negative.data['outcome'], negative.data['remoteCalls']]).toEqual(['denied', '0']);
    expect([...seen].sort()).toEqual([...TRY_IT_OUTCOMES].sort());
  });

  it('test_the_playground_has_no_way_to_grant_but_the_human_button', async () => {
    const page = await freshPage();
    const asked = await act(page, '2a');
    const requestId = asked.data['requestId']!;
    // Every other control on the page, pressed; then the request is presented: still not granted.
    const others = await page.$$eval('button', (bs) => bs.map((b) => b.id).filter((id) => id && !['approve', 'run', 'reset'].includes(id)));
    expect(others.length).toBeGreaterThan(GUIDE.length);
    for (const id of others) {
      await page.click(`#${id}`);
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(r)));
    }
    await page.waitForFunction(() => !document.getElementById('demo-output')?.textContent?.includes('running'));
    const presented = await runWith(page, { payment_id: 'txn_2', amount: '200000', approval_id: requestId });
    expect([presented.data['outcome'], presented.data['reason'], presented.data['remoteCalls']]).toEqual(['approval_mismatch', 'pending', '0']);
    // The demo ran on its own store: its scripted approver granted nothing here.
    expect(await page.locator('#demo-output').innerText()).toContain('Approval mutation');
    // The button, pressed by the reader, grants; then the same presentation executes.
    await page.fill('#request_id', requestId);
    const before = await entries(page);
    await page.click('#approve');
    expect((await newest(page, before)).data['outcome']).toBe('approved');
    const executed = await runWith(page, { payment_id: 'txn_2', amount: '200000', approval_id: requestId });
    expect([executed.data['outcome'], executed.data['remoteCalls']]).toEqual(['executed', '1']);
  });

  it('test_the_playground_policy_on_the_page_is_the_policy_in_the_module', async () => {
    const page = await freshPage();
    const moduleHash = createTryIt({ store: await createSqlJsStore() }).policyHash;
    expect(await page.inputValue('#policy')).toBe(TRY_IT_POLICY_YAML);
    expect(await page.locator('#policy-hash').innerText()).toBe(moduleHash);

    // An edit that doesn't load: the message inline and in the output, the old policy in force.
    const before = await receiptCount(page);
    await page.fill('#policy', TRY_IT_POLICY_YAML.replace('decision: allow', 'decision: perhaps'));
    await page.click('#load-policy');
    await expect.poll(() => page.locator('#policy-error').isVisible(), { timeout: PAGE_TIMEOUT }).toBe(true);
    expect(await page.locator('#policy-error').innerText()).toMatch(/PolicyError: .*perhaps/);
    expect(await page.locator('#entries > li').last().innerText()).toContain('PolicyError');
    expect(await page.locator('#policy-hash').innerText()).toBe(moduleHash);
    expect(await receiptCount(page)).toBe(before);
    const still = await runWith(page, { payment_id: 'txn_p1', amount: '50000' });
    expect(still.data['outcome'], 'the previous policy stays in force').toBe('executed');

    // An edit that loads: €100 without a human. The hash shown is that text's hash.
    const edited = TRY_IT_POLICY_YAML.replace('amount_lte: 100000 }', 'amount_lte: 10000 }');
    expect(edited).not.toBe(TRY_IT_POLICY_YAML);
    const editedHash = createTryIt({ store: await createSqlJsStore(), policyYaml: edited }).policyHash;
    await page.fill('#policy', edited);
    await page.click('#load-policy');
    await expect.poll(() => page.locator('#policy-hash').innerText(), { timeout: PAGE_TIMEOUT }).toBe(editedHash);
    expect(await page.locator('#policy-error').isVisible()).toBe(false);
    const stricter = await runWith(page, { payment_id: 'txn_p2', amount: '50000' });
    expect(stricter.data['outcome']).toBe('approval_required');

    // It survives a reload; Restore brings back the module's text and hash.
    await open(page, true);
    expect(await page.inputValue('#policy')).toBe(edited);
    expect(await page.locator('#policy-hash').innerText()).toBe(editedHash);
    await page.click('#restore-policy');
    await expect.poll(() => page.locator('#policy-hash').innerText(), { timeout: PAGE_TIMEOUT }).toBe(moduleHash);
    expect(await page.inputValue('#policy')).toBe(TRY_IT_POLICY_YAML);
  });

  it('refuses bad input with a clear message, writes nothing, and keeps working', async () => {
    const page = await freshPage();
    await act(page, '1');
    const receipts = await receiptCount(page);
    const bad: [Parameters<typeof runWith>[1], RegExp][] = [
      [{ payment_id: 'txn_b', amount: '12.5' }, /whole number of cents/],
      [{ payment_id: 'txn_b', amount: '' }, /whole number of cents/],
      [{ payment_id: 'txn_b', amount: '1e3' }, /whole number of cents/],
      [{ payment_id: 'txn_b', amount: '99999999999999999999' }, /too large/],
      [{ payment_id: 'txn_b', amount: '9999999999999' }, /InvalidArgument: amount must be between/],
      [{ payment_id: 'txn_b', amount: '-9999999999999' }, /InvalidArgument: amount must be between/],
      [{ payment_id: '', amount: '500' }, /payment_id must be a non-empty string/],
      [{ payment_id: '   ', amount: '500' }, /payment_id must be a non-empty string/],
      [{ payment_id: 'txn_b', amount: '500', approval_id: 'apr_00000000000000000000000000000000' }, /no approval apr_0{32} in this tab/],
      [{ payment_id: 'txn_b', amount: '500', approval_id: 'yes please' }, /apr_ and 32 hex digits/],
    ];
    for (const [values, message] of bad) {
      const shown = await runWith(page, values);
      expect(shown.data['outcome'], JSON.stringify(values)).toBe('refused');
      expect(shown.text).toMatch(message);
      expect(shown.text).toContain('nothing was written');
    }
    // An approval that doesn't exist, pressed through Approve.
    for (const id of ['apr_00000000000000000000000000000000', 'not-an-id', '']) {
      await page.fill('#request_id', id);
      const before = await entries(page);
      await page.click('#approve');
      const shown = await newest(page, before);
      expect(shown.data['outcome'], id).toBe('refused');
      expect(shown.text).toMatch(id === '' ? /no request awaiting a human/ : /ApprovalMismatch: .*unknown/);
    }
    expect(await receiptCount(page)).toBe(receipts);
    expect(await page.getAttribute('#chain', 'data-ok')).toBe('true');
    // Still working, and the remote untouched by any of it.
    const ok = await runWith(page, { payment_id: 'txn_b', amount: '500' });
    expect([ok.data['outcome'], ok.data['remoteCalls']]).toEqual(['executed', '1']);
  });

  it('is labelled, announces its output, runs from the keyboard, and fits a narrow screen', async () => {
    const page = await freshPage({ width: 390, height: 844 });
    const unlabelled = await page.$$eval('input, textarea', (xs) => xs.filter((x) => !(x as HTMLInputElement).labels?.length).map((x) => x.id));
    expect(unlabelled).toEqual([]);
    expect(await page.getAttribute('#output', 'role')).toBe('log');
    expect(await page.getAttribute('#output', 'aria-live')).toBe('polite');
    // Keyboard: a guide button moves focus to Run; Enter runs it.
    await page.focus('#fill-1');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('run');
    const before = await entries(page);
    await page.keyboard.press('Enter');
    expect((await newest(page, before)).data['outcome']).toBe('executed');
    await page.focus('#fill-2a');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Enter');
    await newest(page, before + 1);
    await page.focus('#fill-2b');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('approve');
    await page.keyboard.press('Enter');
    expect((await newest(page, before + 2)).data['outcome']).toBe('approved');
    // Narrow: nothing wider than the screen but the scrolling boxes themselves.
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'playground-narrow.png'), fullPage: true });
  });

  it("a second tab runs in memory and says so, and writes nothing to the first tab's store", async () => {
    const first = await freshPage();
    expect(await first.getAttribute('body', 'data-persistent')).toBe('true');
    await act(first, '1');
    const second = await first.context().newPage();
    await open(second);
    expect(await second.getAttribute('body', 'data-persistent')).toBe('false');
    expect(await second.locator('#status').innerText()).toContain('another tab');
    const there = await act(second, '1');
    expect([there.data['outcome'], there.data['remoteCalls']], 'its own store, its own remote').toEqual(['executed', '1']);
    await act(second, '4');
    await second.close();
    await open(first, true);
    expect(await receiptCount(first)).toBe(1);
  });

  it('a step is kept before the page is idle again: the store holds its receipt and the page its entry, and a reload right after shows both', async () => {
    const page = await freshPage();
    for (const id of ['1', '2a', '2b', '4']) {
      await page.click(`#fill-${id}`);
      // Clicked in the tab; the moment the page is idle again, what IndexedDB holds is read, before anything else can run.
      const kept = await page.evaluate(
        async (button) => {
          const list = document.getElementById('entries')!;
          const output = document.getElementById('output')!;
          const n = list.children.length + 1;
          await new Promise<void>((done) => {
            const check = () => list.children.length >= n && output.getAttribute('aria-busy') === 'false';
            const watch = new MutationObserver(() => check() && (watch.disconnect(), done()));
            watch.observe(list, { childList: true });
            watch.observe(output, { attributes: true, attributeFilter: ['aria-busy'] });
            document.getElementById(button)!.click();
          });
          const read = (name: string, store: string) =>
            new Promise<Map<IDBValidKey, unknown>>((ok, fail) => {
              const r = indexedDB.open(name);
              r.onerror = () => fail(r.error);
              r.onsuccess = () => {
                const os = r.result.transaction(store, 'readonly').objectStore(store);
                const keys = os.getAllKeys();
                const values = os.getAll();
                values.onsuccess = () => {
                  r.result.close();
                  ok(new Map(keys.result.map((k, i) => [k, values.result[i]])));
                };
              };
            });
          const pages = await read('ctrlrun-playground', 'sqljs');
          const text = [...pages]
            .filter(([k]) => typeof k === 'number')
            .sort((a, b) => (a[0] as number) - (b[0] as number))
            .map(([, v]) => new TextDecoder('latin1').decode(v as Uint8Array))
            .join('');
          // The page's record lives beside the pages, written in the same transaction as the step's last save.
          const record = pages.get('record:page') as {
            log: { kind: string; result?: { receipt?: { receipt_id?: string }; request_id?: string } }[];
          };
          const entry = list.children[n - 1] as HTMLElement;
          const receipt = /receipt (ctr_[0-9a-f]{32})/.exec(entry.innerText)?.[1] ?? null;
          const last = record.log.at(-1);
          return {
            outcome: entry.dataset['outcome'],
            receipt,
            requestId: entry.dataset['requestId'] ?? null,
            storeHasReceipt: receipt !== null && text.includes(receipt),
            storeHasRequest: entry.dataset['requestId'] !== undefined && text.includes(entry.dataset['requestId']),
            // The grant names its approver; nothing before it does.
            storeHasGrant: text.includes('human:playground'),
            logged: record.log.length,
            lastOutcome: last?.kind,
            lastReceipt: last?.result?.receipt?.receipt_id ?? null,
            lastRequest: last?.result?.request_id ?? null,
          };
        },
        id === '2b' ? 'approve' : 'run',
      );
      if (id === '2a') {
        // No receipt yet: the request for approval is what must be kept.
        expect([kept.outcome, kept.storeHasRequest, kept.lastRequest, kept.storeHasGrant], `step ${id}`).toEqual([
          'approval_required',
          true,
          kept.requestId,
          false,
        ]);
      } else if (id === '2b') {
        // No receipt either, and no redraw of the receipts that would read (and so save) the store: the grant itself must be kept.
        expect([kept.outcome, kept.storeHasGrant, kept.lastOutcome], `step ${id}`).toEqual(['approved', true, 'approve']);
      } else {
        expect(kept.receipt, `step ${id} shows a receipt`).toMatch(/^ctr_/);
        expect([kept.storeHasReceipt, kept.lastReceipt], `step ${id}: kept in the store and in the page's record`).toEqual([true, kept.receipt]);
      }
      const shown = await entries(page);
      const receipts = await receiptCount(page);
      await open(page, true);
      expect([await entries(page), await receiptCount(page)], `step ${id}: a reload right after`).toEqual([shown, receipts]);
      if (kept.receipt) expect(await page.locator('#receipts-body').innerText()).toContain(kept.receipt);
    }
    // The output box shows its newest entry once a frame has been drawn (the scroll waits for the frame).
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const box = await page.$eval('#output', (o) => ({ top: o.scrollTop, client: o.clientHeight, height: o.scrollHeight }));
    expect(box.height, 'the entries overflow the box').toBeGreaterThan(box.client);
    expect(box.top + box.client).toBeGreaterThanOrEqual(box.height - 1);
  });

  it('a step without a remote call is one IndexedDB transaction, its entry included', async () => {
    const context = await freshContext();
    // Every readwrite transaction the page begins, as the keys it puts (numbers are the store's pages).
    await context.addInitScript(() => {
      const g = globalThis as unknown as { __tx: IDBValidKey[][] };
      g.__tx = [];
      const transaction = IDBDatabase.prototype.transaction;
      const keys = new WeakMap<IDBTransaction, IDBValidKey[]>();
      IDBDatabase.prototype.transaction = function (this: IDBDatabase, ...args: Parameters<IDBDatabase['transaction']>) {
        const tx = transaction.apply(this, args);
        if (args[1] === 'readwrite') {
          const list: IDBValidKey[] = [];
          g.__tx.push(list);
          keys.set(tx, list);
        }
        return tx;
      } as IDBDatabase['transaction'];
      const put = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
        keys.get(this.transaction)?.push(typeof key === 'number' ? 'page' : key!);
        return put.call(this, value, key);
      };
    });
    const page = await context.newPage();
    await open(page);
    const kept = () =>
      page.evaluate(
        () =>
          new Promise<{ keys: IDBValidKey[]; text: string }>((ok, fail) => {
            const r = indexedDB.open('ctrlrun-playground');
            r.onerror = () => fail(r.error);
            r.onsuccess = () => {
              const os = r.result.transaction('sqljs', 'readonly').objectStore('sqljs');
              const keys = os.getAllKeys();
              const values = os.getAll();
              values.onsuccess = () => {
                r.result.close();
                const pages = keys.result.map((k, i) => [k, values.result[i]] as const).filter(([k]) => typeof k === 'number');
                ok({ keys: keys.result, text: pages.map(([, v]) => new TextDecoder('latin1').decode(v as Uint8Array)).join('') });
              };
            };
          }),
      );
    const opened = await kept();
    expect([await entries(page), await receiptCount(page)]).toEqual([0, 0]);
    expect(opened.keys, 'nothing of the page is kept before its first step').not.toContain('record:page');
    const before = await page.evaluate(() => (globalThis as unknown as { __tx: unknown[] }).__tx.length);
    // Step 2a: a refund that asks for approval calls no remote; its commit and its entry are kept together.
    const shown = await act(page, '2a');
    expect(shown.data['outcome']).toBe('approval_required');
    await page.waitForSelector('#output[aria-busy="false"]');
    const during = await page.evaluate((n) => (globalThis as unknown as { __tx: IDBValidKey[][] }).__tx.slice(n), before);
    expect(during).toHaveLength(1);
    expect(during[0]).toContain('page');
    expect(during[0]).toContain('record:page');
    expect((await kept()).text).toContain(shown.data['requestId']!);
  });

  it('a step whose last save fails is undone: its entry and receipt are no longer shown, and no later save keeps them', async () => {
    const context = await failingStepSaves();
    const page = await context.newPage();
    await open(page);
    await page.click('#fill-1');
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = true));
    await page.click('#run');
    await page.waitForFunction(() => (globalThis as { __failed?: boolean }).__failed === true);
    await page.waitForFunction(() => /could not be saved/.test(document.getElementById('entries')!.textContent ?? ''));
    await page.waitForSelector('#output[aria-busy="false"]');
    // The store went back to its last saved state: the reservation, no outcome, no receipt; the
    // page shows no entry for the step, only why it was undone.
    expect([await receiptCount(page), await page.locator('#receipts-body tr').count()], 'the receipts shown are the ones stored').toEqual([0, 0]);
    expect(await page.locator('#entries > li').count(), 'the undone step has no entry').toBe(1);
    expect(await page.locator('#entries > li[data-outcome="executed"]').count()).toBe(0);
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = false));
    // The note about it was kept (a save of the page's record alone): the undone entry was not kept with it.
    await open(page, true);
    expect(await receiptCount(page), 'after a reload too').toBe(0);
    expect(await page.locator('#entries').innerText()).toMatch(/could not be saved/);
    expect(await page.locator('#entries > li[data-outcome="executed"]').count(), 'after a reload too').toBe(0);
  });

  it('a grant whose save fails is undone: no approved entry, no approval id filled in, and the request still pending', async () => {
    const context = await failingStepSaves();
    const page = await context.newPage();
    await open(page);
    const asked = await act(page, '2a');
    expect(asked.data['outcome']).toBe('approval_required');
    await page.waitForSelector('#output[aria-busy="false"]');
    await page.click('#fill-2b');
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = true));
    await page.click('#approve');
    await page.waitForFunction(() => /could not be saved/.test(document.getElementById('entries')!.textContent ?? ''));
    await page.waitForSelector('#output[aria-busy="false"]');
    expect(await page.locator('#entries > li[data-outcome="approved"]').count(), 'the undone grant has no entry').toBe(0);
    expect(await page.inputValue('#approval_id'), 'no approval id from a grant that was undone').toBe('');
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = false));
    // The request is still pending: approving it again is granted.
    await page.click('#approve');
    await page.waitForFunction(() => document.querySelectorAll('#entries > li[data-outcome="approved"]').length === 1);
    await page.waitForSelector('#output[aria-busy="false"]');
    expect(await page.inputValue('#approval_id')).toMatch(/^apr_/);
  });

  it('a policy the page could not keep is not put in force: the previous one stays, before and after a reload', async () => {
    const context = await failingStepSaves(true);
    const page = await context.newPage();
    await open(page);
    const moduleHash = await page.locator('#policy-hash').innerText();
    const edited = TRY_IT_POLICY_YAML.replace('amount_lte: 100000 }', 'amount_lte: 10000 }');
    await page.fill('#policy', edited);
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = true));
    await page.click('#load-policy');
    await page.waitForFunction(() => (globalThis as { __failed?: boolean }).__failed === true);
    await expect.poll(() => page.locator('#policy-error').isVisible(), { timeout: PAGE_TIMEOUT }).toBe(true);
    await page.waitForSelector('#output[aria-busy="false"]');
    expect(await page.locator('#policy-error').innerText()).toMatch(/could not be kept; the previous policy stays in force/);
    expect(await page.locator('#policy-hash').innerText()).toBe(moduleHash);
    expect(await page.locator('#entries').innerText(), 'no "policy loaded" entry').not.toMatch(/policy loaded/);
    await page.evaluate(() => void ((globalThis as { __fail?: boolean }).__fail = false));
    // In force: the module's policy (€500 without a human), not the edit (€100).
    const still = await runWith(page, { payment_id: 'txn_k1', amount: '50000' });
    expect(still.data['outcome']).toBe('executed');
    await open(page, true);
    expect(await page.locator('#policy-hash').innerText(), 'after a reload too').toBe(moduleHash);
  });

  it('a tab that dies while the remote runs leaves the reservation kept: after a reload the same refund finds its key taken', async () => {
    const context = await freshContext();
    // Once armed, the page's own record (kept beside the store's pages) is never written and its
    // transaction never reports back: the fake remote records its call there, so the step stops
    // inside the executor, after the reservation and before any outcome.
    await context.addInitScript(() => {
      const g = globalThis as unknown as { __hang?: boolean; __hung?: boolean };
      const hung = new WeakSet<IDBTransaction>();
      const put = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
        if (g.__hang && key === 'record:page') {
          g.__hung = true;
          hung.add(this.transaction);
          return {} as IDBRequest<IDBValidKey>;
        }
        return put.call(this, value, key);
      };
      const transaction = IDBDatabase.prototype.transaction;
      IDBDatabase.prototype.transaction = function (this: IDBDatabase, ...args: Parameters<IDBDatabase['transaction']>) {
        const tx = transaction.apply(this, args);
        let onComplete: ((this: IDBTransaction, e: Event) => unknown) | null = null;
        Object.defineProperty(tx, 'oncomplete', { get: () => onComplete, set: (f: typeof onComplete) => void (onComplete = f) });
        tx.addEventListener('complete', (e) => void (hung.has(tx) || onComplete?.call(tx, e)));
        return tx;
      } as IDBDatabase['transaction'];
    });
    const page = await context.newPage();
    await open(page);
    await page.click('#fill-1');
    await page.evaluate(() => void ((globalThis as { __hang?: boolean }).__hang = true));
    await page.click('#run');
    await page.waitForFunction(() => (globalThis as { __hung?: boolean }).__hung === true);
    expect(await entries(page), 'the step has not finished').toBe(0);
    // Killed, not closed: the renderer dies with the step in flight.
    const cdp = await context.newCDPSession(page);
    const crashed = page.waitForEvent('crash');
    // The renderer dies before it can answer, so the command is not awaited.
    void cdp.send('Page.crash').catch(() => undefined);
    await crashed;
    await page.close().catch(() => undefined);
    const after = await context.newPage();
    await open(after);
    expect(await after.getAttribute('body', 'data-persistent'), 'the new tab owns the kept store').toBe('true');
    expect(await receiptCount(after), 'no outcome was recorded').toBe(0);
    const retry = await act(after, '1');
    expect([retry.data['outcome'], retry.data['remoteCalls']], retry.text).toEqual(['duplicate', '0']);
  });

  it('measures the six steps inside the tab', async () => {
    // Clicked from inside the page, so the time is the page's own (kernel, store, IndexedDB, DOM), not the driver's.
    const page = await freshPage();
    const plan = SPEC.map(([id]) => [id, id === '2b' ? 'approve' : 'run'] as const);
    const ms = await page.evaluate(async (steps) => {
      const list = document.getElementById('entries')!;
      const grown = (n: number) =>
        new Promise<void>((done) => {
          if (list.children.length >= n) return done();
          const watch = new MutationObserver(() => {
            if (list.children.length >= n) {
              watch.disconnect();
              done();
            }
          });
          watch.observe(list, { childList: true });
        });
      const t0 = performance.now();
      for (const [id, button] of steps) {
        const n = list.children.length + 1;
        document.getElementById(`fill-${id}`)!.click();
        document.getElementById(button)!.click();
        await grown(n);
      }
      return performance.now() - t0;
    }, plan);
    const outcomes = await page.$$eval('#entries > li', (lis) => lis.map((li) => (li as HTMLElement).dataset['outcome']));
    expect(outcomes).toEqual(SPEC.map(([, want]) => want.outcome));
    metrics['sixStepsInPageMs'] = Math.round(ms * 10) / 10;
  });
});
