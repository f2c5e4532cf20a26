// The webhook approval provider (spec 04 §6, T27), against real HTTP on 127.0.0.1: node:http as
// the person's receiver, the answer handler on a Hono route served by @hono/node-server.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ActionDenied, ApprovalRequired, createAction, protect } from '@ctrlrun/kernel';
import {
  APPROVAL_REQUEST_SCHEMA,
  approvalRequestJson,
  approvalWebhookHandler,
  signWebhook,
  verifyWebhookSignature,
  WebhookApprovalProvider,
  type WebhookOptions,
} from '@ctrlrun/kernel/webhook';
import { setup, T0 } from './harness.js';

const SECRET = 'a-test-secret-that-is-at-least-32-bytes-long';
const enc = new TextEncoder();

interface Delivery {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

type Answer = { status: number; delayMs?: number };

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (servers.length) await servers.pop()!();
});

function closer(server: Server): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

/** A person's webhook receiver: records every delivery, answers as `respond` says. */
async function receiver(respond: (n: number, d: Delivery) => Answer | Promise<Answer> = () => ({ status: 200 })) {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const d = { headers: req.headers, body: Buffer.concat(chunks) };
      deliveries.push(d);
      const answer = await respond(deliveries.length, d);
      if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
      if (!res.destroyed) res.writeHead(answer.status, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(closer(server));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries };
}

/** How any receiver checks a delivery, written independently of the kernel (node:crypto). */
function verifiedIndependently(d: Delivery, secret = SECRET): boolean {
  const header = String(d.headers['ctrlrun-signature'] ?? '');
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(`${m[1]}.`).update(d.body).digest('hex');
  return expected === m[2];
}

async function needsApproval(ctx: Awaited<ReturnType<typeof setup>>, paymentId = 'p1') {
  const action = createAction({
    name: 'stripe.refund',
    arguments: { payment_id: paymentId, amount: 200000 },
    principal: { agent: 'refund-agent', user: 'ana@example.com' },
  });
  const err = await ctx.control.execute(action, () => 'never').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApprovalRequired);
  return { action, requestId: (err as ApprovalRequired).requestId };
}

function provider(ctx: Awaited<ReturnType<typeof setup>>, url: string, extra: Partial<WebhookOptions> = {}) {
  const warnings: string[] = [];
  const sleeps: number[] = [];
  const p = new WebhookApprovalProvider(ctx.store, {
    url,
    secret: SECRET,
    allowInsecure: true,
    clock: ctx.clock,
    sleep: async (ms) => void sleeps.push(ms),
    logger: { warn: (m: string) => void warnings.push(m) },
    ...extra,
  });
  return { p, warnings, sleeps };
}

function answerRequest(url: string, body: string, secret = SECRET, t = Math.floor(T0.getTime() / 1000)) {
  const bytes = enc.encode(body);
  return new Request(url, { method: 'POST', headers: { 'CTRLRun-Signature': signWebhook(secret, t, bytes), 'content-type': 'application/json' }, body: bytes });
}

describe('outbound: one signed POST per approval request', () => {
  it('test_T27_the_outbound_post_carries_a_signature_over_the_exact_bytes_sent', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const { requestId } = await needsApproval(ctx);
    const { p } = provider(ctx, hook.url);
    const delivery = await p.notify(requestId);
    expect(delivery).toMatchObject({ delivered: true, attempts: 1, status: 200 });
    expect(hook.deliveries).toHaveLength(1);
    const d = hook.deliveries[0]!;
    expect(d.headers['content-type']).toBe('application/json');
    expect(d.headers['ctrlrun-request-id']).toBe(requestId);
    expect(verifiedIndependently(d)).toBe(true);
    expect(verifiedIndependently(d, `${SECRET}x`)).toBe(false);
    // The timestamp is the provider's clock, in unix seconds.
    expect(String(d.headers['ctrlrun-signature'])).toMatch(new RegExp(`^t=${Math.floor(T0.getTime() / 1000)},`));
  });

  it('test_T27_the_payload_carries_what_the_spec_names', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const { action, requestId } = await needsApproval(ctx);
    const { p } = provider(ctx, hook.url, { publicUrl: 'https://gw.example.com/' });
    await p.notify(requestId);
    const text = hook.deliveries[0]!.body.toString('utf8');
    const body = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['schema', 'request_id', 'action_hash', 'action', 'created_at', 'expires_at', 'respond_to']);
    expect(body['schema']).toBe(APPROVAL_REQUEST_SCHEMA);
    expect(body['request_id']).toBe(requestId);
    expect(body['action_hash']).toBe(action.actionHash);
    expect(body['action']).toEqual({
      name: 'stripe.refund',
      arguments: { amount: 200000, payment_id: 'p1' },
      principal: { agent: 'refund-agent', user: 'ana@example.com' },
      resource: null,
      environment: 'production',
    });
    expect(text).toContain('"arguments":{"amount":200000,"payment_id":"p1"}'); // canonical: sorted, compact
    expect(body['respond_to']).toBe(`https://gw.example.com/ctrlrun/approvals/${requestId}`);
    const record = (await ctx.store.getApproval(requestId))!;
    expect([body['created_at'], body['expires_at']]).toEqual([record.request.createdAt, record.request.expiresAt]);
    // Without a public URL there is no respond_to (the answer goes through the CLI).
    expect(JSON.parse(approvalRequestJson(record.request))).not.toHaveProperty('respond_to');
  });

  it('the Slack format is {text, blocks}, escapes what the agent chose, and is signed the same way', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const action = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: '<!channel> ```x``` & <http://evil|click>', amount: 200000 },
      principal: { agent: 'refund-agent' },
    });
    const err = (await ctx.control.execute(action, () => 1).catch((e: unknown) => e)) as ApprovalRequired;
    const { p } = provider(ctx, hook.url, { format: 'slack' });
    await p.notify(err.requestId);
    const d = hook.deliveries[0]!;
    expect(verifiedIndependently(d)).toBe(true);
    const body = JSON.parse(d.body.toString('utf8')) as { text: string; blocks: Array<{ text?: { text: string } }> };
    expect(Object.keys(body)).toEqual(['text', 'blocks']);
    expect(body.text).toContain(err.requestId);
    const args = body.blocks[1]!.text!.text;
    expect(args).not.toContain('<!channel>');
    expect(args).toContain('&lt;!channel&gt;');
    expect(args.match(/```/g)).toHaveLength(2); // the agent's backticks cannot close the code block
    expect(args).toContain('\\u0060\\u0060\\u0060x\\u0060\\u0060\\u0060'); // written as JSON escapes of the same string
    expect(args).not.toContain('ˋ'); // not a lookalike: U+02CB in another action's arguments would read the same
    expect(JSON.stringify(body)).toContain(action.actionHash);
  });

  it('the Slack message shows invisible characters the agent chose (bidi overrides, zero-width, C1, separators) as \\u escapes: it reads as hashed', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const action = createAction({
      name: 'stripe.refund',
      arguments: { payment_id: 'in_\u202e0001\u202c', 'amount\u200b': 1, amount: 200000, note: 'a\u2028b\u0085c\u2066d\u{e0041}' },
      principal: { agent: 'refund-agent', user: 'u\u202e1' },
    });
    const err = (await ctx.control.execute(action, () => 1).catch((e: unknown) => e)) as ApprovalRequired;
    const { p } = provider(ctx, hook.url, { format: 'slack' });
    await p.notify(err.requestId);
    const body = JSON.parse(hook.deliveries[0]!.body.toString('utf8')) as { text: string; blocks: Array<{ text?: { text: string } }> };
    const shown = [body.text, ...body.blocks.map((b) => b.text?.text ?? '')].join(' ').replace(/\n/g, ' ');
    expect(shown).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
    const args = body.blocks[1]!.text!.text;
    expect(args).toContain('"amount\\u200b":1');
    expect(args).toContain('in_\\u202e0001\\u202c');
    expect(args).toContain('a\\u2028b\\u0085c\\u2066d\\udb40\\udc41');
    expect(body.text).toContain('refund-agent for u\\u202e1');
    // Inside the code block it is still the hashed arguments' JSON.
    const json = args.slice(args.indexOf('```') + 3, args.lastIndexOf('```'));
    expect(JSON.parse(json)).toEqual(JSON.parse(JSON.stringify(action.canonicalArguments)));
  });

  it('the Slack message shows every argument key however long one argument is: a padded first argument cannot push the amount out of sight', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const action = createAction({
      name: 'stripe.refund',
      arguments: { a: 'x'.repeat(5000), amount: 200000, ['k'.repeat(3000)]: 1, payment_id: 'in_9', __proto__x: [{ deep: 'y'.repeat(900) }] },
      principal: { agent: 'refund-agent' },
    });
    const err = (await ctx.control.execute(action, () => 1).catch((e: unknown) => e)) as ApprovalRequired;
    const { p } = provider(ctx, hook.url, { format: 'slack' });
    await p.notify(err.requestId);
    const body = JSON.parse(hook.deliveries[0]!.body.toString('utf8')) as { blocks: Array<{ text?: { text: string } }> };
    const args = body.blocks[1]!.text!.text;
    expect(args.length).toBeLessThan(3000); // Slack's section limit
    expect(args).toContain('"amount":200000');
    expect(args).toContain('"payment_id":"in_9"');
    expect(args).toContain('"__proto__x":[{"deep":');
    expect(args).toContain(`"${'k'.repeat(200)}…(+2800 characters cut)":1`);
    expect(args).toContain(`"a":"${'x'.repeat(200)}…(+4800 characters cut)"`);
    expect(args).toContain(`"deep":"${'y'.repeat(200)}…(+700 characters cut)"`);
    expect(args).toContain('cut for display');
  });

  /** The Slack body of a request for `args`: every argument section's code, joined, and the sections. */
  async function slackArguments(args: Record<string, unknown>): Promise<{ code: string; sections: string[]; blocks: number }> {
    const ctx = await setup();
    const hook = await receiver();
    const action = createAction({ name: 'stripe.refund', arguments: args as never, principal: { agent: 'refund-agent' } });
    const err = (await ctx.control.execute(action, () => 1).catch((e: unknown) => e)) as ApprovalRequired;
    const { p } = provider(ctx, hook.url, { format: 'slack' });
    await p.notify(err.requestId);
    const body = JSON.parse(hook.deliveries[0]!.body.toString('utf8')) as { blocks: Array<{ type: string; text?: { text: string } }> };
    const sections = body.blocks.filter((b) => b.type === 'section' && b.text!.text.startsWith('*Arguments')).map((b) => b.text!.text);
    for (const t of sections) expect(t.length).toBeLessThanOrEqual(3000); // Slack's section limit
    expect(body.blocks.length).toBeLessThanOrEqual(50); // Slack's block limit
    const code = sections.map((t) => t.slice(t.indexOf('```') + 3, t.lastIndexOf('```'))).join('');
    return { code, sections, blocks: body.blocks.length };
  }

  it('the Slack message shows every key however many there are: amount and payment_id after 400 short keys still show, in more sections', async () => {
    const args: Record<string, unknown> = { amount: 200000, payment_id: 'in_9' };
    for (let i = 0; i < 400; i++) args[`a${String(i).padStart(3, '0')}`] = i; // all sort before "amount"
    const { code, sections } = await slackArguments(args);
    expect(code).toContain('"amount":200000');
    expect(code).toContain('"payment_id":"in_9"');
    expect(sections.length).toBeGreaterThan(1);
    // Nothing was long, so nothing was cut: the sections together are the hashed arguments' JSON.
    expect(JSON.parse(code)).toEqual(args);
  });

  it('the Slack message keeps every key, escaped, next to a huge value: __proto__ and keys with control characters show, the value is cut with the count', async () => {
    // JSON.parse makes __proto__ an own key, as an agent's request body does.
    const args = JSON.parse(
      `{"__proto__":{"polluted":true},"k\\u0007bell":1,"k\\u202eevil":2,"note":"${'z'.repeat(100_000)}","amount":200000,"payment_id":"in_9"}`,
    ) as Record<string, unknown>;
    for (let i = 0; i < 300; i++) args[`b${i}`] = 'v'.repeat(30);
    const { code, sections } = await slackArguments(args);
    expect(code).toContain('"__proto__":{"polluted":true}');
    expect(code).toContain('"k\\u0007bell":1');
    expect(code).toContain('"k\\u202eevil":2');
    expect(code).not.toMatch(/[\p{Cc}\p{Cf}]/u);
    expect(code).toContain('"amount":200000');
    expect(code).toContain('"payment_id":"in_9"');
    expect(code).toMatch(/"note":"z+…\(\+\d+ characters cut\)"/);
    const cut = Number(/"note":"(z+)…\(\+(\d+) characters cut\)"/.exec(code)![2]);
    expect(cut + /"note":"(z+)…/.exec(code)![1]!.length).toBe(100_000);
    for (let i = 0; i < 300; i++) expect(code).toContain(`"b${i}":`);
    expect(sections[0]).toContain('cut for display');
  });

  it('never a second POST for the same request: notify, the sink and wait share one delivery', async () => {
    const ctx = await setup();
    const hook = await receiver();
    const { p } = provider(ctx, hook.url);
    const { requestId } = await needsApproval(ctx);
    const [a, b] = await Promise.all([p.notify(requestId), p.sink.onEvent!({ type: 'APPROVAL_REQUESTED', approvalId: requestId } as never)]);
    expect(a.delivered).toBe(true);
    expect(b).toBeUndefined();
    await p.notify(requestId);
    await ctx.control.denyApproval(requestId, { approver: 'human:ana' });
    await p.wait(requestId);
    expect(hook.deliveries).toHaveLength(1);
  });

  it('request() stores a pending request and POSTs it once; wait() counts the delivery time against its timeout', async () => {
    const ctx = await setup();
    const hook = await receiver(() => {
      ctx.advance(40_000); // a slow delivery, in the test's clock
      return { status: 200 };
    });
    const { p } = provider(ctx, hook.url, { sleep: async (ms) => ctx.advance(ms) });
    const action = createAction({ name: 'stripe.refund', arguments: { payment_id: 'r1', amount: 200000 }, principal: { agent: 'refund-agent' } });
    const request = await p.request(action, 15 * 60_000);
    expect((await ctx.store.getApproval(request.requestId))!.status).toBe('pending');
    expect(hook.deliveries).toHaveLength(1);
    expect(JSON.parse(hook.deliveries[0]!.body.toString('utf8'))).toMatchObject({ request_id: request.requestId, action_hash: action.actionHash });
    // A second request: its delivery takes 40 s of a 30 s wait, so the wait times out at its first look.
    const second = createAction({ name: 'stripe.refund', arguments: { payment_id: 'r2', amount: 200000 }, principal: { agent: 'refund-agent' } });
    const { requestId } = (await ctx.control.execute(second, () => 1).catch((e: unknown) => e)) as ApprovalRequired;
    const started = ctx.clock().getTime();
    await expect(p.wait(requestId, 30_000)).rejects.toMatchObject({ code: 'ERR_APPROVAL_TIMEOUT' });
    expect(ctx.clock().getTime() - started).toBeLessThan(40_010); // not 40 s of delivery + 30 s of waiting
    expect(hook.deliveries).toHaveLength(2);
  });

  it('a 5xx is retried with exponential backoff; still one logical request (same bytes, same request id)', async () => {
    const ctx = await setup();
    const hook = await receiver((n) => ({ status: n < 3 ? 503 : 200 }));
    const { p, sleeps, warnings } = provider(ctx, hook.url);
    const { requestId } = await needsApproval(ctx);
    expect(await p.notify(requestId)).toMatchObject({ delivered: true, attempts: 3, status: 200 });
    expect(sleeps).toEqual([1000, 2000]);
    expect(hook.deliveries).toHaveLength(3);
    expect(new Set(hook.deliveries.map((d) => d.body.toString('hex'))).size).toBe(1);
    expect(new Set(hook.deliveries.map((d) => d.headers['ctrlrun-request-id']))).toEqual(new Set([requestId]));
    expect(hook.deliveries.every((d) => verifiedIndependently(d))).toBe(true);
    expect(warnings).toEqual([]);
  });

  it('a slow receiver times out and is retried; one logical request, delivered once it answers', async () => {
    const ctx = await setup();
    // The first answer would come after 8 s, past the 2 s timeout (wide enough for a loaded machine).
    const hook = await receiver((n) => ({ status: 200, delayMs: n === 1 ? 8000 : 0 }));
    const { p, sleeps } = provider(ctx, hook.url, { timeoutMs: 2000 });
    const { requestId } = await needsApproval(ctx);
    expect(await p.notify(requestId)).toMatchObject({ delivered: true, attempts: 2, status: 200 });
    expect(sleeps).toEqual([1000]);
    expect(hook.deliveries).toHaveLength(2);
    expect(hook.deliveries[0]!.body.equals(hook.deliveries[1]!.body)).toBe(true);
    expect(hook.deliveries[1]!.headers['ctrlrun-request-id']).toBe(requestId);
    await p.notify(requestId);
    expect(hook.deliveries).toHaveLength(2);
  });

  it('total failure is a warning without body or secret; the request stays pending; a 4xx is not retried', async () => {
    const ctx = await setup();
    const down = await receiver(() => ({ status: 500 }));
    const { p, warnings } = provider(ctx, down.url);
    const { requestId } = await needsApproval(ctx);
    expect(await p.notify(requestId)).toMatchObject({ delivered: false, attempts: 3, status: 500 });
    expect(down.deliveries).toHaveLength(3);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(requestId);
    expect(warnings[0]).not.toContain(SECRET);
    expect(warnings[0]).not.toContain('/hook'); // the origin only: a path can be a credential
    expect(warnings[0]).not.toContain('payment_id');
    expect((await ctx.store.getApproval(requestId))!.status).toBe('pending');

    const refusing = await receiver(() => ({ status: 403 }));
    const second = provider(ctx, refusing.url);
    const { requestId: other } = await needsApproval(ctx, 'p2');
    expect(await second.p.notify(other)).toMatchObject({ delivered: false, attempts: 1, status: 403 });
    expect(refusing.deliveries).toHaveLength(1);
  });

  it('refuses a non-https url (http only to loopback, and only with allowInsecure) and a short secret', async () => {
    const ctx = await setup();
    const make = (o: Partial<WebhookOptions>) => () => new WebhookApprovalProvider(ctx.store, { url: 'https://hooks.example.com/x', secret: SECRET, ...o });
    expect(make({})).not.toThrow();
    expect(make({ url: 'http://127.0.0.1:9/x' })).toThrow('must be https');
    expect(make({ url: 'http://hooks.example.com/x', allowInsecure: true })).toThrow('loopback');
    expect(make({ url: 'ftp://hooks.example.com/x' })).toThrow('must be https');
    expect(make({ url: 'not a url' })).toThrow('not a valid URL');
    expect(make({ secret: '' })).toThrow('empty');
    expect(make({ secret: 'x'.repeat(31) })).toThrow('at least 32 bytes');
    expect(make({ format: 'xml' as never })).toThrow("'json' or 'slack'");
  });

  it('a redirect is not followed', async () => {
    const ctx = await setup();
    const target = await receiver();
    const redirecting = createServer((_req, res) => res.writeHead(307, { location: target.url }).end());
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    servers.push(closer(redirecting));
    const { p } = provider(ctx, `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/`);
    const { requestId } = await needsApproval(ctx);
    expect(await p.notify(requestId)).toMatchObject({ delivered: false, attempts: 1, status: 307 });
    expect(target.deliveries).toHaveLength(0);
  });
});

describe('inbound: the signed answer', () => {
  async function answering() {
    const ctx = await setup();
    const { action, requestId } = await needsApproval(ctx);
    const handler = approvalWebhookHandler({ control: ctx.control, secret: SECRET });
    const url = `https://gw.example.com/ctrlrun/approvals/${requestId}`;
    const grant = JSON.stringify({ request_id: requestId, action_hash: action.actionHash, decision: 'grant', approver: 'human:ana' });
    const status = async () => (await ctx.store.getApproval(requestId))!.status;
    return { ctx, action, requestId, handler, url, grant, status };
  }

  it('a correctly signed grant is applied as the named human', async () => {
    const { ctx, handler, url, grant, status, requestId } = await answering();
    const res = await handler(answerRequest(url, grant));
    expect([res.status, await res.json()]).toEqual([200, { status: 'ok', detail: 'granted by human:ana' }]);
    expect(await status()).toBe('granted');
    expect((await ctx.store.getApproval(requestId))!.approver).toBe('human:ana');
    expect(ctx.types()).toContain('APPROVAL_GRANTED');
  });

  it('a tampered body is refused and nothing changes', async () => {
    const { handler, url, grant, status } = await answering();
    const bytes = enc.encode(grant);
    const header = signWebhook(SECRET, Math.floor(T0.getTime() / 1000), bytes);
    const tampered = enc.encode(grant.replace('human:ana', 'human:eve'));
    const res = await handler(new Request(url, { method: 'POST', headers: { 'CTRLRun-Signature': header }, body: tampered }));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ status: 'refused', detail: 'signature refused: the signature does not match the body' });
    expect(await status()).toBe('pending');
  });

  it('an expired (or future) timestamp is refused, even with a valid signature over it', async () => {
    const { handler, url, grant, status } = await answering();
    const now = Math.floor(T0.getTime() / 1000);
    for (const t of [now - 301, now + 301]) {
      const res = await handler(answerRequest(url, grant, SECRET, t));
      expect(res.status).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toContain('outside the 300 s window');
    }
    expect(await status()).toBe('pending');
    expect((await handler(answerRequest(url, grant, SECRET, now - 300))).status).toBe(200); // the edge is inside
  });

  it('a replay changes nothing: the same answer is "already granted", and a captured grant cannot revive a consumed or denied request', async () => {
    const { ctx, action, handler, url, grant, status, requestId } = await answering();
    const captured = answerRequest(url, grant);
    const replay = captured.clone();
    const replayLater = captured.clone();
    expect((await handler(captured)).status).toBe(200);
    const again = await handler(replay);
    expect([again.status, await again.json()]).toEqual([200, { status: 'ok', detail: 'already granted' }]);
    const events = ctx.events.filter((e) => e.type === 'APPROVAL_GRANTED').length;
    expect(events).toBe(1);
    // The agent's call runs once, consuming the approval; the captured grant replayed is refused.
    let runs = 0;
    await ctx.control.execute(
      createAction({ name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 200000 }, principal: { agent: 'refund-agent', user: 'ana@example.com' } }),
      () => ++runs,
      { approvalId: requestId },
    );
    expect(runs).toBe(1);
    const late = await handler(replayLater);
    expect(late.status).toBe(400);
    expect(((await late.json()) as { detail: string }).detail).toContain('consumed');
    expect(await status()).toBe('consumed');
    // A denied request is never revived by a grant either.
    const second = await needsApproval(ctx, 'p9');
    const deny = JSON.stringify({ request_id: second.requestId, action_hash: second.action.actionHash, decision: 'deny', approver: 'human:ana' });
    const u2 = `https://gw.example.com/ctrlrun/approvals/${second.requestId}`;
    expect((await handler(answerRequest(u2, deny))).status).toBe(200);
    const revive = await handler(answerRequest(u2, deny.replace('"deny"', '"grant"')));
    expect(revive.status).toBe(400);
    expect((await ctx.store.getApproval(second.requestId))!.status).toBe('denied');
  });

  it('checks in order, each a 400 with no state change; wrong method 405, no secret 404, huge body 413', async () => {
    const { handler, url, action, requestId, status, ctx } = await answering();
    const ok = { request_id: requestId, action_hash: action.actionHash, decision: 'grant', approver: 'human:ana' };
    const cases: Array<[string, string]> = [
      ['[1,2]', 'JSON object'],
      ['not json', 'not UTF-8 JSON'],
      [JSON.stringify({ ...ok, request_id: 'apr_other' }), 'does not match the path'],
      [JSON.stringify({ ...ok, action_hash: 'sha256:' + '0'.repeat(64) }), 'action_hash'],
      [JSON.stringify({ ...ok, decision: 'approve' }), 'decision'],
      [JSON.stringify({ ...ok, approver: '' }), 'approver'],
      [JSON.stringify({ ...ok, approver: 'human:ana\nhuman:eve' }), 'approver'],
      [JSON.stringify({ ...ok, __proto__: { approver: 'x' }, approver: undefined }), 'approver'],
      ['{"__proto__":{"decision":"grant"},"request_id":"' + requestId + '","action_hash":"' + action.actionHash + '","approver":"h"}', 'decision'],
    ];
    for (const [body, says] of cases) {
      const res = await handler(answerRequest(url, body));
      expect(res.status, body).toBe(400);
      expect(((await res.json()) as { detail: string }).detail, body).toContain(says);
    }
    const unknownUrl = 'https://gw.example.com/ctrlrun/approvals/apr_nope';
    expect((await handler(answerRequest(unknownUrl, JSON.stringify({ ...ok, request_id: 'apr_nope' })))).status).toBe(400);
    expect((await handler(new Request(url, { method: 'GET' }))).status).toBe(405);
    expect((await handler(new Request(url, { method: 'POST', body: 'x' }))).status).toBe(400); // unsigned
    expect((await handler(new Request('https://gw.example.com/elsewhere', { method: 'POST' }))).status).toBe(404);
    expect((await handler(answerRequest(url, 'x'.repeat(70_000)))).status).toBe(413);
    expect((await approvalWebhookHandler({ control: ctx.control, secret: null })(answerRequest(url, JSON.stringify(ok)))).status).toBe(404);
    expect(await status()).toBe('pending');
    expect(() => approvalWebhookHandler({ control: ctx.control, secret: 'short' })).toThrow('at least 32 bytes');
  });
});

describe('signature parsing (property)', () => {
  it('any header string is refused without throwing unless it is the true signature, and any changed byte breaks it', () => {
    const now = new Date(T0);
    const t = Math.floor(T0.getTime() / 1000);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.string({ maxLength: 300 }), fc.nat(), (body, junk, at) => {
        expect(verifyWebhookSignature(SECRET, junk, body, now).ok).toBe(false);
        const header = signWebhook(SECRET, t, body);
        expect(verifyWebhookSignature(SECRET, header, body, now)).toEqual({ ok: true, timestamp: t });
        // Junk before the true signature is harmless unless it carries a t= of its own (refused: repeated).
        const hasT = junk.split(',').some((part) => (part.includes('=') ? part.slice(0, part.indexOf('=')) : part).trim() === 't');
        expect(verifyWebhookSignature(SECRET, `${junk},${header}`, body, now).ok).toBe(!hasT);
        if (body.length > 0) {
          const flipped = Uint8Array.from(body);
          const i = at % body.length;
          flipped[i] = flipped[i]! ^ 1;
          expect(verifyWebhookSignature(SECRET, header, flipped, now).ok).toBe(false);
        }
        expect(verifyWebhookSignature(SECRET, header, Uint8Array.of(...body, 0), now).ok).toBe(false);
      }),
      { numRuns: 300 },
    );
  });
});

describe('end to end', () => {
  it('a person gets a signed webhook for a pending request, answers it, and the agent call runs once', async () => {
    const ctx = await setup();
    // The gateway: the answer handler on a Hono route, served on 127.0.0.1.
    const app = new Hono();
    const handler = approvalWebhookHandler({ control: ctx.control, secret: SECRET, clock: () => new Date() });
    app.post('/ctrlrun/approvals/:id', (c) => handler(c.req.raw));
    const gateway = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => gateway.once('listening', () => resolve()));
    servers.push(() => new Promise<void>((resolve) => gateway.close(() => resolve())));
    const publicUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;

    // The person: verifies the webhook, reads what is asked, and answers at respond_to.
    const answers: Array<{ status: number; body: unknown }> = [];
    const hook = await receiver((_n, d) => {
      if (!verifiedIndependently(d)) return { status: 401 };
      const req = JSON.parse(d.body.toString('utf8')) as {
        request_id: string;
        action_hash: string;
        action: { arguments: { amount: number } };
        respond_to: string;
      };
      expect(req.action.arguments.amount).toBe(200000);
      const body = enc.encode(JSON.stringify({ request_id: req.request_id, action_hash: req.action_hash, decision: 'grant', approver: 'human:ana' }));
      const t = Math.floor(Date.now() / 1000);
      const sig = createHmac('sha256', SECRET).update(`${t}.`).update(body).digest('hex');
      setTimeout(() => {
        void fetch(req.respond_to, { method: 'POST', headers: { 'CTRLRun-Signature': `t=${t},v1=${sig}` }, body }).then(async (r) =>
          answers.push({ status: r.status, body: await r.json() }),
        );
      }, 50);
      return { status: 204 };
    });

    const webhook = new WebhookApprovalProvider(ctx.store, { url: hook.url, secret: SECRET, allowInsecure: true, publicUrl, clock: ctx.clock, pollMs: 20 });
    let runs = 0;
    const refund = protect<{ payment_id: string; amount: number }, string>(
      (a) => {
        runs++;
        return `re_${String(a['payment_id'])}`;
      },
      { control: ctx.control, name: 'stripe.refund', wait: { provider: webhook, timeoutMs: 60_000 } },
    );
    expect(await refund({ payment_id: 'e2e', amount: 200000 })).toBe('re_e2e');
    expect(runs).toBe(1);
    expect(hook.deliveries).toHaveLength(1);
    // The gateway's reply to the person may land just after the call returns.
    await vi.waitFor(() => expect(answers).toHaveLength(1), { timeout: 10_000 });
    expect(answers).toEqual([{ status: 200, body: { status: 'ok', detail: 'granted by human:ana' } }]);
    const receipt = ctx.receipts.at(-1)!.document;
    expect([receipt['result'], receipt['approver']]).toEqual(['committed', 'human:ana']);
    const [record] = await ctx.store.listApprovals();
    expect(record!.status).toBe('consumed');
    // The same person's answer replayed now changes nothing, and nothing runs again.
    const again = await refund({ payment_id: 'e2e', amount: 200000 }, { approvalId: record!.request.requestId }).catch((e: unknown) => e);
    expect(again).not.toBe('re_e2e');
    expect(runs).toBe(1);
  }, 60_000);

  it('a denial answered by webhook: nothing runs', async () => {
    const ctx = await setup();
    const handler = approvalWebhookHandler({ control: ctx.control, secret: SECRET });
    const hook = await receiver(async (_n, d) => {
      const req = JSON.parse(d.body.toString('utf8')) as { request_id: string; action_hash: string };
      const body = JSON.stringify({ request_id: req.request_id, action_hash: req.action_hash, decision: 'deny', approver: 'human:bo' });
      const res = await handler(answerRequest(`https://gw.example.com/ctrlrun/approvals/${req.request_id}`, body));
      expect(res.status).toBe(200);
      return { status: 200 };
    });
    const webhook = new WebhookApprovalProvider(ctx.store, { url: hook.url, secret: SECRET, allowInsecure: true, clock: ctx.clock, pollMs: 10 });
    let runs = 0;
    const refund = protect(() => ++runs, { control: ctx.control, name: 'stripe.refund', wait: { provider: webhook } });
    const err = await refund({ payment_id: 'd1', amount: 200000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ActionDenied);
    expect(runs).toBe(0);
    expect(hook.deliveries).toHaveLength(1);
  });
});
