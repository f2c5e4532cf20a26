/**
 * The Durable Object store beside the platform's own tables, in workerd (miniflare): an object
 * whose KV API and alarm were used before the store ever opened holds `_cf_KV` and
 * `_cf_METADATA`, and with miniflare's local explorer on (as under `wrangler dev`) every
 * SQLite-backed object also holds `__miniflare_do_name`. The Cloudflare entry, run as
 * examples/cloudflare/wrangler.toml declares it, opens its store on such an object and works (a
 * refund runs once against a counting upstream, its repeat is refused, the KV value is still
 * there); an object that also holds a table of someone else's schema is still refused, naming
 * that table and not the platform's.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs example without types
import { startFakeUpstream } from '../../examples/worker/fake-upstream.mjs';
import { bundleWorkerdModule, root } from './bundle.js';

interface Upstream {
  url: string;
  calls(): number;
  close(): Promise<void>;
}

const TIMEOUT = 300_000;
const AGENT = 'agent-token-for-platform-tables';
const OPERATOR = 'operator-token-for-platform-t';

let upstream: Upstream;
let mf: Miniflare;

beforeAll(async () => {
  upstream = (await startFakeUpstream(0, '127.0.0.1')) as Upstream;
  const { parse } = await import('smol-toml');
  const toml = parse(await readFile(join(root, 'examples', 'cloudflare', 'wrangler.toml'), 'utf8')) as {
    compatibility_date: string;
    vars: Record<string, string>;
  };
  const bundle = await bundleWorkerdModule('test/worker/durable-object/platform-tables-entry.ts', 'do-platform-tables');
  const bindings = {
    ...toml.vars,
    CTRLRUN_CONFIG: toml.vars['CTRLRUN_CONFIG']!.replace('https://billing.example.com', upstream.url),
    CTRLRUN_AGENT_TOKEN: AGENT,
    CTRLRUN_OPERATOR_TOKEN: OPERATOR,
    UPSTREAM_TOKEN: 'upstream-secret',
  };
  // Two Worker scripts on one Durable Object class, each routing to its own object by name.
  const worker = (name: string, storeName: string, owner: boolean) => ({
    name,
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: [],
    modules: [{ type: 'ESModule' as const, path: bundle.scriptPath, contents: bundle.script }],
    bindings: { ...bindings, CTRLRUN_STORE_NAME: storeName },
    durableObjects: { CTRLRUN_STORE: { className: 'ProbedCtrlrunStore', useSQLite: true, ...(owner ? {} : { scriptName: 'kv-first' }) } },
  });
  // The local explorer wraps every SQLite-backed class, as `wrangler dev` does: `__miniflare_do_name`.
  mf = new Miniflare({ unsafeLocalExplorer: true, workers: [worker('kv-first', 'default', true), worker('foreign', 'someone-else', false)] });
  await mf.ready;
}, TIMEOUT);

afterAll(async () => {
  await mf?.dispose();
  await upstream?.close();
});

async function call(isolate: string, path: string, init: { method?: string; token?: string; body?: unknown } = {}) {
  const w = (await mf.getWorker(isolate)) as unknown as { fetch(url: string, init: RequestInit): Promise<Response> };
  const r = await w.fetch(`http://ctrlrun.invalid${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe('the Durable Object store beside the platform tables (miniflare, local explorer on)', () => {
  it(
    "opens on an object whose KV API and alarm were used first (_cf_KV, _cf_METADATA, __miniflare_do_name), works, and leaves the object's KV data alone",
    async () => {
      expect((await call('kv-first', '/__probe/setup', { method: 'POST' })).status).toBe(200);
      const before = (await call('kv-first', '/__probe/state')).json;
      expect(before['tables']).toEqual(expect.arrayContaining(['_cf_KV', '_cf_METADATA', '__miniflare_do_name']));
      expect(before['tables']).not.toContain('effects');

      const health = await call('kv-first', '/healthz');
      expect(health.status, JSON.stringify(health.json)).toBe(200);
      const refund = { name: 'billing.refund', arguments: { payment_id: 'kv_1', amount: 500 } };
      const first = await call('kv-first', '/v1/actions', { token: AGENT, body: refund });
      expect(first.status, JSON.stringify(first.json)).toBe(200);
      expect(upstream.calls()).toBe(1);
      const again = await call('kv-first', '/v1/actions', { token: AGENT, body: refund });
      expect(again.status).toBe(409);
      expect((again.json['error'] as { code: string }).code).toBe('ERR_DUPLICATE_EFFECT');
      expect(upstream.calls()).toBe(1);
      const verify = await call('kv-first', '/v1/receipts/verify', { token: OPERATOR });
      expect(verify.json).toMatchObject({ ok: true, breaks: [] });

      const after = (await call('kv-first', '/__probe/state')).json;
      expect(after['tables']).toEqual(expect.arrayContaining(['_cf_KV', '_cf_METADATA', '__miniflare_do_name', 'effects', 'receipts', 'schema_version']));
      expect(after['greeting']).toBe('kept beside the store');
    },
    TIMEOUT,
  );

  it(
    "still refuses an object that holds someone else's table beside the platform's, naming only that table; nothing is created",
    async () => {
      expect((await call('foreign', '/__probe/setup?foreign=invoices', { method: 'POST' })).status).toBe(200);
      const health = await call('foreign', '/healthz');
      expect(health.status).toBe(503);
      const message = (health.json['error'] as { message: string }).message;
      expect(message).toContain('not a ctrlrun store');
      expect(message).toContain('its tables (invoices)');
      expect(message).not.toMatch(/_cf_|__miniflare_/);
      const state = (await call('foreign', '/__probe/state')).json;
      expect(state['tables']).toEqual(['__miniflare_do_name', '_cf_KV', '_cf_METADATA', 'invoices']);
      const refused = await call('foreign', '/v1/actions', { token: AGENT, body: { name: 'billing.refund', arguments: { payment_id: 'kv_2', amount: 5 } } });
      expect(refused.status).toBe(503);
      expect(upstream.calls()).toBe(1);
    },
    TIMEOUT,
  );
});
