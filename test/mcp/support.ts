// Shared pieces of the MCP tests: the counting upstream as a real process, the real `ctrlrun`
// command as a real process, an SDK client, and the upstream's log.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ResultSchema, type Result } from '@modelcontextprotocol/sdk/types.js';
import { sha256Tagged } from '@ctrlrun/kernel/store';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const UPSTREAM = fileURLToPath(new URL('./upstream.ts', import.meta.url));
export const CLI = fileURLToPath(new URL('../../packages/cli/src/bin.ts', import.meta.url));
/** `node` with TypeScript sources: the argv prefix that runs a .ts file from this checkout. */
export const NODE_TS = ['--conditions=@ctrlrun/source', '--import', 'tsx'];

export const POLICY = `schema: ctrlrun.policy/v2
actions:
  mcp.pay.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: {amount_lte: 100}
        decision: allow
      - when: {amount_lte: 1000}
        decision: approve
      - decision: deny
  mcp.pay.lookup: {decision: allow}
  mcp.pay.flaky: {effect: "flaky:{id}", decision: allow}
  mcp.pay.bad_params: {effect: "bp:{id}", decision: allow}
  mcp.pay.internal: {effect: "int:{id}", decision: allow}
  mcp.pay.die: {effect: "die:{id}", decision: allow}
  mcp.pay.progress: {effect: "progress:{id}", decision: allow}
  mcp.pay.hang: {effect: "hang:{id}", decision: allow}
  mcp.pay.typed: {effect: "typed:{id}", decision: deny}
  mcp.pay.forged: {effect: "forged:{id}", decision: allow}
`;

const made: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** A fresh directory with the test policy in it, removed after the file's tests. */
export function workDir(policy = POLICY): string {
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-mcp-'));
  made.push(dir);
  writeFileSync(join(dir, 'ctrlrun.yaml'), policy);
  return dir;
}

/** The upstream's log: one entry per tools/call it ran. */
export function upstreamCalls(log: string): { tool: string; arguments: Record<string, unknown> }[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { tool: string; arguments: Record<string, unknown> });
}

/** A running child process whose output is collected. */
export interface Running {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` on stdout (rejects if the process exits first). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(): Promise<number | null>;
}

/** Starts `node <args>` from the repository root. */
export function start(args: string[], env: Record<string, string> = {}, cwd = ROOT): Running {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => void (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => void (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const started = Date.now();
        const tick = () => {
          const m = out.match(pattern);
          if (m) return resolve(m);
          if (child.exitCode !== null || child.signalCode !== null)
            return reject(new Error(`the process exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}\nstdout:\n${out}\nstderr:\n${err}`));
          if (Date.now() - started > timeoutMs) return reject(new Error(`no ${pattern} within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`));
          setTimeout(tick, 25);
        };
        tick();
      });
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The counting upstream over Streamable HTTP, as its own process. */
export async function startHttpUpstream(log: string): Promise<{ url: string; process: Running }> {
  const p = start([...NODE_TS, UPSTREAM, '--http'], { UPSTREAM_LOG: log });
  const m = await p.waitFor(/listening (\S+)/);
  return { url: m[1]!, process: p };
}

/** An SDK client (the agent) connected over Streamable HTTP. */
export async function httpAgent(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** A ctrlrun refusal read from a tool-error result: its code, its fields (`data.error` the token) and its text. */
export interface Refused {
  code: number;
  data: Record<string, unknown>;
  text: string;
}

/** The refusal a tools/call result carries (`isError` with `_meta["com.ctrlrun/refusal"]`), or undefined. */
export function refusedOf(result: Result | undefined): Refused | undefined {
  if (result?.['isError'] !== true) return undefined;
  const fields = (result._meta as Record<string, unknown> | undefined)?.['com.ctrlrun/refusal'] as Record<string, unknown> | undefined;
  if (fields === undefined) return undefined;
  const { code, ...data } = fields;
  const content = result['content'] as { type: string; text?: string }[];
  return { code: code as number, data, text: content.map((c) => c.text ?? '').join('') };
}

/**
 * Sends tools/call as the agent; resolves to the result (with `refused` when it is a ctrlrun
 * refusal) or to the JSON-RPC error.
 */
export async function call(client: Client, name: string, args: unknown): Promise<{ result?: Result; error?: McpError; refused?: Refused }> {
  try {
    const result = await client.request({ method: 'tools/call', params: { name, arguments: args as Record<string, unknown> } }, ResultSchema, {
      timeout: 120_000,
    });
    const refused = refusedOf(result);
    return refused === undefined ? { result } : { result, refused };
  } catch (error) {
    if (error instanceof McpError) return { error };
    throw error;
  }
}

/** `data.error` of a refusal (a tool error's fields, or a JSON-RPC error's data). */
export function token(error: { data?: unknown } | undefined): unknown {
  return (error?.data as { error?: unknown } | undefined)?.error;
}

/** The store's receipt documents, in chain order. */
export async function receiptDocs(store: { receipts(): Promise<{ json: string | null }[]> }): Promise<Record<string, unknown>[]> {
  return (await store.receipts()).map((r) => JSON.parse(r.json ?? 'null') as Record<string, unknown>);
}

/** What went wrong with a call: its JSON-RPC error or its ctrlrun refusal (undefined when the tool ran). */
export function failure(r: { error?: McpError; refused?: Refused }): McpError | Refused | undefined {
  return r.error ?? r.refused;
}

/**
 * A self-signed certificate for 127.0.0.1 made by openssl in `dir` (`<name>.key`, `<name>.pem`),
 * with the digest a `tls_cert_sha256` pin names for it.
 */
export function selfSignedCertificate(dir: string, name = 'tls'): { key: string; cert: string; digest: string } {
  const key = join(dir, `${name}.key`);
  const cert = join(dir, `${name}.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    {
      stdio: 'ignore',
    },
  );
  return { key, cert, digest: sha256Tagged(new Uint8Array(new X509Certificate(readFileSync(cert)).raw)) };
}
