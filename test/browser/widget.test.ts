/**
 * `<ctrlrun-try-it>`, built (one ES module plus the wasm) and embedded in a plain page served
 * from 127.0.0.1, driven in headless Chromium: the wasm is fetched only once the element is in
 * view; the six steps at 720×600 with the current step in view and nothing overflowing sideways;
 * the machinery (canonical JSON behind the hash, the deciding rule, the chain as linked rows, the
 * TypeScript); the operator's Resolve; axe-core; keyboard only; announcements; two independent
 * elements. Screenshots and timings go to `test-artifacts/` (timings are reported, never asserted).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GUIDE } from '../../playground/src/guide.js';
import { buildWidget } from '../../playground/widget/build.js';
import { expectStep, RULE, SPEC } from './six-steps.js';
import { ARTIFACTS, BROWSER_TEST_TIMEOUT, describeInChromium, ROOT } from './support.js';
import {
  act,
  currentStepInView,
  formOf,
  gz,
  newest,
  openAllDetails,
  overflowing,
  ready,
  seriousViolations,
  startSession,
  widgetPage,
  type ChromiumSession,
} from './widget-support.js';

let dist = '';
let splitFiles: string[] = [];
let session: ChromiumSession;
const freshPage: ChromiumSession['open'] = (path, options) => session.open(path, options);

describeInChromium('<ctrlrun-try-it> in Chromium', () => {
  beforeAll(async () => {
    dist = mkdtempSync(join(tmpdir(), 'ctrlrun-widget-'));
    const built = await buildWidget(dist);
    const module = gz(built.module);
    const wasm = gz(built.wasm);
    const size = { module, wasm, totalGzip: module.gzip + wasm.gzip, totalBrotli: module.brotli + wasm.brotli };
    writeFileSync(join(dist, 'one.html'), widgetPage(['<ctrlrun-try-it id="a"></ctrlrun-try-it>']));
    writeFileSync(join(dist, 'dark.html'), widgetPage(['<ctrlrun-try-it id="a" theme="dark"></ctrlrun-try-it>']));
    writeFileSync(
      join(dist, 'below.html'),
      widgetPage(['<ctrlrun-try-it id="a"></ctrlrun-try-it>'], { before: '<p style="height: 3000px">A long page above the element.</p>' }),
    );
    writeFileSync(
      join(dist, 'two.html'),
      widgetPage(['<ctrlrun-try-it id="a" theme="light"></ctrlrun-try-it>', '<ctrlrun-try-it id="b" theme="dark" layout="full"></ctrlrun-try-it>']),
    );
    writeFileSync(join(dist, 'full.html'), widgetPage(['<ctrlrun-try-it id="a" layout="full"></ctrlrun-try-it>']));
    writeFileSync(
      join(dist, 'policy.yaml'),
      'schema: ctrlrun.policy/v2\nactions:\n  stripe.refund:\n    effect: "refund:{payment_id}"\n    rules:\n      - when: { amount_lte: 100 }\n        decision: allow\n      - decision: approve\n',
    );
    writeFileSync(
      join(dist, 'policies.html'),
      widgetPage([
        '<ctrlrun-try-it id="url" policy="./policy.yaml"></ctrlrun-try-it>',
        `<ctrlrun-try-it id="inline" policy="schema: ctrlrun.policy/v2
        actions:
          stripe.refund:
            effect: &quot;refund:{payment_id}&quot;
            decision: deny"></ctrlrun-try-it>`,
        '<ctrlrun-try-it id="missing" policy="./nope.yaml"></ctrlrun-try-it>',
        '<ctrlrun-try-it id="bad" policy="schema: ctrlrun.policy/v2&#10;actions: 7"></ctrlrun-try-it>',
      ]),
    );
    // The split build, for a page that wants less JavaScript before anyone scrolls to the element.
    const split = await buildWidget(join(dist, 'split'), { split: true });
    splitFiles = [split.module, ...split.chunks];
    writeFileSync(
      join(dist, 'split', 'below.html'),
      widgetPage(['<ctrlrun-try-it id="a"></ctrlrun-try-it>'], { before: '<p style="height: 3000px">A long page above the element.</p>' }),
    );
    session = await startSession(dist, '/w/', 'widget-metrics.json');
    session.metrics['size'] = size;
  }, BROWSER_TEST_TIMEOUT);

  afterAll(async () => {
    await session?.close();
    if (dist) rmSync(dist, { recursive: true, force: true });
  }, BROWSER_TEST_TIMEOUT);

  it('fetches the wasm only when the element comes into view', async () => {
    const page = await freshPage('below.html');
    const w = page.locator('#a');
    await page.waitForFunction(() => customElements.get('ctrlrun-try-it') !== undefined);
    // Rendered (steps, form) before the kernel starts; the wasm waits.
    expect(await w.locator('.step').count()).toBe(GUIDE.length);
    await page.waitForTimeout(1000);
    const wasm = () => session.server.requested.filter((p) => p.endsWith('.wasm')).length;
    const before = wasm();
    expect(await w.getAttribute('data-state')).toBeNull();
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    expect(wasm(), 'no wasm while the element is out of view').toBe(before);
    await w.scrollIntoViewIfNeeded();
    await ready(w);
    expect(wasm() - before, 'the wasm, once').toBe(1);
    expect(session.outside).toEqual([]);
  });

  it("the split build: only the element's own code before it is in view; the kernel side and the wasm when it is", async () => {
    const before = session.server.requested.length;
    const page = await freshPage('split/below.html');
    const w = page.locator('#a');
    await page.waitForFunction(() => customElements.get('ctrlrun-try-it') !== undefined);
    await page.waitForTimeout(1000);
    const fetched = () => session.server.requested.slice(before).filter((p) => p.startsWith('/w/split/'));
    const early = fetched().filter((p) => p.endsWith('.js'));
    expect(fetched().filter((p) => p.endsWith('.wasm'))).toEqual([]);
    expect(early).toContain('/w/split/ctrlrun-try-it.js');
    const sizeOf = (paths: string[]) => paths.reduce((n, p) => n + gz(splitFiles.find((f) => f.endsWith(p.slice('/w/split/'.length)))!).gzip, 0);
    const all = splitFiles.map((f) => `/w/split/${f.split('/').at(-1)}`);
    expect(early.length).toBeLessThan(all.length);
    await w.scrollIntoViewIfNeeded();
    await ready(w);
    expect(fetched().filter((p) => p.endsWith('.wasm'))).toHaveLength(1);
    for (const [id, want] of SPEC) expectStep(id, want, await act(w, id));
    session.metrics['split'] = { jsBeforeInViewGzip: sizeOf(early), jsFiles: early, jsAllGzip: sizeOf(all) };
    expect(session.outside).toEqual([]);
  });

  it('or on first use: focus inside an element still out of view starts it', async () => {
    const page = await freshPage('below.html');
    const w = page.locator('#a');
    await page.waitForFunction(() => customElements.get('ctrlrun-try-it') !== undefined);
    await page.waitForTimeout(500);
    expect(await w.getAttribute('data-state')).toBeNull();
    await w.evaluate((host) => host.shadowRoot!.querySelector<HTMLButtonElement>('button[data-fill="1"]')!.focus({ preventScroll: true }));
    await ready(w);
    expect(await page.evaluate(() => window.scrollY), 'still out of view').toBe(0);
    expect(await w.evaluate((host) => host.getBoundingClientRect().top)).toBeGreaterThan(600);
  });

  it('runs the six steps at 720×600: current step in view, nothing overflowing sideways, the machinery behind each step', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    await ready(w);
    session.metrics['readyMs'] = Number(await w.getAttribute('data-ready-at'));
    let requestId = '';
    const seen: Record<string, Awaited<ReturnType<typeof act>>> = {};
    for (const [id, want] of SPEC) {
      if (want.form) {
        await w.locator(`button[data-fill="${id}"]`).click();
        const f = await formOf(w);
        expect({ payment_id: f.payment_id, amount: f.amount, lose_reply: f.lose_reply, presents: f.approval_id !== '' }, `step ${id}: the form`).toEqual(
          want.form,
        );
        if (want.form.presents) expect(f.approval_id).toBe(requestId);
      }
      const shown = await act(w, id);
      seen[id] = shown;
      expectStep(id, want, shown);
      if (id === '2a') {
        requestId = shown.data['requestId'] ?? '';
        expect(requestId).toMatch(/^apr_[0-9a-f]{32}$/);
        expect(await w.locator('#request_id').inputValue()).toBe(requestId);
      }
      if (id === '2b') expect(shown.data['approvalId']).toBe(requestId);
      // The current step is the next action's, and it is in view.
      const next = GUIDE.findIndex((s) => s.actions.some((a) => a.id === SPEC[SPEC.findIndex(([x]) => x === id) + 1]?.[0]));
      const wantStep = String((next === -1 ? GUIDE.length - 1 : next) + 1);
      await expect.poll(() => currentStepInView(w), { timeout: 30_000 }).toMatchObject({ step: wantStep, inView: true, latestInView: true });
      expect(await overflowing(page), `after ${id}`).toEqual([]);
    }

    // The machinery: each refund's canonical JSON hashes (in Node) to the hash shown, which is the receipt's.
    for (const [id, shown] of Object.entries(seen)) {
      if (id === '2b') continue;
      const m = shown.li.locator('.machinery');
      const canonical = await m.locator('pre.canonical').textContent();
      const hash = await m.getAttribute('data-action-hash');
      expect(
        `sha256:${createHash('sha256')
          .update(canonical ?? '', 'utf8')
          .digest('hex')}`,
        `step ${id}`,
      ).toBe(hash);
      expect(JSON.parse(canonical ?? '')).toMatchObject({
        name: 'stripe.refund',
        principal: { agent: 'refund-agent', user: null },
        schema: 'ctrlrun.action/v1',
      });
      if (shown.data['result']) expect(await m.getAttribute('data-hash-matches'), `step ${id}: receipt action_hash`).toBe('true');
      expect(await m.getAttribute('data-rule'), `step ${id}: the deciding rule`).toBe(RULE[id]);
      const code = (await m.locator('pre.code').textContent()) ?? '';
      expect(code).toContain('protect(stripeRefund, { control, name: "stripe.refund" })');
      expect(code).toContain(`amount: ${SPEC.find(([x]) => x === id)![1].form!.amount}`);
    }
    // The grant's hash is the hash of the action it was asked for (2a), not of the €5,000 one (2c).
    expect(await seen['2a']!.li.locator('.machinery').getAttribute('data-action-hash')).toBe(seen['2b']!.data['actionHash']);
    expect(await seen['2c']!.li.locator('.machinery').getAttribute('data-action-hash')).not.toBe(seen['2b']!.data['actionHash']);
    expect(await seen['1']!.li.locator('.rule').textContent()).toBe('rule[0]: when { amount_gte: 0, amount_lte: 100000 } → allow');

    // The chain: linked rows, each prev hash the hash of the row above, and verifyChain agrees.
    const links = await w.locator('.chain > li').evaluateAll((lis) => lis.map((li) => ({ ...(li as HTMLElement).dataset })));
    expect(links.length).toBeGreaterThan(5);
    expect(links[0]!['prev']).toBe(`sha256:${'0'.repeat(64)}`);
    for (let i = 1; i < links.length; i++) expect(links[i]!['prev'], `row ${i}`).toBe(links[i - 1]!['hash']);
    expect(links.every((l) => l['linked'] === 'true')).toBe(true);
    expect(await w.locator('.chain-verdict').getAttribute('data-ok')).toBe('true');

    await openAllDetails(w);
    expect(await overflowing(page), 'with every details open').toEqual([]);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'widget-720x600.png') });
    await page.screenshot({ path: join(ARTIFACTS, 'widget-720x600-full.png'), fullPage: true });
    // One entry with only its machinery open, for a reader of the artifacts.
    await seen['2c']!.li.evaluate((li) => li.querySelectorAll('details').forEach((d) => (d.open = d.classList.contains('machinery-details'))));
    await seen['2c']!.li.locator('.machinery-details').evaluate((d) => d.scrollIntoView({ block: 'start' }));
    await w.locator('.output').screenshot({ path: join(ARTIFACTS, 'widget-720x600-machinery.png') });
    expect(session.outside).toEqual([]);
  });

  it('the operator resolves the AMBIGUOUS effect: committed makes the retry a duplicate; failed lets it run again', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    await ready(w);
    for (const [state, retry, calls] of [
      ['committed', 'duplicate', '1'],
      ['failed', 'executed', '2'],
    ] as const) {
      const paymentId = `txn_r_${state}`;
      await w.locator('#payment_id').fill(paymentId);
      await w.locator('#amount').fill('50000');
      await w.locator('#lose_reply').check();
      await w.locator('#approval_id').fill('');
      let before = await w.locator('.entries > li').count();
      await w.locator('button.run').click();
      const lost = await newest(w, before);
      expect(lost.data['outcome']).toBe('reply_lost');
      before = await w.locator('.entries > li').count();
      await lost.li.locator(`button[data-resolve="${state}"]`).click();
      const resolved = await newest(w, before);
      expect([resolved.data['outcome'], resolved.data['state']]).toEqual(['resolved', state]);
      expect(resolved.text).toContain(`refund:${paymentId} is ${state.toUpperCase()}, by human:operator`);
      expect(await lost.li.locator('button[data-resolve]').first().isDisabled()).toBe(true);
      await w.locator('#lose_reply').uncheck();
      before = await w.locator('.entries > li').count();
      await w.locator('button.run').click();
      const again = await newest(w, before);
      expect([again.data['outcome'], again.data['remoteCalls']], state).toEqual([retry, calls]);
    }
    expect(await w.locator('.chain-verdict').getAttribute('data-ok')).toBe('true');
  });

  it('axe-core finds no serious or critical issue, light and dark, before and after the six steps', async () => {
    for (const [path, scheme] of [
      ['one.html', 'light'],
      ['one.html', 'dark'],
      ['dark.html', 'light'],
    ] as const) {
      const page = await freshPage(path, { colorScheme: scheme });
      const w = page.locator('#a');
      await ready(w);
      // theme="auto" follows prefers-color-scheme; theme="dark" is dark under a light preference too.
      const dark = path === 'dark.html' || scheme === 'dark';
      expect(await w.evaluate((host) => getComputedStyle(host).backgroundColor), `${path} ${scheme}`).toBe(dark ? 'rgb(13, 17, 23)' : 'rgb(255, 255, 255)');
      expect(await seriousViolations(page, ROOT), `${path} ${scheme}, fresh`).toEqual([]);
      for (const [id] of SPEC) await act(w, id);
      await openAllDetails(w);
      expect(await seriousViolations(page, ROOT), `${path} ${scheme}, after the six steps`).toEqual([]);
      await page.screenshot({ path: join(ARTIFACTS, `widget-${path.replace('.html', '')}-${scheme}.png`), fullPage: true });
      // The check sees inside the shadow root: an unlabelled field put there is reported.
      await w.evaluate((host) => host.shadowRoot!.querySelector('.root')!.append(Object.assign(document.createElement('input'), { className: 'axe-control' })));
      expect((await seriousViolations(page, ROOT)).join('\n')).toMatch(/critical label: .*axe-control/);
    }
  });

  it('runs all six steps from the keyboard alone and announces each outcome', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    const focused = () =>
      w.evaluate((host) => (host.shadowRoot?.activeElement as HTMLElement | null)?.dataset['fill'] ?? host.shadowRoot?.activeElement?.className ?? null);
    // Tab from the top of the page to step 1's button (the kernel starts on the first focus).
    for (let i = 0; i < 20 && (await focused()) !== '1'; i++) await page.keyboard.press('Tab');
    expect(await focused()).toBe('1');
    const announced: string[] = [];
    for (const [id, want] of SPEC) {
      expect(await focused(), `focus before ${id}`).toBe(id);
      await page.keyboard.press('Enter'); // fill: focus moves to Run (or Approve)
      expect(await focused()).toBe(id === '2b' ? 'approve' : 'primary run');
      const before = await w.locator('.entries > li').count();
      await page.keyboard.press('Enter'); // run
      const shown = await newest(w, before);
      expectStep(id, want, shown);
      const title = await shown.li.locator('.title').innerText();
      await expect.poll(() => w.locator('p[role="status"][aria-live="polite"].sr-only').textContent(), { timeout: 30_000 }).toContain(title);
      announced.push(title);
      if (id !== '6') await expect.poll(focused, { timeout: 30_000 }).not.toBe(id === '2b' ? 'approve' : 'primary run');
    }
    expect(announced).toHaveLength(SPEC.length);
  });

  it('two elements on one page are two independent stores, in light and dark, and fit a 375 px screen', async () => {
    const page = await freshPage('two.html', { width: 375, height: 740 });
    const a = page.locator('#a');
    const b = page.locator('#b');
    await a.scrollIntoViewIfNeeded();
    await ready(a);
    for (const [id, want] of SPEC) expectStep(id, want, await act(a, id));
    await b.scrollIntoViewIfNeeded();
    await ready(b);
    for (const [id, want] of SPEC) expectStep(id, want, await act(b, id));
    expect(await a.locator('.chain-verdict').getAttribute('data-count')).toBe(await b.locator('.chain-verdict').getAttribute('data-count'));
    const bg = (w: typeof a) => w.evaluate((host) => getComputedStyle(host).backgroundColor);
    expect([await bg(a), await bg(b)]).toEqual(['rgb(255, 255, 255)', 'rgb(13, 17, 23)']);
    await openAllDetails(a);
    await openAllDetails(b);
    expect(await overflowing(page)).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'widget-two-375.png'), fullPage: true });
  });

  it('takes its policy from an inline attribute or a URL, and says so clearly when it cannot', async () => {
    const page = await freshPage('policies.html', { width: 720, height: 3000 });
    const url = page.locator('#url');
    await ready(url);
    await url.locator('#payment_id').fill('txn_p');
    await url.locator('#amount').fill('500');
    await url.locator('button.run').click();
    expect((await newest(url, 0)).data['outcome'], 'the fetched policy: €5 needs a human').toBe('approval_required');
    expect(await url.locator('.policy pre').textContent()).toContain('amount_lte: 100 }');
    const inline = page.locator('#inline');
    await ready(inline);
    expect((await act(inline, '1')).data['outcome'], 'the inline policy denies everything').toBe('denied');
    for (const [id, message] of [
      ['missing', /nope\.yaml, which answered 404/],
      ['bad', /PolicyError/],
    ] as const) {
      const w = page.locator(`#${id}`);
      await expect.poll(() => w.getAttribute('data-state'), { timeout: 60_000 }).toBe('failed');
      expect(await w.locator('.status').innerText()).toMatch(message);
    }
  });

  it('a new policy attribute on a running element: a fresh store under it', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    await ready(w);
    expect((await act(w, '1')).data['outcome']).toBe('executed');
    await w.evaluate((host) => host.setAttribute('policy', './policy.yaml'));
    await expect.poll(() => w.locator('.entries > li').first().innerText(), { timeout: 60_000 }).toMatch(/a new policy: a fresh store under sha256:/);
    await ready(w);
    expect(await w.locator('.chain-verdict').getAttribute('data-count')).toBe('0');
    // The same refund again is not a duplicate (a fresh store) and now needs a human (the new policy).
    expect((await act(w, '1')).data['outcome']).toBe('approval_required');
  });

  it('removed from the page, it closes its store; moved, it keeps it; put back, it starts over', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    await ready(w);
    await act(w, '1');
    // Moved (removed and added in one task): the same session.
    await page.evaluate(() => {
      const host = document.querySelector('#a')!;
      document.body.append(host);
    });
    await page.evaluate(() => new Promise((r) => setTimeout(r, 50)));
    expect(await w.getAttribute('data-state')).toBe('ready');
    expect(await w.locator('.chain-verdict').getAttribute('data-count')).toBe('1');
    // Removed: closed.
    await page.evaluate(() => {
      const host = document.querySelector('#a')!;
      (window as unknown as { kept: Element }).kept = host;
      host.remove();
    });
    await expect.poll(() => page.evaluate(() => (window as unknown as { kept: HTMLElement }).kept.dataset['state']), { timeout: 30_000 }).toBe('closed');
    // Put back: a fresh store, step 1 runs again as a first refund.
    await page.evaluate(() => document.querySelector('main')!.append((window as unknown as { kept: Element }).kept));
    await ready(w);
    expect(await w.locator('.entries > li').count()).toBe(0);
    const again = await act(w, '1');
    expect([again.data['outcome'], again.data['remoteCalls']]).toEqual(['executed', '1']);
  });

  it('layout="full" puts the steps beside the work when there is room', async () => {
    const page = await freshPage('full.html', { width: 1280, height: 900 });
    const w = page.locator('#a');
    await ready(w);
    const steps = await w.locator('.steps').boundingBox();
    const form = await w.locator('form.refund').boundingBox();
    expect(steps!.x + steps!.width).toBeLessThanOrEqual(form!.x);
    for (const [id] of SPEC) await act(w, id);
    expect(await overflowing(page)).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'widget-full-1280.png'), fullPage: true });
    // The same element in a narrow frame falls back to one column.
    await page.setViewportSize({ width: 720, height: 600 });
    const narrowSteps = await w.locator('.steps').boundingBox();
    expect(narrowSteps!.y + narrowSteps!.height).toBeLessThanOrEqual((await w.locator('form.refund').boundingBox())!.y);
  });

  it('measures ready, the first step and the six steps inside the page', async () => {
    const page = await freshPage('one.html');
    const w = page.locator('#a');
    await ready(w);
    session.metrics['readyMsFromNavigation'] = Number(await w.getAttribute('data-ready-at'));
    const plan = SPEC.map(([id]) => [id, id === '2b' ? 'button.approve' : 'button.run'] as const);
    const times = await w.evaluate(async (host, steps) => {
      const root = host.shadowRoot!;
      const list = root.querySelector('.entries')!;
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
      const each: number[] = [];
      const t0 = performance.now();
      for (const [id, button] of steps) {
        const t = performance.now();
        const n = list.children.length + 1;
        root.querySelector<HTMLButtonElement>(`button[data-fill="${id}"]`)!.click();
        root.querySelector<HTMLButtonElement>(button)!.click();
        await grown(n);
        each.push(performance.now() - t);
      }
      return { total: performance.now() - t0, each };
    }, plan);
    const outcomes = await w.locator('.entries > li').evaluateAll((lis) => lis.map((li) => (li as HTMLElement).dataset['outcome']));
    expect(outcomes).toEqual(SPEC.map(([, want]) => want.outcome));
    session.metrics['firstStepMs'] = Math.round(times.each[0]! * 10) / 10;
    session.metrics['sixStepsInPageMs'] = Math.round(times.total * 10) / 10;
    session.metrics['perActionMs'] = times.each.map((t) => Math.round(t * 10) / 10);
  });
});
