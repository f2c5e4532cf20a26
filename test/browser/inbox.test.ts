/**
 * The operator inbox in headless Chromium, against the Node worker serving examples/worker with a
 * real counting upstream: sign in with the operator credential, see a request an agent made over
 * HTTP (its exact arguments and hash), approve it, and see the agent's retry run once. A second
 * request appears without a reload (live refresh). On a phone-sized viewport the page needs no
 * sideways scrolling. axe-core finds no serious or critical issue on the login page or the inbox.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { startNodeWorker, type NodeWorker } from '../../worker/src/runtime/node.js';
import { BROWSER_TEST_TIMEOUT, describeInChromium, launchChromium, ROOT } from './support.js';

interface Upstream {
  url: string;
  calls(): number;
  close(): Promise<void>;
}
interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

const require = createRequire(import.meta.url);
const ROOT_EXAMPLES = join(ROOT, 'examples');
const AGENT = 'agent-token-for-inbox-chromium';
const OPERATOR = 'operator-token-for-inbox-chrom';

async function agentCall(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${url}/v1/actions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

async function axe(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, so the page's CSP (script-src 'self') stays on.
  await page.evaluate(await readFile(require.resolve('axe-core/axe.min.js'), 'utf8'));
  const result = (await page.evaluate(() =>
    (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[]; passes: unknown[] }> } }).axe.run(),
  )) as { violations: AxeViolation[]; passes: unknown[] };
  expect(result.passes.length, 'axe ran its rules').toBeGreaterThan(10);
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

describeInChromium('operator inbox in Chromium', () => {
  let upstream: Upstream;
  let worker: NodeWorker;
  let browser: Browser;
  let dir = '';

  beforeAll(async () => {
    upstream = (await startFakeUpstream(0)) as Upstream;
    dir = await mkdtemp(join(tmpdir(), 'ctrlrun-inbox-'));
    const example = join(ROOT, 'examples', 'worker');
    await mkdir(join(dir, 'worker'));
    for (const f of ['policy.yaml', 'tools.mjs']) await copyFile(join(example, f), join(dir, 'worker', f));
    await writeFile(join(dir, 'worker.yaml'), (await readFile(join(ROOT_EXAMPLES, 'worker.yaml'), 'utf8')).replace('http://127.0.0.1:8788', upstream.url));
    worker = await startNodeWorker({
      env: { CTRLRUN_AGENT_TOKEN: AGENT, CTRLRUN_OPERATOR_TOKEN: OPERATOR, UPSTREAM_TOKEN: 'u' },
      configPath: join(dir, 'worker.yaml'),
      port: 0,
      print: () => undefined,
    });
    browser = await launchChromium();
  }, BROWSER_TEST_TIMEOUT);

  afterAll(async () => {
    await browser?.close();
    await worker?.close();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, BROWSER_TEST_TIMEOUT);

  it(
    "log in, see the agent's request, approve it, and the retry runs once; live refresh; accessible",
    async () => {
      const refund = { name: 'billing.refund', arguments: { payment_id: 'pay_77', amount: 25000 } };
      const asked = await agentCall(worker.url, refund);
      expect(asked.status).toBe(202);
      const requestId = String(asked.json['requestId']);

      const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${worker.url}/inbox`);
      expect(await axe(page), 'axe on the login page').toEqual([]);

      // An agent credential opens nothing.
      await page.getByLabel('Operator credential').fill(AGENT);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => page.getByRole('alert').textContent()).toContain('agent credential');
      expect(await page.content()).not.toContain(requestId);

      await page.getByLabel('Operator credential').fill(OPERATOR);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: /Pending approvals \(1\)/ }).waitFor();
      const item = page.locator('article', { hasText: requestId });
      expect(await item.locator('pre[data-arguments]').textContent()).toBe('{"amount":25000,"payment_id":"pay_77"}');
      expect(await item.textContent()).toContain(String(asked.json['actionHash']));
      expect(await item.textContent()).toContain('billing-agent');
      expect(await item.textContent()).toMatch(/rule\[1\]: amount_gte 0, amount_lte 500000 → approve/);
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scrolling on a phone').toBe(true);
      const cookies = await context.cookies();
      expect(cookies.find((c) => c.name === 'ctrlrun_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict', secure: false, path: '/inbox' });
      expect(await page.evaluate(() => document.cookie)).toBe('');
      expect(await axe(page), 'axe on the inbox').toEqual([]);

      // Live refresh: a new request shows up without a navigation.
      await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
      const second = await agentCall(worker.url, { name: 'billing.refund', arguments: { payment_id: 'pay_78', amount: 30000 } });
      await page.locator('article', { hasText: String(second.json['requestId']) }).waitFor({ timeout: 30_000 });
      expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);

      // An open edit box is never swapped away by the refresh, even without focus; closing it lets the newest requests in.
      await item.locator('summary', { hasText: 'Edit and approve' }).click();
      await item.locator('textarea[data-edit]').fill('{"amount":20000,"payment_id":"pay_77"}');
      await page.locator('h1').first().click();
      const third = await agentCall(worker.url, { name: 'billing.refund', arguments: { payment_id: 'pay_79', amount: 31000 } });
      await expect.poll(() => page.locator('#refresh-status').textContent(), { timeout: 30_000 }).toContain('Paused while you edit');
      expect(await item.locator('textarea[data-edit]').inputValue()).toBe('{"amount":20000,"payment_id":"pay_77"}');
      expect(await page.locator('article', { hasText: String(third.json['requestId']) }).count()).toBe(0);
      await item.locator('summary', { hasText: 'Edit and approve' }).click();
      await page.locator('h1').first().click();
      await page.locator('article', { hasText: String(third.json['requestId']) }).waitFor({ timeout: 30_000 });

      await item.getByRole('button', { name: /^Approve/ }).click();
      await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Approved');
      await expect.poll(() => page.locator('article', { hasText: requestId }).count()).toBe(0);

      expect(upstream.calls()).toBe(0);
      const run = await agentCall(worker.url, { ...refund, approvalId: requestId });
      expect(run.status).toBe(200);
      const twice = await agentCall(worker.url, { ...refund, approvalId: requestId });
      expect(twice.status).toBe(409);
      expect(upstream.calls()).toBe(1);
      expect(errors).toEqual([]);
      await context.close();
    },
    BROWSER_TEST_TIMEOUT,
  );

  it(
    "shows each time in the reader's own time zone, short and on one line, with the exact UTC value on hover; a refreshed request too",
    async () => {
      const asked = await agentCall(worker.url, { name: 'billing.refund', arguments: { payment_id: 'pay_tz1', amount: 26000 } });
      expect(asked.status).toBe(202);
      const requestId = String(asked.json['requestId']);
      // Kolkata is UTC+05:30 all year: a half-hour offset no UTC text can pass for.
      const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, timezoneId: 'Asia/Kolkata', locale: 'en-GB' });
      const page = await context.newPage();
      await page.goto(`${worker.url}/inbox`);
      await page.getByLabel('Operator credential').fill(OPERATOR);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const operator = { headers: { authorization: `Bearer ${OPERATOR}` } };
      const listed = async () =>
        ((await (await fetch(`${worker.url}/v1/approvals?status=pending`, operator)).json()) as { approvals: Record<string, string>[] }).approvals;
      const kolkata = (exact: string) => new Date(Date.parse(exact) + 330 * 60_000).toISOString().slice(11, 16);

      const check = async (id: string) => {
        const approval = (await listed()).find((a) => a['requestId'] === id)!;
        const times = page.locator('article', { hasText: id }).locator('time');
        await times.first().waitFor({ timeout: 30_000 });
        expect(await times.count()).toBe(2);
        for (const [i, exact] of [approval['createdAt']!, approval['expiresAt']!].entries()) {
          const t = times.nth(i);
          expect(exact).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
          expect(await t.getAttribute('datetime')).toBe(exact);
          expect(await t.getAttribute('title')).toBe(exact);
          await expect.poll(() => t.textContent()).not.toContain('UTC');
          const text = (await t.textContent())!;
          expect(text, `${exact} shown in Kolkata`).toContain(kolkata(exact));
          expect(text.length, text).toBeLessThan(exact.length);
          expect(await t.evaluate((el) => getComputedStyle(el).whiteSpace)).toBe('nowrap');
        }
      };
      await check(requestId);
      // A request that arrives by the live refresh is shown in local time too.
      const later = await agentCall(worker.url, { name: 'billing.refund', arguments: { payment_id: 'pay_tz2', amount: 27000 } });
      await check(String(later.json['requestId']));
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scrolling on a phone').toBe(true);
      await context.close();
    },
    BROWSER_TEST_TIMEOUT,
  );
});
