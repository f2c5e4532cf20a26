// fromFile(): a Control composed the way the CLI finds things — $CTRLRUN_CONFIG, $CTRLRUN_STATE,
// the JSONL files in the state directory, the policy's inline authority, $CTRLRUN_ENVIRONMENT.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { ActionDenied, ApprovalRequired, InvalidArgument, PolicyError, protect, type EventRecord } from '@ctrlrun/kernel';
import { otelSink } from '@ctrlrun/kernel/otel';
import { WebhookApprovalProvider } from '@ctrlrun/kernel/webhook';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { FileControl, fromFile, jsonlFileSink, openStore, policyFilePath, stateFilePath } from '@ctrlrun/store-node';

const POLICY = `schema: ctrlrun.policy/v3
environment: staging
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 1000 }
        decision: allow
      - decision: deny
authority:
  grants:
    - id: support
      subject: { agent: support-agent }
      actions: [stripe.refund]
      expires_at: "2099-01-01T00:00:00Z"
`;

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) rmSync(dirs.pop()!, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'ctrlrun-fromfile-'));
  dirs.push(d);
  return d;
}
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('fromFile', () => {
  it('finds ./ctrlrun.yaml and .ctrlrun/state.db beside it, writes the JSONL files there, with the inline authority', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), POLICY);
    const control = await fromFile({ cwd, env: {}, principal: { agent: 'support-agent' } });
    expect(control).toBeInstanceOf(FileControl);
    expect(control.policyPath).toBe(join(cwd, 'ctrlrun.yaml'));
    expect(control.stateDir).toBe(join(cwd, '.ctrlrun'));
    expect(control.authority).not.toBeNull();
    expect(control.environment).toBe('staging'); // the policy's, with no $CTRLRUN_ENVIRONMENT
    const refund = protect((a: { payment_id: string; amount: number }) => ({ id: `re_${a.payment_id}` }), { control, name: 'stripe.refund' });
    expect(await refund({ payment_id: 'p1', amount: 500 })).toEqual({ id: 're_p1' });
    // Another agent has no grant: the inline authority is in force.
    await expect(refund({ payment_id: 'p2', amount: 500 }, { principal: { agent: 'stranger' } })).rejects.toMatchObject({ reason: 'no_authority' });
    await control.close();
    await control.close(); // idempotent

    const events = lines(join(cwd, '.ctrlrun', 'events.jsonl'));
    expect(events.map((e) => e['type'])).toContain('AUTHORITY_RESOLVED');
    expect(events.map((e) => e['type'])).toContain('AUTHORITY_DENIED');
    expect(lines(join(cwd, '.ctrlrun', 'receipts.jsonl')).map((r) => r['result'])).toEqual(['committed', 'denied']);
    // The store it opened is closed, and it is the one the CLI would read.
    const store = await openStore(join(cwd, '.ctrlrun', 'state.db'), { readOnly: true });
    expect((await store.receipts()).length).toBe(2);
    await store.close();
  });

  it('reads $CTRLRUN_CONFIG, $CTRLRUN_STATE and $CTRLRUN_ENVIRONMENT as the CLI does', async () => {
    const cwd = tempDir();
    mkdirSync(join(cwd, 'conf'));
    writeFileSync(join(cwd, 'conf', 'policy.yaml'), POLICY);
    const env = { CTRLRUN_CONFIG: 'conf/policy.yaml', CTRLRUN_STATE: 'var/ctl.db', CTRLRUN_ENVIRONMENT: 'eu-prod' };
    expect(policyFilePath({ cwd, env })).toBe(join(cwd, 'conf', 'policy.yaml'));
    expect(stateFilePath({ cwd, env })).toBe(join(cwd, 'var', 'ctl.db'));
    expect(stateFilePath({ cwd, env: { CTRLRUN_CONFIG: 'conf/policy.yaml' } })).toBe(join(cwd, 'conf', '.ctrlrun', 'state.db'));
    const events: EventRecord[] = [];
    const control = await fromFile({ cwd, env, principal: { agent: 'support-agent' }, sinks: [{ onEvent: (e) => void events.push(e) }] });
    expect(control.environment).toBe('eu-prod');
    const action = await protect(() => null, { control, name: 'stripe.refund' }).action({ payment_id: 'p1', amount: 1 });
    expect(action.environment).toBe('eu-prod');
    await protect(() => null, { control, name: 'stripe.refund' })({ payment_id: 'p1', amount: 1 });
    await control.close();
    expect(existsSync(join(cwd, 'var', 'ctl.db'))).toBe(true);
    // The JSONL sink comes first, the given sinks after it: both saw every event.
    expect(lines(join(cwd, 'var', 'events.jsonl')).length).toBe(events.length);
    expect(events.length).toBeGreaterThan(3);
  });

  it('a set-but-blank variable, a missing policy or a bad option is refused before anything is created', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), POLICY);
    await expect(fromFile({ cwd, env: { CTRLRUN_CONFIG: '  ' } })).rejects.toThrow(PolicyError);
    await expect(fromFile({ cwd, env: { CTRLRUN_STATE: '' } })).rejects.toThrow(/CTRLRUN_STATE is set but blank/);
    await expect(fromFile({ cwd, env: { CTRLRUN_ENVIRONMENT: ' ' } })).rejects.toThrow(InvalidArgument);
    await expect(fromFile({ cwd, env: { CTRLRUN_CONFIG: 'nope.yaml' } })).rejects.toThrow(/no policy at .*nope\.yaml/);
    await expect(fromFile({ cwd: '' })).rejects.toThrow(InvalidArgument);
    await expect(fromFile(null as never)).rejects.toThrow(InvalidArgument);
    expect(existsSync(join(cwd, '.ctrlrun'))).toBe(false);
  });

  it('a store you pass stays open and gets no JSONL files unless you name the directory', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), POLICY);
    const store = await createSqlJsStore();
    const control = await fromFile({ cwd, env: {}, store, principal: { agent: 'support-agent' } });
    expect(control.stateDir).toBeNull();
    await expect(protect(() => null, { control, name: 'stripe.refund' })({ payment_id: 'p1', amount: 99999 })).rejects.toThrow(ActionDenied);
    await control.close();
    expect((await store.receipts()).length).toBe(1); // still open
    expect(existsSync(join(cwd, '.ctrlrun'))).toBe(false);
    const named = await fromFile({ cwd, env: {}, store, stateDir: 'logs', principal: { agent: 'support-agent' } });
    await protect(() => null, { control: named, name: 'stripe.refund' })({ payment_id: 'p3', amount: 1 });
    await named.close();
    expect(lines(join(cwd, 'logs', 'receipts.jsonl')).length).toBe(1);
    await store.close();
  });

  it('jsonl: false writes no files beside the store', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), POLICY);
    const control = await fromFile({ cwd, env: {}, jsonl: false, principal: { agent: 'support-agent' } });
    await protect(() => null, { control, name: 'stripe.refund' })({ payment_id: 'p1', amount: 1 });
    await control.close();
    expect(existsSync(join(cwd, '.ctrlrun', 'state.db'))).toBe(true);
    expect(existsSync(join(cwd, '.ctrlrun', 'events.jsonl'))).toBe(false);
  });
});

describe('fromFile composes with the webhook provider and the OpenTelemetry sink (the README example)', () => {
  it('one request: a signed POST to the person, a span, and the JSONL line, from one Control', async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'ctrlrun.yaml'), POLICY.replace('decision: deny', 'decision: approve'));
    const bodies: string[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        bodies.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const exporter = new InMemorySpanExporter();
      const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      // As the README writes it: the store fromFile would find, opened first so the webhook can use it.
      const statePath = stateFilePath({ cwd, env: {} });
      mkdirSync(dirname(statePath), { recursive: true });
      const store = await openStore(statePath);
      const webhook = new WebhookApprovalProvider(store, {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
        secret: 'a-test-secret-that-is-at-least-32-bytes-long',
        allowInsecure: true,
      });
      const control = await fromFile({
        cwd,
        env: {},
        store,
        stateDir: dirname(statePath),
        principal: { agent: 'support-agent' },
        sinks: [webhook.sink, otelSink({ tracerProvider })],
      });
      const err = await protect(() => 'ran', { control, name: 'stripe.refund' })({ payment_id: 'p9', amount: 50000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalRequired);
      const id = (err as ApprovalRequired).requestId;
      for (let i = 0; i < 500 && bodies.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(bodies).toHaveLength(1);
      expect(JSON.parse(bodies[0]!)).toMatchObject({ request_id: id });
      expect(exporter.getFinishedSpans().map((sp) => sp.attributes['ctrlrun.result'])).toContain('approval_required');
      await control.close();
      expect(lines(join(cwd, '.ctrlrun', 'events.jsonl')).map((e) => e['type'])).toContain('APPROVAL_REQUESTED');
      await store.close();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('jsonlFileSink refuses what is not a regular file', () => {
  it('a FIFO planted as events.jsonl is refused at once, never waited on', () => {
    const dir = tempDir();
    const r = spawnSync('mkfifo', [join(dir, 'events.jsonl')]);
    if (r.status !== 0) {
      console.warn(`skipped: mkfifo is not available here (${String(r.error ?? r.stderr)})`);
      return;
    }
    const sink = jsonlFileSink(dir);
    const event = {
      eventId: 1,
      ts: '2026-01-01T00:00:00.000Z',
      type: 'ACTION_PROPOSED',
      actionId: 'act_1',
      effectKey: null,
      approvalId: null,
      data: {},
    } as EventRecord;
    // Before the fix, opening the FIFO for append blocked this thread forever.
    expect(() => sink.onEvent!(event)).toThrow(/events\.jsonl cannot be appended to: .*not a regular file/);
    mkdirSync(join(dir, 'receipts.jsonl'));
    expect(() => sink.onReceipt!({ receiptId: 'ctr_1', json: '{}' } as never)).toThrow(/receipts\.jsonl cannot be appended to/);
    sink.close();
  });
});
