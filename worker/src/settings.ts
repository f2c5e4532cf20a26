/**
 * The worker's own configuration: which policy it serves, who runs each action, and who may call.
 * Read from a config document (YAML or JSON; `--config PATH` / `CTRLRUN_CONFIG_FILE` on Node and
 * Deno, `CTRLRUN_CONFIG` text on any runtime, a binding on workerd) and from the environment
 * (`CTRLRUN_POLICY` text, `CTRLRUN_POLICY_FILE` path, the token variables of `config.ts`).
 * Secrets never sit in the document: a token or a header value names the variable that holds it
 * (`{ env: NAME }`).
 *
 * ```yaml
 * policy: ./policy.yaml               # relative to this file; or { yaml: "…" } inline
 * executors:
 *   billing.refund:
 *     http:
 *       url: https://billing.internal/refunds
 *       method: POST                  # POST (default), PUT, PATCH, DELETE
 *       headers:
 *         authorization: { env: BILLING_TOKEN, prefix: "Bearer " }
 *       timeoutMs: 10000
 *       notExecutedStatuses: [409]    # replies that mean "refused, nothing done"
 *   notes.write:
 *     module: ./tools.mjs             # Node and Deno only
 *     export: writeNote               # default: default
 * tokens:                             # default: CTRLRUN_AGENT_TOKEN / CTRLRUN_OPERATOR_TOKEN
 *   agents: [{ token: { env: AGENT_TOKEN }, agent: refund-agent, user: alice }]
 *   operators: [{ token: { env: OPS_TOKEN }, operator: "human:ops", roles: [finance] }]
 * approvers:                          # operators are verified approvers (approvals_required > 1,
 *   rolesClaim: roles                 # approver_role); a static operator's roles are its `roles`
 * jwt:                                # agents may also present JWTs
 *   issuer: https://idp.example
 *   audience: ctrlrun-worker
 *   algorithms: [ES256]
 *   publicKey: { env: JWT_PUBLIC_KEY }  # or jwksUrl: https://…, or secret: { env: … }
 *   tokenType: jwt
 *   claimNames: [team]
 * operatorJwt:                        # operators may present JWTs too: the same keys, another
 *   issuer: https://idp.example       # audience (or issuer) than jwt:, so that no agent's token
 *   audience: ctrlrun-operators       # is an operator's; the roles claim among its claimNames
 *   algorithms: [ES256]
 *   jwksUrl: https://idp.example/.well-known/jwks.json
 *   claimNames: [roles]
 * environment: production
 * demo: off
 * cors: [https://app.example]
 * mcp:                                # the MCP gateway at /mcp/<name> (and /mcp for a sole upstream)
 *   upstreams:
 *     - name: pay                     # tools become the actions mcp.pay.<tool>
 *       url: https://mcp.billing.internal/mcp
 *       headers:
 *         authorization: { env: PAY_MCP_TOKEN, prefix: "Bearer " }
 *       timeoutMs: 30000              # one upstream request; past it the outcome is unknown
 * ```
 *
 * Every refusal is an `InvalidArgument` naming the document and the key path
 * (`worker.yaml: executors["billing.refund"].http.url: …`). Web-standard globals only: the
 * entry points hand in how to read a file and import a module.
 *
 * @module
 */
import { parseDocument } from 'yaml';
import { httpAnchorProvider, InvalidArgument, loadPolicy, maskUrl, type AnchorProvider, type IdentityProvider, type Policy } from '@ctrlrun/kernel';
import { ALIAS_PATTERN } from '@ctrlrun/mcp';
import { TRY_IT_POLICY_YAML } from '@ctrlrun/kernel/try-it';
import { anyOf, identityProviderAuth, identityProviderOperators, staticTokens, type Authenticator, type StaticToken } from './auth.js';
import type { CorsOptions, McpOptions } from './app.js';
import { httpForwarder, type ActionExecutor, type HttpForwarderOptions } from './executors.js';
import { envCorsOrigins, envDemo, envText, envToken, envTokens, type WorkerEnv } from './config.js';

/** A secret's value: the variable (or binding) that holds it. */
export interface SecretRef {
  env: string;
  /** Put before the value (e.g. `Bearer `). */
  prefix?: string;
}

/** One action's executor, as the document declares it. */
export type ExecutorDeclaration =
  | {
      kind: 'http';
      url: string;
      method: NonNullable<HttpForwarderOptions['method']>;
      headers: Record<string, string | SecretRef>;
      timeoutMs: number;
      notExecutedStatuses: number[];
    }
  | { kind: 'module'; module: string; export: string };

/** JWT settings, as the document declares them (secrets still as references). */
export interface JwtDeclaration {
  issuer: string;
  audience: string;
  algorithms: string[];
  tokenType: string | null;
  jwksUrl?: string;
  publicKey?: SecretRef;
  secret?: SecretRef;
  agentClaim?: string;
  userClaim?: string | null;
  claimNames?: string[];
  header?: string;
}

/** One upstream MCP server, as the document declares it (secrets still as references). */
export interface McpUpstreamDeclaration {
  /** The alias: its tools become the actions `mcp.<name>.<tool>`, served at `/mcp/<name>`. */
  name: string;
  url: string;
  headers: Record<string, string | SecretRef>;
  timeoutMs: number;
}

/** A checked config document. */
export interface WorkerFileConfig {
  /** Where it came from (for messages and relative paths). */
  source: string;
  policy: { file: string } | { yaml: string } | null;
  executors: Map<string, ExecutorDeclaration>;
  tokens: {
    agents: { token: SecretRef; agent: string; user: string | null }[];
    operators: { token: SecretRef; operator: string; roles: string[] | null }[];
  } | null;
  jwt: JwtDeclaration | null;
  /** `operatorJwt:` — operators vouched for by JWTs (another audience or issuer than `jwt:`), or null. */
  operatorJwt: JwtDeclaration | null;
  /** `approvers:` — how approvers are verified (the Control's `approvers` option), or null. */
  approvers: { rolesClaim: string | null } | null;
  environment: string | null;
  demo: boolean | null;
  cors: string[] | null;
  /** `mcp:` — the upstream MCP servers the gateway at `/mcp` fronts, or null: no gateway. */
  mcp: { upstreams: McpUpstreamDeclaration[] } | null;
}

const TOP_KEYS = ['policy', 'executors', 'tokens', 'jwt', 'operatorJwt', 'environment', 'demo', 'cors', 'approvers', 'mcp'];
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Header names that carry credentials: their values must come from a variable. */
const SECRET_HEADER = /auth|token|secret|key|cookie|signature|password|session/i;
/** Headers the MCP client sets itself (the transport, the session, the protocol revision). */
const MCP_RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'host',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'transfer-encoding',
  'connection',
]);
/** Headers the forwarder sets itself: a config may not replace them. */
const RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'host',
  'idempotency-key',
  'x-ctrlrun-action-id',
  'x-ctrlrun-action-hash',
  'transfer-encoding',
  'connection',
]);

function key(path: string, k: string): string {
  if (path === '') return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : `[${JSON.stringify(k)}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`;
}

class Reader {
  constructor(readonly source: string) {}
  fail(path: string, message: string): never {
    throw new InvalidArgument(path === '' ? `${this.source}: the document ${message}` : `${this.source}: ${path}: ${message}`);
  }
  object(v: unknown, path: string, allowed: readonly string[] | null): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) this.fail(path, `must be a mapping, got ${describe(v)}`);
    const o = v as Record<string, unknown>;
    if (allowed) for (const k of Object.keys(o)) if (!allowed.includes(k)) this.fail(key(path, k), `unknown key (expected one of ${allowed.join(', ')})`);
    return o;
  }
  string(v: unknown, path: string): string {
    if (typeof v !== 'string' || v.trim() === '') this.fail(path, `must be a non-empty string, got ${describe(v)}`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(v)) this.fail(path, 'must not contain control characters');
    return v;
  }
  optionalString(v: unknown, path: string): string | undefined {
    return v === undefined ? undefined : this.string(v, path);
  }
  integer(v: unknown, path: string, min: number, max: number): number {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
      this.fail(path, `must be a whole number from ${min} to ${max}, got ${describe(v)}`);
    return v;
  }
  stringList(v: unknown, path: string): string[] {
    if (!Array.isArray(v)) this.fail(path, `must be a list of strings, got ${describe(v)}`);
    return v.map((s, i) => this.string(s, `${path}[${i}]`));
  }
  secret(v: unknown, path: string): SecretRef {
    if (typeof v === 'string') this.fail(path, `must name the variable that holds the secret ({ env: NAME }), never the secret itself`);
    const o = this.object(v, path, ['env', 'prefix']);
    const env = this.string(o['env'], `${path}.env`);
    if (!ENV_NAME.test(env)) this.fail(`${path}.env`, `${JSON.stringify(env)} is not a variable name (letters, digits, _)`);
    const prefix = o['prefix'];
    if (prefix !== undefined && typeof prefix !== 'string') this.fail(`${path}.prefix`, `must be a string, got ${describe(prefix)}`);
    return prefix === undefined ? { env } : { env, prefix };
  }
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return v.length > 60 ? `a string of ${v.length} characters` : JSON.stringify(v);
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${String(v)}`;
}

/** YAML (JSON is YAML): duplicate keys, aliases past a small budget and custom tags refused. */
function readDocument(text: string, source: string): unknown {
  if (typeof text !== 'string') throw new InvalidArgument(`${source}: the config must be text`);
  if (text.length > 1024 * 1024) throw new InvalidArgument(`${source}: the config is larger than 1 MiB`);
  const doc = parseDocument(text, { uniqueKeys: true, strict: true, prettyErrors: true, version: '1.2', schema: 'core' });
  const problem = doc.errors[0] ?? doc.warnings[0];
  if (problem) {
    const line = problem.linePos?.[0]?.line;
    throw new InvalidArgument(`${source}${line ? ` (line ${line})` : ''}: not a valid YAML or JSON document: ${problem.message.split('\n')[0]}`);
  }
  try {
    return doc.toJS({ maxAliasCount: 50 });
  } catch (err) {
    throw new InvalidArgument(`${source}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** An absolute http(s) URL without credentials in it (`fix` says where they go instead). */
function httpUrl(r: Reader, v: unknown, path: string, fix: string): string {
  const url = r.string(v, path);
  if (!URL.canParse(url) || !['http:', 'https:'].includes(new URL(url).protocol))
    r.fail(path, `${JSON.stringify(maskUrl(url))} is not an absolute http(s) URL`);
  else if (new URL(url).username !== '' || new URL(url).password !== '')
    r.fail(path, `${JSON.stringify(maskUrl(url))} holds credentials (user:password@ before the host), which fetch refuses to send: ${fix}`);
  return url;
}

/** Extra request headers: a credential's value names its variable; `reserved` are the sender's own (`who` sets them). */
function parseHeaders(r: Reader, v: unknown, path: string, reserved: ReadonlySet<string>, who: string): Record<string, string | SecretRef> {
  const headers = Object.create(null) as Record<string, string | SecretRef>;
  if (v === undefined) return headers;
  const given = r.object(v, path, null);
  for (const [name, value] of Object.entries(given)) {
    const at = key(path, name);
    if (!HEADER_NAME.test(name)) r.fail(at, 'is not a valid header name');
    if (reserved.has(name.toLowerCase())) r.fail(at, `is set by ${who} itself`);
    if (Object.keys(headers).some((n) => n.toLowerCase() === name.toLowerCase())) r.fail(at, 'is given twice (header names ignore case)');
    // A header that carries a credential must name its variable: a literal would sit in the file.
    headers[name] = typeof value === 'string' && !SECRET_HEADER.test(name) ? r.string(value, at) : r.secret(value, at);
  }
  return headers;
}

function parseExecutor(r: Reader, v: unknown, path: string): ExecutorDeclaration {
  const o = r.object(v, path, ['http', 'module', 'export']);
  if ('http' in o === 'module' in o) r.fail(path, 'declare exactly one of http: { url, … } or module: PATH');
  if ('module' in o) {
    const exported = r.optionalString(o['export'], `${path}.export`) ?? 'default';
    return { kind: 'module', module: r.string(o['module'], `${path}.module`), export: exported };
  }
  if ('export' in o) r.fail(`${path}.export`, 'belongs with module:, not http:');
  const h = r.object(o['http'], `${path}.http`, ['url', 'method', 'headers', 'timeoutMs', 'notExecutedStatuses']);
  const url = httpUrl(r, h['url'], `${path}.http.url`, 'put them in headers (Authorization)');
  const method = h['method'] === undefined ? 'POST' : r.string(h['method'], `${path}.http.method`);
  if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) r.fail(`${path}.http.method`, `must be POST, PUT, PATCH or DELETE, got ${JSON.stringify(method)}`);
  const headers = parseHeaders(r, h['headers'], `${path}.http.headers`, RESERVED_HEADERS, 'the forwarder');
  const timeoutMs = h['timeoutMs'] === undefined ? 10_000 : r.integer(h['timeoutMs'], `${path}.http.timeoutMs`, 1, 600_000);
  const statuses = h['notExecutedStatuses'] === undefined ? [] : h['notExecutedStatuses'];
  if (!Array.isArray(statuses)) r.fail(`${path}.http.notExecutedStatuses`, `must be a list of HTTP statuses, got ${describe(statuses)}`);
  const notExecutedStatuses = statuses.map((s, i) => r.integer(s, `${path}.http.notExecutedStatuses[${i}]`, 300, 599));
  return { kind: 'http', url, method: method as 'POST' | 'PUT' | 'PATCH' | 'DELETE', headers, timeoutMs, notExecutedStatuses };
}

function parseJwt(r: Reader, v: unknown, path: 'jwt' | 'operatorJwt'): JwtDeclaration {
  const o = r.object(v, path, [
    'issuer',
    'audience',
    'algorithms',
    'tokenType',
    'jwksUrl',
    'publicKey',
    'secret',
    'agentClaim',
    'userClaim',
    'claimNames',
    'header',
  ]);
  const keys = ['jwksUrl', 'publicKey', 'secret'].filter((k) => o[k] !== undefined);
  if (keys.length !== 1) r.fail(path, 'give exactly one of jwksUrl, publicKey: { env }, secret: { env }');
  const tokenType = o['tokenType'] === null ? null : r.string(o['tokenType'] ?? 'jwt', `${path}.tokenType`);
  const out: JwtDeclaration = {
    issuer: r.string(o['issuer'], `${path}.issuer`),
    audience: r.string(o['audience'], `${path}.audience`),
    algorithms: r.stringList(o['algorithms'], `${path}.algorithms`),
    tokenType,
  };
  if (out.algorithms.length === 0) r.fail(`${path}.algorithms`, 'must name at least one algorithm');
  if (o['jwksUrl'] !== undefined) out.jwksUrl = r.string(o['jwksUrl'], `${path}.jwksUrl`);
  if (o['publicKey'] !== undefined) out.publicKey = r.secret(o['publicKey'], `${path}.publicKey`);
  if (o['secret'] !== undefined) out.secret = r.secret(o['secret'], `${path}.secret`);
  if (o['agentClaim'] !== undefined) out.agentClaim = r.string(o['agentClaim'], `${path}.agentClaim`);
  if (o['userClaim'] !== undefined) out.userClaim = o['userClaim'] === null ? null : r.string(o['userClaim'], `${path}.userClaim`);
  if (o['claimNames'] !== undefined) out.claimNames = r.stringList(o['claimNames'], `${path}.claimNames`);
  if (o['header'] !== undefined) out.header = r.string(o['header'], `${path}.header`);
  return out;
}

/** `mcp: { upstreams: [{ name, url, headers?, timeoutMs? }] }`: at least one upstream, each name once. */
function parseMcp(r: Reader, v: unknown): { upstreams: McpUpstreamDeclaration[] } {
  const o = r.object(v, 'mcp', ['upstreams']);
  const list = o['upstreams'];
  if (!Array.isArray(list) || list.length === 0) r.fail('mcp.upstreams', `must list at least one upstream MCP server ({ name, url }), got ${describe(list)}`);
  const seen = new Set<string>();
  const upstreams = list.map((u, i) => {
    const at = `mcp.upstreams[${i}]`;
    const d = r.object(u, at, ['name', 'url', 'headers', 'timeoutMs']);
    const name = r.string(d['name'], `${at}.name`);
    if (!ALIAS_PATTERN.test(name))
      r.fail(`${at}.name`, `${JSON.stringify(name)} must match ${ALIAS_PATTERN.source} (it becomes the middle of mcp.<name>.<tool> and the path /mcp/<name>)`);
    if (seen.has(name)) r.fail(`${at}.name`, `${JSON.stringify(name)} is given twice: each upstream needs its own name`);
    seen.add(name);
    return {
      name,
      url: httpUrl(r, d['url'], `${at}.url`, 'put them in headers (Authorization)'),
      headers: parseHeaders(r, d['headers'], `${at}.headers`, MCP_RESERVED_HEADERS, 'the MCP client'),
      timeoutMs: d['timeoutMs'] === undefined ? 30_000 : r.integer(d['timeoutMs'], `${at}.timeoutMs`, 1, 600_000),
    };
  });
  return { upstreams };
}

/** Parses and checks a config document (YAML or JSON text). Pure: reads no file, no variable. */
export function parseWorkerConfig(text: string, source = 'config'): WorkerFileConfig {
  const r = new Reader(source);
  const doc = readDocument(text, source);
  const top = doc === null || doc === undefined ? {} : r.object(doc, '', TOP_KEYS);
  let policy: WorkerFileConfig['policy'] = null;
  if (top['policy'] !== undefined) {
    if (typeof top['policy'] === 'string') policy = { file: r.string(top['policy'], 'policy') };
    else {
      const p = r.object(top['policy'], 'policy', ['file', 'yaml']);
      if ('file' in p === 'yaml' in p) r.fail('policy', 'give a path (policy: ./policy.yaml), or exactly one of { file } or { yaml }');
      if ('yaml' in p && (typeof p['yaml'] !== 'string' || p['yaml'].trim() === ''))
        r.fail('policy.yaml', `must be the policy's YAML text, got ${describe(p['yaml'])}`);
      policy = 'file' in p ? { file: r.string(p['file'], 'policy.file') } : { yaml: p['yaml'] as string };
    }
  }
  const executors = new Map<string, ExecutorDeclaration>();
  if (top['executors'] !== undefined) {
    for (const [name, decl] of Object.entries(r.object(top['executors'], 'executors', null)))
      executors.set(name, parseExecutor(r, decl, key('executors', name)));
  }
  let tokens: WorkerFileConfig['tokens'] = null;
  if (top['tokens'] !== undefined) {
    const t = r.object(top['tokens'], 'tokens', ['agents', 'operators']);
    const list = (v: unknown, path: string): unknown[] => {
      if (v === undefined) return [];
      if (!Array.isArray(v)) return r.fail(path, `must be a list, got ${describe(v)}`);
      return v as unknown[];
    };
    tokens = {
      agents: list(t['agents'], 'tokens.agents').map((a, i) => {
        const at = `tokens.agents[${i}]`;
        const o = r.object(a, at, ['token', 'agent', 'user']);
        return {
          token: r.secret(o['token'], `${at}.token`),
          agent: r.string(o['agent'], `${at}.agent`),
          user: o['user'] === undefined || o['user'] === null ? null : r.string(o['user'], `${at}.user`),
        };
      }),
      operators: list(t['operators'], 'tokens.operators').map((a, i) => {
        const at = `tokens.operators[${i}]`;
        const o = r.object(a, at, ['token', 'operator', 'roles']);
        return {
          token: r.secret(o['token'], `${at}.token`),
          operator: r.string(o['operator'], `${at}.operator`),
          roles: o['roles'] === undefined ? null : r.stringList(o['roles'], `${at}.roles`),
        };
      }),
    };
    if (tokens.operators.length === 0) r.fail('tokens.operators', 'must list at least one operator (someone has to answer approvals)');
  }
  const demo = top['demo'];
  if (demo !== undefined && typeof demo !== 'boolean' && demo !== 'on' && demo !== 'off') r.fail('demo', `must be on or off, got ${describe(demo)}`);
  const jwt = top['jwt'] === undefined ? null : parseJwt(r, top['jwt'], 'jwt');
  const operatorJwt = top['operatorJwt'] === undefined ? null : parseJwt(r, top['operatorJwt'], 'operatorJwt');
  // One token must never be both: an agent's JWT answering approvals, or an operator's proposing.
  if (jwt && operatorJwt && jwt.issuer === operatorJwt.issuer && jwt.audience === operatorJwt.audience)
    r.fail(
      'operatorJwt',
      `must differ from jwt: in audience or issuer (both are ${JSON.stringify(jwt.issuer)} for ${JSON.stringify(jwt.audience)}), or an agent's token would be an operator's`,
    );
  return {
    source,
    policy,
    executors,
    tokens,
    jwt,
    operatorJwt,
    environment: r.optionalString(top['environment'], 'environment') ?? null,
    demo: demo === undefined ? null : demo === true || demo === 'on',
    cors: top['cors'] === undefined ? null : r.stringList(top['cors'], 'cors'),
    mcp: top['mcp'] === undefined ? null : parseMcp(r, top['mcp']),
    approvers:
      top['approvers'] === undefined
        ? null
        : { rolesClaim: r.optionalString(r.object(top['approvers'], 'approvers', ['rolesClaim'])['rolesClaim'], 'approvers.rolesClaim') ?? null },
  };
}

/** What the runtime can do for {@link loadWorkerSettings}: none of it on workerd. */
export interface RuntimeAccess {
  /** Reads a UTF-8 file (Node, Deno). */
  readText?: (path: string) => Promise<string>;
  /** Imports a module by absolute path (Node). */
  importModule?: (path: string) => Promise<Record<string, unknown>>;
}

/** How one action is run, for the banner and `GET /v1/policy`. */
export interface ExecutorSummary {
  action: string;
  /** `http POST https://…`, `module ./tools.mjs#refund`, `demo`, or null: none. */
  executor: string | null;
}

/** Everything an entry point needs to build the app. */
export interface WorkerSettings {
  policy: Policy;
  /** The YAML the policy was loaded from. */
  policyText: string;
  /** `CTRLRUN_POLICY`, a file path, or `built-in try-it`. */
  policySource: string;
  /** True when serving the built-in try-it policy with its fake remote. */
  builtIn: boolean;
  executors: Record<string, ActionExecutor>;
  summary: ExecutorSummary[];
  /** Policy actions with no executor (an allowed call is recorded FAILED, 422). */
  missing: string[];
  auth: Authenticator;
  /** Who the tokens stand for (for the banner). */
  agents: string[];
  operators: string[];
  generated: { role: 'agent' | 'operator'; variable: string; token: string }[];
  environment: string | null;
  demo: boolean;
  cors: CorsOptions | null;
  databaseUrl: string | null;
  /** The config document's source, or null. */
  configSource: string | null;
  /** `CTRLRUN_SESSION_SECRET`: signs the inbox's session cookies (default random per instance). */
  sessionSecret: string | null;
  /** The config's `approvers:` (the Control's approver identity), or null: none. */
  approvers: { rolesClaim: string | null } | null;
  /** `CTRLRUN_ANCHOR_URL` with `CTRLRUN_ANCHOR_SECRET`: the HTTP endpoint anchors are recorded at, or null: none. */
  anchor: AnchorProvider | null;
  /** The config's `mcp:` with its header secrets read, or null: no gateway at `/mcp`. */
  mcp: McpOptions | null;
}

/** The anchor provider `CTRLRUN_ANCHOR_URL` names (its HMAC secret only in `CTRLRUN_ANCHOR_SECRET`), or null. */
function envAnchor(env: WorkerEnv): AnchorProvider | null {
  const url = envText(env, 'CTRLRUN_ANCHOR_URL')?.trim();
  if (url === undefined || url === '') return null;
  const secret = envText(env, 'CTRLRUN_ANCHOR_SECRET');
  if (secret === undefined || secret.length < 16)
    throw new InvalidArgument('CTRLRUN_ANCHOR_URL needs its shared secret in CTRLRUN_ANCHOR_SECRET (at least 16 characters; bind it as a secret)');
  return httpAnchorProvider({ url, secret });
}

function resolvePath(base: string | null, path: string): string {
  if (base === null || path.startsWith('/') || /^[A-Za-z]:[\\/]/.test(path)) return path;
  const cut = Math.max(base.lastIndexOf('/'), base.lastIndexOf('\\'));
  const rel = path.replace(/^(?:\.[\/])+/, '');
  return cut < 0 ? rel : `${base.slice(0, cut + 1)}${rel}`;
}

function secretValue(env: WorkerEnv, ref: SecretRef, path: string): string {
  const value = envText(env, ref.env);
  if (value === undefined) throw new InvalidArgument(`${path}: the variable ${ref.env} is not set (bind it as a secret)`);
  return `${ref.prefix ?? ''}${value}`;
}

/** Header values with their secrets read, each checked now: a value no request can carry would fail every call. */
function headerValues(env: WorkerEnv, declared: Record<string, string | SecretRef>, at: string): Record<string, string> {
  const headers = Object.create(null) as Record<string, string>;
  for (const [h, v] of Object.entries(declared)) {
    const value = typeof v === 'string' ? v : secretValue(env, v, `${at}.${h}`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0008\u000a-\u001f\u007f]|[^\u0000-\u00ff]/.test(value)) {
      throw new InvalidArgument(
        `${at}.${h}: ${typeof v === 'string' ? 'the value' : `the variable ${v.env}`} holds a character a header cannot carry (a line break, a control character or one beyond Latin-1)`,
      );
    }
    headers[h] = value;
  }
  return headers;
}

/**
 * Reads the whole configuration: the config document (`configPath`, else `CTRLRUN_CONFIG_FILE`,
 * else `CTRLRUN_CONFIG` text), the policy (`CTRLRUN_POLICY` text, else `CTRLRUN_POLICY_FILE`,
 * else the document's `policy:`, else the built-in try-it policy), executors, tokens and JWT.
 * `generate`: make up missing static tokens (Node, Deno); without it a missing one is an error.
 */
export async function loadWorkerSettings(
  env: WorkerEnv,
  options: { generate: boolean; configPath?: string | null; runtime?: RuntimeAccess; demoExecutors?: Record<string, ActionExecutor> },
): Promise<WorkerSettings> {
  const runtime = options.runtime ?? {};
  const readText = async (path: string, what: string): Promise<string> => {
    if (!runtime.readText)
      throw new InvalidArgument(`${what} ${JSON.stringify(path)}: this runtime reads no files; give the text instead (CTRLRUN_CONFIG / CTRLRUN_POLICY)`);
    try {
      return await runtime.readText(path);
    } catch (err) {
      throw new InvalidArgument(`${what} ${JSON.stringify(path)} could not be read: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  };

  // The config document.
  const configPath = options.configPath ?? envText(env, 'CTRLRUN_CONFIG_FILE') ?? null;
  const inlineConfig = envText(env, 'CTRLRUN_CONFIG');
  if (configPath !== null && inlineConfig !== undefined) throw new InvalidArgument('both a config file and CTRLRUN_CONFIG are given: use one');
  let file: WorkerFileConfig | null = null;
  if (configPath !== null) file = parseWorkerConfig(await readText(configPath, 'the config file'), configPath);
  else if (inlineConfig !== undefined) file = parseWorkerConfig(inlineConfig, 'CTRLRUN_CONFIG');
  const base = configPath;

  // The policy.
  const inlinePolicy = envText(env, 'CTRLRUN_POLICY');
  const policyFile = envText(env, 'CTRLRUN_POLICY_FILE');
  if (inlinePolicy !== undefined && policyFile !== undefined) throw new InvalidArgument('both CTRLRUN_POLICY and CTRLRUN_POLICY_FILE are set: use one');
  let policyText: string;
  let policySource: string;
  let builtIn = false;
  if (inlinePolicy !== undefined) [policyText, policySource] = [inlinePolicy, 'CTRLRUN_POLICY'];
  else if (policyFile !== undefined) [policyText, policySource] = [await readText(policyFile, 'CTRLRUN_POLICY_FILE'), policyFile];
  else if (file?.policy && 'yaml' in file.policy) [policyText, policySource] = [file.policy.yaml, `${file.source}: policy.yaml`];
  else if (file?.policy && 'file' in file.policy) {
    const path = resolvePath(base, file.policy.file);
    [policyText, policySource] = [await readText(path, `${file.source}: policy`), path];
  } else [policyText, policySource, builtIn] = [TRY_IT_POLICY_YAML, 'built-in try-it', true];
  const policy = loadPolicy(policyText, { source: policySource });

  // Executors.
  const executors = Object.create(null) as Record<string, ActionExecutor>;
  const described = new Map<string, string>();
  if (builtIn && file?.executors.size)
    throw new InvalidArgument(`${file.source}: executors are declared but no policy is given (policy:, CTRLRUN_POLICY or CTRLRUN_POLICY_FILE)`);
  if (builtIn && options.demoExecutors) {
    for (const [name, fn] of Object.entries(options.demoExecutors)) {
      executors[name] = fn;
      described.set(name, 'demo (fake remote)');
    }
  }
  for (const [name, decl] of file?.executors ?? []) {
    const at = `${file!.source}: ${key('executors', name)}`;
    if (policy.action(name) === null)
      throw new InvalidArgument(`${at}: the policy (${policySource}) has no action ${JSON.stringify(name)}, so this executor could never run`);
    if (decl.kind === 'http') {
      const headers = headerValues(env, decl.headers, `${at}.http.headers`);
      executors[name] = httpForwarder({
        url: decl.url,
        method: decl.method,
        headers,
        timeoutMs: decl.timeoutMs,
        notExecutedStatuses: decl.notExecutedStatuses,
      });
      described.set(name, `http ${decl.method} ${new URL(decl.url).origin}${new URL(decl.url).pathname}`);
    } else {
      if (!runtime.importModule) throw new InvalidArgument(`${at}.module: this runtime cannot import modules (Node only); forward over HTTP instead`);
      const path = resolvePath(base, decl.module);
      let mod: Record<string, unknown>;
      try {
        mod = await runtime.importModule(path);
      } catch (err) {
        throw new InvalidArgument(`${at}.module: ${JSON.stringify(path)} could not be imported: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
      const fn = Object.prototype.hasOwnProperty.call(mod, decl.export) ? mod[decl.export] : undefined;
      if (typeof fn !== 'function') throw new InvalidArgument(`${at}.export: ${JSON.stringify(path)} exports no function named ${JSON.stringify(decl.export)}`);
      executors[name] = fn as ActionExecutor;
      described.set(name, `module ${decl.module}#${decl.export}`);
    }
  }
  // The MCP gateway's upstreams: each must have actions in the policy, or every call is denied.
  let mcp: McpOptions | null = null;
  if (file?.mcp) {
    const source = file.source;
    if (builtIn) throw new InvalidArgument(`${source}: mcp upstreams are declared but no policy is given (policy:, CTRLRUN_POLICY or CTRLRUN_POLICY_FILE)`);
    mcp = {
      upstreams: file.mcp.upstreams.map((u, i) => {
        const at = `${source}: mcp.upstreams[${i}]`;
        if (!policy.actionNames.some((n) => n.startsWith(`mcp.${u.name}.`)))
          throw new InvalidArgument(
            `${at}.name: the policy (${policySource}) has no action mcp.${u.name}.<tool>, so every call through this upstream would be denied`,
          );
        return { name: u.name, url: u.url, headers: headerValues(env, u.headers, `${at}.headers`), timeoutMs: u.timeoutMs };
      }),
    };
  }

  const summary = policy.actionNames.map((action) => ({ action, executor: described.get(action) ?? (mcp === null ? null : mcpUpstreamOf(mcp, action)) }));
  const missing = summary.filter((s) => s.executor === null && policy.rules(s.action)?.some((r) => r.decision !== 'deny')).map((s) => s.action);

  // Who may call.
  const generated: WorkerSettings['generated'] = [];
  const tokens: StaticToken[] = [];
  if (file?.tokens) {
    const source = file.source;
    file.tokens.agents.forEach((a, i) =>
      tokens.push({
        role: 'agent',
        token: envToken(env, a.token.env, 'agent', { generate: options.generate, generated, where: `${source}: tokens.agents[${i}].token: ` }),
        agent: a.agent,
        user: a.user,
      }),
    );
    file.tokens.operators.forEach((o, i) =>
      tokens.push({
        role: 'operator',
        token: envToken(env, o.token.env, 'operator', { generate: options.generate, generated, where: `${source}: tokens.operators[${i}].token: ` }),
        operator: o.operator,
        ...(o.roles === null ? {} : { roles: o.roles }),
      }),
    );
  } else {
    tokens.push(...envTokens(env, { generate: options.generate, generated }).tokens);
  }
  let auth = staticTokens(tokens);
  const environment = file?.environment ?? null;
  const jwtEnvironment = { environment: environment ?? policy.environment ?? 'production' };
  if (file?.jwt) auth = anyOf(auth, identityProviderAuth(await jwtProvider(env, file.jwt, `${file.source}: jwt`), jwtEnvironment));
  if (file?.operatorJwt) {
    const rolesClaim = file.approvers?.rolesClaim ?? null;
    if (rolesClaim !== null && !(file.operatorJwt.claimNames ?? []).includes(rolesClaim))
      throw new InvalidArgument(
        `${file.source}: operatorJwt.claimNames: must include the roles claim ${JSON.stringify(rolesClaim)} (approvers.rolesClaim), or no operator would hold a role`,
      );
    auth = anyOf(auth, identityProviderOperators(await jwtProvider(env, file.operatorJwt, `${file.source}: operatorJwt`), jwtEnvironment));
  }

  const demo = envDemo(env) ?? file?.demo ?? builtIn;
  const origins = envCorsOrigins(env) ?? file?.cors ?? [];
  return {
    policy,
    policyText,
    policySource,
    builtIn,
    executors,
    summary,
    missing,
    auth,
    agents: tokens
      .flatMap((t) => (t.role === 'agent' ? [t.user ? `${t.agent} (user ${t.user})` : t.agent] : []))
      .concat(file?.jwt ? [`JWT from ${file.jwt.issuer}`] : []),
    operators: tokens.flatMap((t) => (t.role === 'operator' ? [t.operator] : [])).concat(file?.operatorJwt ? [`JWT from ${file.operatorJwt.issuer}`] : []),
    generated,
    environment,
    demo,
    cors: origins.length > 0 ? { origins } : null,
    databaseUrl: envText(env, 'DATABASE_URL')?.trim() ?? null,
    configSource: file?.source ?? null,
    sessionSecret: envText(env, 'CTRLRUN_SESSION_SECRET') ?? null,
    approvers: file?.approvers ?? null,
    anchor: envAnchor(env),
    mcp,
  };
}

/** `mcp <name> → <origin><path>` for an action an MCP upstream runs, or null. */
function mcpUpstreamOf(mcp: McpOptions, action: string): string | null {
  const u = mcp.upstreams.find((x) => action.startsWith(`mcp.${x.name}.`));
  return u === undefined ? null : `mcp ${u.name} → ${new URL(u.url).origin}${new URL(u.url).pathname}`;
}

/** The lines an entry point prints before it listens: the policy and its hash, who runs what, and what runs nothing. */
export function settingsBanner(s: WorkerSettings, where: { url: string; store: string; runtime: string; policyHash: string }): string {
  const lines = [
    `ctrlrun worker (${where.runtime}) on ${where.url}`,
    `  store:    ${where.store}`,
    `  policy:   ${s.policySource}${s.builtIn ? ' (stripe.refund: allow ≤ 100000, approve ≤ 1000000, else deny)' : ''}`,
    `  hash:     ${where.policyHash}`,
  ];
  if (s.configSource) lines.push(`  config:   ${s.configSource}`);
  for (const { action, executor } of s.summary) lines.push(`  action:   ${action} → ${executor ?? 'no executor'}`);
  if (s.missing.length > 0) lines.push(`  WARNING:  no executor for ${s.missing.join(', ')}: an allowed or approved call is refused (422, recorded FAILED)`);
  lines.push(`  agents:   ${s.agents.join(', ')}    operators: ${s.operators.join(', ')}`);
  if (s.anchor) lines.push(`  anchors:  ${s.anchor.name}`);
  for (const u of s.mcp?.upstreams ?? [])
    lines.push(
      `  mcp:      ${where.url}/mcp/${u.name}${s.mcp!.upstreams.length === 1 ? ` (and /mcp)` : ''} → ${new URL(u.url).origin}${new URL(u.url).pathname}`,
    );
  lines.push(`  try-it:   ${s.demo ? 'POST /v1/try-it/step' : 'off'}    CORS: ${s.cors ? s.cors.origins.join(', ') : 'off'}`);
  for (const g of s.generated) lines.push(`  ${g.variable}=${g.token}   (generated; set it to keep it)`);
  return lines.join('\n');
}

/** A kernel JWT identity provider for a `jwt:` or `operatorJwt:` declaration (`where` names it in messages). */
async function jwtProvider(env: WorkerEnv, j: JwtDeclaration, where: string): Promise<IdentityProvider> {
  const { createJwtIdentityProvider } = await import('@ctrlrun/kernel/jwt');
  return createJwtIdentityProvider({
    issuer: j.issuer,
    audience: j.audience,
    algorithms: j.algorithms,
    tokenType: j.tokenType,
    ...(j.jwksUrl !== undefined ? { jwksUrl: j.jwksUrl } : {}),
    ...(j.publicKey !== undefined ? { publicKey: secretValue(env, j.publicKey, `${where}.publicKey`) } : {}),
    ...(j.secret !== undefined ? { secret: secretValue(env, j.secret, `${where}.secret`) } : {}),
    ...(j.agentClaim !== undefined ? { agentClaim: j.agentClaim } : {}),
    ...(j.userClaim !== undefined ? { userClaim: j.userClaim } : {}),
    ...(j.claimNames !== undefined ? { claimNames: j.claimNames } : {}),
    ...(j.header !== undefined ? { header: j.header } : {}),
  });
}
