/**
 * What the `<ctrlrun-try-it>` browser tests share: building the element, a page that embeds it,
 * clicking a guided action in one element, and reading what it shows. Locators are scoped to
 * one element (Playwright's CSS pierces open shadow roots), so two elements on a page never mix.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { expect } from 'vitest';
import { ARTIFACTS, launchChromium, serveStatic, type StaticServer } from './support.js';

/** One output entry as the element shows it. */
export interface Shown {
  data: Record<string, string | undefined>;
  text: string;
  li: Locator;
}

/** A page that embeds the element (one tag per `tags` entry) after `before` HTML, with one module script. */
export function widgetPage(tags: string[], options: { before?: string; script?: string; title?: string } = {}): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="data:," />
    <title>${options.title ?? 'ctrlrun try-it element'}</title>
    <style>body { margin: 0; font-family: Georgia, serif; } main { padding: 8px; } p { color: #333; }</style>
  </head>
  <body>
    <main>
      <h1>Docs page</h1>
      ${options.before ?? ''}
      ${tags.join('\n      ')}
    </main>
    <script type="module" src="${options.script ?? './ctrlrun-try-it.js'}"></script>
  </body>
</html>
`;
}

/** Waits until the element is ready (or failed, which fails the test with its status line). */
export async function ready(w: Locator): Promise<void> {
  await expect.poll(() => w.getAttribute('data-state'), { timeout: 90_000 }).toMatch(/^(ready|failed)$/);
  expect(await w.getAttribute('data-state'), await w.locator('.status').innerText()).toBe('ready');
}

async function entryCount(w: Locator): Promise<number> {
  return w.locator('.entries > li').count();
}

/** The entry after the first `before`. */
export async function newest(w: Locator, before: number): Promise<Shown> {
  const li = w.locator('.entries > li').nth(before);
  await li.waitFor({ timeout: 60_000 });
  return { data: await li.evaluate((n) => ({ ...(n as HTMLElement).dataset })), text: await li.innerText(), li };
}

/** Clicks the guided action's button, then Run (or Approve), and returns the new entry. */
export async function act(w: Locator, id: string): Promise<Shown> {
  const before = await entryCount(w);
  await w.locator(`button[data-fill="${id}"]`).click();
  await w.locator(id === '2b' ? 'button.approve' : 'button.run').click();
  return newest(w, before);
}

/** The form's values as the element holds them. */
export async function formOf(w: Locator) {
  return {
    payment_id: await w.locator('#payment_id').inputValue(),
    amount: await w.locator('#amount').inputValue(),
    lose_reply: await w.locator('#lose_reply').isChecked(),
    approval_id: await w.locator('#approval_id').inputValue(),
  };
}

/**
 * Elements inside the element (and the page itself) wider than their box: every output
 * container, entry, pre, chain row. Empty when nothing is clipped or scrolls sideways.
 */
export async function overflowing(page: Page, selector = 'ctrlrun-try-it'): Promise<string[]> {
  return page.evaluate((sel) => {
    const out: string[] = [];
    if (document.documentElement.scrollWidth > window.innerWidth) out.push(`the page: ${document.documentElement.scrollWidth} > ${window.innerWidth}`);
    for (const host of Array.from(document.querySelectorAll(sel))) {
      const root = host.shadowRoot;
      if (!root) continue;
      if (host.scrollWidth > host.clientWidth + 1) out.push(`${host.id || sel}: ${host.scrollWidth} > ${host.clientWidth}`);
      for (const el of Array.from(
        root.querySelectorAll<HTMLElement>('.root, .output, .entries, .entry, pre, .chain, .link, .steps, .step, form, .machinery, .resolve'),
      )) {
        if (el.getClientRects().length === 0) continue; // not rendered (a closed details)
        if (el.scrollWidth > el.clientWidth + 1)
          out.push(`${host.id || sel} ${el.tagName.toLowerCase()}.${el.className}: ${el.scrollWidth} > ${el.clientWidth}`);
      }
    }
    return out;
  }, selector);
}

/** Opens every `<details>` in the element, so the machinery and the chain are laid out too. */
export async function openAllDetails(w: Locator): Promise<void> {
  await w.evaluate((host) => host.shadowRoot?.querySelectorAll('details').forEach((d) => (d.open = true)));
}

/**
 * Whether the current step's row, and the last outcome beside Run, are entirely inside the
 * viewport (to within a pixel: layout positions are fractional).
 */
export async function currentStepInView(w: Locator): Promise<{ step: string | null; inView: boolean; latestInView: boolean; box: string }> {
  return w.evaluate((host) => {
    const inView = (r: DOMRect) => r.top >= -1 && r.bottom <= window.innerHeight + 1 && r.left >= -1 && r.right <= window.innerWidth + 1;
    const li = host.shadowRoot?.querySelector<HTMLElement>('.step[aria-current]');
    const latest = host.shadowRoot?.querySelector<HTMLElement>('.latest');
    if (!li || !latest) return { step: null, inView: false, latestInView: false, box: 'no current step' };
    const r = li.getBoundingClientRect();
    const l = latest.getBoundingClientRect();
    return {
      step: li.dataset['step'] ?? null,
      inView: inView(r),
      latestInView: inView(l),
      box: `step ${r.top}..${r.bottom}, latest ${l.top}..${l.bottom} of ${window.innerHeight}`,
    };
  });
}

/** `{ bytes, gzip, brotli }` of a file (gzip -9; brotli at its default quality, as static hosts serve it). */
export function gz(file: string): { bytes: number; gzip: number; brotli: number } {
  const data = readFileSync(file);
  return { bytes: data.length, gzip: gzipSync(data, { level: 9 }).length, brotli: brotliCompressSync(data).length };
}

/** axe-core's source, injected into a page. */
export function axeSource(root: string): string {
  return readFileSync(join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
}

/** axe-core's serious and critical violations on the page (open shadow roots included). */
export async function seriousViolations(page: Page, root: string): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ content: axeSource(root) });
  const violations = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(ctx: unknown, opts: unknown): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[] }>;
        };
      }
    ).axe;
    const res = await axe.run(document, { resultTypes: ['violations'] });
    return res.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => JSON.stringify(n.target)).slice(0, 3) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.targets.join(' ')}`);
}

/** Whether the current step's top edge is visible: in the viewport and not under a sticky bar of the page. */
export async function currentStepUncovered(w: Locator): Promise<{ step: string | null; uncovered: boolean; at: string }> {
  return w.evaluate((host) => {
    const li = host.shadowRoot?.querySelector<HTMLElement>('.step[aria-current]');
    if (!li) return { step: null, uncovered: false, at: 'no current step' };
    const r = li.getBoundingClientRect();
    const x = r.left + Math.min(20, r.width / 2);
    const y = r.top + 4;
    const top = y >= 0 && y < window.innerHeight ? document.elementFromPoint(x, y) : null;
    return {
      step: li.dataset['step'] ?? null,
      uncovered: top === host,
      at: `${Math.round(y)}: ${top ? `${top.tagName.toLowerCase()}.${String(top.className)}` : 'outside the viewport'}`,
    };
  });
}

/** A browser and a static server for one test file, with what its pages did. */
export interface ChromiumSession {
  readonly server: StaticServer;
  readonly browser: Browser;
  /** Timings and sizes, written to `test-artifacts/<name>` and printed when the session closes. */
  readonly metrics: Record<string, unknown>;
  /** Requests that left the test server, and page errors (a test expects this empty). */
  readonly outside: string[];
  /** A page in a fresh context (its own storage), at `path` under the server. */
  open(path: string, options?: { width?: number; height?: number; colorScheme?: 'light' | 'dark' }): Promise<Page>;
  close(): Promise<void>;
}

/** Serves `dir` under `prefix` and launches Chromium; `close()` reports the metrics as `artifact`. */
export async function startSession(dir: string, prefix: string, artifact: string): Promise<ChromiumSession> {
  const server = await serveStatic(dir, prefix);
  const browser = await launchChromium();
  const contexts: BrowserContext[] = [];
  const metrics: Record<string, unknown> = {};
  const outside: string[] = [];
  return {
    server,
    browser,
    metrics,
    outside,
    async open(path, options = {}) {
      const context = await browser.newContext({
        viewport: { width: options.width ?? 720, height: options.height ?? 600 },
        colorScheme: options.colorScheme ?? 'light',
      });
      context.setDefaultTimeout(60_000);
      contexts.push(context);
      const page = await context.newPage();
      page.on('request', (r) => {
        if (!r.url().startsWith(server.origin + '/')) outside.push(r.url());
      });
      page.on('pageerror', (e) => outside.push(`page error: ${e.message}`));
      await page.goto(`${server.url}${path}`);
      return page;
    },
    async close() {
      for (const c of contexts) await c.close().catch(() => undefined);
      metrics['chromium'] = browser.version();
      await browser.close();
      await server.close();
      mkdirSync(ARTIFACTS, { recursive: true });
      writeFileSync(join(ARTIFACTS, artifact), `${JSON.stringify(metrics, null, 2)}\n`);
      console.log(`${artifact}: ${JSON.stringify(metrics)}`);
    },
  };
}
