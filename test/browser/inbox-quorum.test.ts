/**
 * A two-person rule walked end to end in headless Chromium through the operator inbox, against the
 * Node worker with a real counting upstream (spec 05 §4): `approvals_required: 2`, two operators
 * holding the control's role. The first operator's yes is recorded ("1 of 2 approvals: ana") and
 * the agent's retry does not run; the same operator's second yes is refused and says so; the
 * second operator's yes grants; the agent's retry runs once, and a repeat is refused. And the
 * requester's own yes: riley proposes under the principal her operator credential is verified as
 * (`operator` / `riley`); her yes and ana's reach two, and the run is refused at consumption
 * (`approver_is_requester`) — nothing runs.
 */
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
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

const AGENT = 'agent-token-for-two-person-rule';
const ANA = 'operator-token-of-ana-two-person';
const BO = 'operator-token-of-bo-two-person-';
const RILEY_AGENT = 'agent-token-of-riley-herself-two-p';
const RILEY = 'operator-token-of-riley-two-person';

const POLICY = `schema: ctrlrun.policy/v6
controls:
  refund-limit: {title: Refunds above the limit, approver_role: finance}
actions:
  billing.refund:
    effect: "refund:{payment_id}"
    approvals_required: 2
    controls: [refund-limit]
    decision: approve
`;

async function agentCall(url: string, body: unknown, token = AGENT): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${url}/v1/actions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describeInChromium('a two-person rule in the inbox, in Chromium', () => {
  let upstream: Upstream;
  let worker: NodeWorker;
  let browser: Browser;
  let dir = '';

  beforeAll(async () => {
    upstream = (await startFakeUpstream(0)) as Upstream;
    dir = await mkdtemp(join(tmpdir(), 'ctrlrun-inbox-quorum-'));
    await mkdir(join(dir, 'worker'));
    await copyFile(join(ROOT, 'examples', 'worker', 'tools.mjs'), join(dir, 'worker', 'tools.mjs'));
    await writeFile(join(dir, 'worker', 'policy.yaml'), POLICY);
    await writeFile(
      join(dir, 'worker.yaml'),
      `policy: ./worker/policy.yaml
executors:
  billing.refund:
    http:
      url: ${upstream.url}/refunds
      headers:
        authorization: { env: UPSTREAM_TOKEN, prefix: "Bearer " }
      notExecutedStatuses: [409]
tokens:
  agents:
    - { token: { env: AGENT_TOKEN }, agent: billing-agent, user: riley }
    - { token: { env: RILEY_AGENT_TOKEN }, agent: operator, user: riley }
  operators:
    - { token: { env: ANA_TOKEN }, operator: ana, roles: [finance] }
    - { token: { env: BO_TOKEN }, operator: bo, roles: [finance] }
    - { token: { env: RILEY_TOKEN }, operator: riley, roles: [finance] }
approvers:
  rolesClaim: roles
demo: off
`,
    );
    worker = await startNodeWorker({
      env: { AGENT_TOKEN: AGENT, ANA_TOKEN: ANA, BO_TOKEN: BO, RILEY_AGENT_TOKEN: RILEY_AGENT, RILEY_TOKEN: RILEY, UPSTREAM_TOKEN: 'u' },
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

  async function signIn(token: string): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${worker.url}/inbox`);
    await page.getByLabel('Operator credential').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Pending approvals/ }).waitFor();
    return { context, page, errors };
  }

  it(
    "two operators' yeses run the refund once; the first alone runs nothing; the same person twice is refused",
    async () => {
      const refund = { name: 'billing.refund', arguments: { payment_id: 'pay_2p', amount: 90000 } };
      const asked = await agentCall(worker.url, refund);
      expect(asked.status, JSON.stringify(asked.json)).toBe(202);
      const requestId = String(asked.json['requestId']);

      const ana = await signIn(ANA);
      const anaItem = ana.page.locator('article', { hasText: requestId });
      await anaItem.getByRole('button', { name: /^Approve/ }).click();
      await expect.poll(() => ana.page.getByRole('status').first().textContent()).toContain('Your approval is recorded: 1 of 2 approvals: ana so far');
      // Still pending, and saying how far it got.
      await expect.poll(() => ana.page.locator('article', { hasText: requestId }).locator('[data-progress]').textContent()).toBe('1 of 2 approvals: ana');

      // One yes runs nothing.
      const early = await agentCall(worker.url, { ...refund, approvalId: requestId });
      expect(early.status).not.toBe(200);
      expect(upstream.calls()).toBe(0);

      // The same person again is refused, and told why.
      await ana.page
        .locator('article', { hasText: requestId })
        .getByRole('button', { name: /^Approve/ })
        .click();
      await expect.poll(() => ana.page.getByRole('status').first().textContent()).toMatch(/^Not approved: .*ana/);
      expect(upstream.calls()).toBe(0);

      const bo = await signIn(BO);
      expect(await bo.page.locator('article', { hasText: requestId }).locator('[data-progress]').textContent()).toBe('1 of 2 approvals: ana');
      await bo.page
        .locator('article', { hasText: requestId })
        .getByRole('button', { name: /^Approve/ })
        .click();
      await expect.poll(() => bo.page.getByRole('status').first().textContent()).toContain('Approved');
      await expect.poll(() => bo.page.locator('article', { hasText: requestId }).count()).toBe(0);

      const run = await agentCall(worker.url, { ...refund, approvalId: requestId });
      expect(run.status, JSON.stringify(run.json)).toBe(200);
      const twice = await agentCall(worker.url, { ...refund, approvalId: requestId });
      expect(twice.status).toBe(409);
      expect(upstream.calls()).toBe(1);

      // The receipt names both verified approvers.
      const receipts = (await (await fetch(`${worker.url}/v1/receipts?limit=5`, { headers: { authorization: `Bearer ${BO}` } })).json()) as {
        receipts: Record<string, unknown>[];
      };
      const committed = receipts.receipts.find((r) => r['result'] === 'committed')!;
      expect(JSON.stringify((committed['receipt'] as Record<string, unknown>)['approvers'])).toMatch(/ana.*bo|bo.*ana/);
      expect([...ana.errors, ...bo.errors]).toEqual([]);
      await ana.context.close();
      await bo.context.close();
    },
    BROWSER_TEST_TIMEOUT,
  );

  it(
    "the requester's own yes is refused: riley's yes and ana's reach two, and the run is refused approver_is_requester, nothing runs",
    async () => {
      const before = upstream.calls();
      const refund = { name: 'billing.refund', arguments: { payment_id: 'pay_self', amount: 70000 } };
      const asked = await agentCall(worker.url, refund, RILEY_AGENT);
      expect(asked.status, JSON.stringify(asked.json)).toBe(202);
      const requestId = String(asked.json['requestId']);

      const riley = await signIn(RILEY);
      await riley.page
        .locator('article', { hasText: requestId })
        .getByRole('button', { name: /^Approve/ })
        .click();
      await expect.poll(() => riley.page.getByRole('status').first().textContent()).toContain('1 of 2 approvals: riley');
      const ana = await signIn(ANA);
      await ana.page
        .locator('article', { hasText: requestId })
        .getByRole('button', { name: /^Approve/ })
        .click();
      await expect.poll(() => ana.page.getByRole('status').first().textContent()).toContain('Approved');

      const run = await agentCall(worker.url, { ...refund, approvalId: requestId }, RILEY_AGENT);
      expect(run.status, JSON.stringify(run.json)).toBe(409);
      expect(JSON.stringify(run.json)).toMatch(/approver_is_requester/);
      expect(JSON.stringify(run.json)).toMatch(/nobody approves their own action/);
      expect(upstream.calls(), 'nothing ran').toBe(before);
      expect([...riley.errors, ...ana.errors]).toEqual([]);
      await riley.context.close();
      await ana.context.close();
    },
    BROWSER_TEST_TIMEOUT,
  );
});
