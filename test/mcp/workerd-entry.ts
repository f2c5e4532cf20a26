// A workerd module worker for the MCP test: the gateway (kernel + sql.js + the MCP SDK) behind the
// Web-standard handler, in front of the upstream the test names in the UPSTREAM_URL binding.
// Bundled by test/mcp/workerd.test.ts and run by miniflare with Node compatibility off.
import initSqlJs from 'sql.js';
import sqlWasm from 'sql.js/dist/sql-wasm-browser.wasm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Control, loadPolicy } from '@ctrlrun/kernel';
import { Gateway, mcpFetchHandler } from '@ctrlrun/mcp';
import { createSqlJsStore, type SqlJsModule } from '@ctrlrun/store-sqljs';

const scope = globalThis as { location?: unknown };
scope.location ??= { href: 'https://ctrlrun.invalid/' };

interface Env {
  UPSTREAM_URL: string;
  POLICY: string;
}

let control: Promise<Control> | undefined;

function controlFor(env: Env): Promise<Control> {
  return (control ??= (async () => {
    const SQL = initSqlJs({
      instantiateWasm(imports, receive) {
        void WebAssembly.instantiate(sqlWasm, imports).then((instance) => receive(instance));
        return {};
      },
    }) as Promise<unknown> as Promise<SqlJsModule>;
    const store = await createSqlJsStore({ SQL });
    return new Control({ policy: loadPolicy(env.POLICY), store, logger: { warn: () => {} } });
  })().catch((err: unknown) => {
    control = undefined;
    throw err;
  }));
}

export default {
  // workerd lets no I/O object outlive its request, so each request gets its own upstream
  // connection (and gateway); the Control and its in-memory store are shared.
  async fetch(request: Request, env: Env): Promise<Response> {
    const upstream = new Client({ name: 'ctrlrun-edge-gateway', version: '0.1.0' });
    try {
      await upstream.connect(new StreamableHTTPClientTransport(new URL(env.UPSTREAM_URL)));
      const gateway = new Gateway({ control: await controlFor(env), upstream, alias: 'pay', principal: { agent: 'edge-agent' } });
      return await mcpFetchHandler({ createServer: () => gateway.createServer() })(request);
    } catch (err) {
      return new Response(err instanceof Error ? `${err.name}: ${err.message}` : String(err), { status: 500 });
    } finally {
      await upstream.close().catch(() => {});
    }
  },
};
