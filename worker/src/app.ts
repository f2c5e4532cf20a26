/**
 * The HTTP API over the kernel's one control path, composed from its route groups (`routes/`):
 * every action goes through `Control.executeWithReceipt` (`routes/actions.ts`); approvals are
 * answered through `Control.grantApproval` / `denyApproval` (`routes/approvals.ts`), effects
 * resolved through `Control.resolveEffect` (`routes/effects.ts`). The app decides nothing itself:
 * it authenticates (`routes/context.ts`), parses strictly, and maps the kernel's refusals to
 * statuses (`http.ts`). This file only checks the options and mounts the groups.
 *
 * @module
 */
import { Hono } from 'hono';
import { cors } from 'hono/cors';
import { InvalidArgument, verifyAnchors, type AnchorProvider, type Control } from '@ctrlrun/kernel';
import type { TryIt } from '@ctrlrun/kernel/try-it';
import type { Authenticator } from './auth.js';
import { checkExecutors, type Executors } from './executors.js';
import { DEFAULT_BODY_LIMIT, errorResponse, responseForError } from './http.js';
import { mountActions } from './routes/actions.js';
import { mountApprovals } from './routes/approvals.js';
import { mountBudgets } from './routes/budgets.js';
import { roleGates, type AppEnv, type RouteContext } from './routes/context.js';
import { mountEffects } from './routes/effects.js';
import { mountInbox } from './routes/inbox.js';
import { mountMcp, type McpOptions } from './routes/mcp.js';
import { mountOpenApi } from './routes/openapi.js';
import { mountPolicy } from './routes/policy.js';
import { mountReceipts, sharedChainVerification } from './routes/receipts.js';
import { mountRetention } from './routes/retention.js';
import { mountTryIt } from './routes/try-it.js';

/** Cross-origin access; off unless given. */
export interface CorsOptions {
  /** Origins allowed to call the API from a browser (exact matches). */
  origins: readonly string[];
}

/** Options of {@link createApp}. */
export interface AppOptions {
  /** The control path: its policy, store, clock and ids. */
  control: Control;
  /** Who runs each action, by name. An allowed action with none is recorded FAILED (422). */
  executors?: Executors;
  /** Resolves the caller's credential (e.g. {@link staticTokens}). */
  auth: Authenticator;
  /** The playground module: enables `POST /v1/try-it/step` (demo mode). */
  tryIt?: TryIt | null;
  /** Largest accepted request body in bytes (default 64 KiB). */
  bodyLimit?: number;
  /** Cross-origin access (default off: no CORS headers at all). */
  cors?: CorsOptions | null;
  /**
   * How many unanswered, unexpired approval requests one agent credential (its principal's agent
   * and user) may have (default 100); past it, an action that would ask for another is 429 and
   * nothing is written. `null`: no limit.
   */
  maxPendingApprovals?: number | null;
  /** The YAML the policy was loaded from, served by `GET /v1/policy` (omit: `yaml` is null). */
  policyText?: string | null;
  /** Where the policy came from, as `GET /v1/policy` names it (default the policy's `source`). */
  policySource?: string;
  /**
   * The operator inbox at `/inbox` (default on). `sessionSecret` signs its session cookies: give
   * every instance serving one inbox the same one (default: random per app).
   */
  inbox?: boolean | { sessionSecret?: string | null };
  /** Where the chain head and prune checkpoints are anchored outside the store (`POST /v1/anchors`; default none). */
  anchor?: AnchorProvider | null;
  /**
   * The MCP gateway (default off): each upstream's tools at `/mcp/<name>` (and `/mcp` when there
   * is one), for an agent credential, every `tools/call` through the control path as
   * `mcp.<name>.<tool>`.
   */
  mcp?: McpOptions | null;
}

export type { McpOptions, McpUpstream } from './routes/mcp.js';

/** The app {@link createApp} builds: call `app.fetch(request)`, or `app.request(path, init)` in tests. */
export type App = Hono<AppEnv>;

/** The options checked, each a clear error naming what is missing. */
function checkedOptions(options: AppOptions): { control: Control; auth: Authenticator; executors: Executors; bodyLimit: number } {
  if (!options || typeof options !== 'object') throw new InvalidArgument('createApp needs { control, auth }');
  const { control, auth } = options;
  if (!control || typeof control.executeWithReceipt !== 'function') throw new InvalidArgument('createApp needs a control (new Control({ policy, store }))');
  if (typeof auth !== 'function') throw new InvalidArgument('createApp needs auth (e.g. staticTokens([...]))');
  const executors = checkExecutors(options.executors);
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  if (!Number.isSafeInteger(bodyLimit) || bodyLimit <= 0) throw new InvalidArgument('bodyLimit must be a positive integer (bytes)');
  return { control, auth, executors, bodyLimit };
}

/**
 * Builds the Hono app.
 *
 * - `POST /v1/actions` (agent): 200 committed, 202 approval required, 403 denied, 409
 *   mismatch/duplicate/ambiguous, 422 not executed, 429 too many approval requests waiting
 *   (`maxPendingApprovals`), 502 outcome unknown (recorded AMBIGUOUS). A caller's `effectKey`
 *   on an action without an `effect:` template is scoped to the action (`caller-keys.ts`); a
 *   `resource` on an action without a `resource:` template is refused.
 * - `GET /v1/approvals?status=&limit=&after=` (pages; `next` is the cursor),
 *   `POST /v1/approvals/:id/grant|deny` (operator). A grant's body may be
 *   `{ "edit": { "arguments": {…} } }`: the edited arguments are decided again (a deny is 403
 *   with the rule's sentence, the request stays pending) and granted under a new request id.
 * - `GET /v1/effects/:key`, `POST /v1/effects/:key/resolve` (operator).
 * - `GET /v1/receipts?after=&limit=`, `GET /v1/receipts/verify`, `GET /v1/receipts/:id` (operator).
 * - `POST /v1/try-it/step` (demo mode; `approve` and `resolve` need an operator).
 * - `GET /v1/policy` (agent or operator): the policy served, its hash as receipts record it, and
 *   which of its actions have an executor.
 * - `GET /v1/openapi.json`: the OpenAPI 3.1 document of all this, the playground route only in demo mode (no credential needed).
 * - `GET /healthz`.
 *
 * No credential is 401; the wrong role is 403; a body over the limit is 413; a body that is
 * not `application/json` is 415; malformed JSON, a leading byte order mark or a float is 400
 * with the JSON path. Receipt views read each row's hashed document, never its columns.
 */
export function createApp(options: AppOptions): App {
  const { control, auth, executors, bodyLimit } = checkedOptions(options);
  const tryIt = options.tryIt ?? null;
  const anchor = options.anchor ?? null;
  const app = new Hono<AppEnv>();
  const ctx: RouteContext = { app, control, gates: roleGates(auth), bodyLimit };

  app.use('*', async (c, next) => {
    await next();
    // Evidence and decisions are never to be served from a cache.
    c.res.headers.set('cache-control', 'no-store');
  });
  if (options.cors) {
    const origins = [...options.cors.origins];
    app.use('/v1/*', cors({ origin: origins, allowHeaders: ['authorization', 'content-type'], allowMethods: ['GET', 'POST'], maxAge: 600 }));
  }

  app.get('/healthz', (c) => c.json({ ok: true }));
  mountOpenApi(ctx, { playground: tryIt !== null });
  mountPolicy(ctx, { executors, yaml: options.policyText ?? null, source: options.policySource ?? control.policy.source });
  mountActions(ctx, { executors, maxPendingApprovals: options.maxPendingApprovals });
  mountApprovals(ctx);
  mountEffects(ctx);
  // One chain walk at a time, shared by `GET /v1/receipts/verify` and the inbox.
  const verify = sharedChainVerification(control.store);
  mountReceipts(ctx, verify);
  mountRetention(ctx, anchor);
  mountBudgets(ctx);
  if (options.inbox !== false) {
    const inboxOptions = typeof options.inbox === 'object' && options.inbox !== null ? options.inbox : {};
    mountInbox(ctx, {
      auth,
      verify,
      anchors: anchor && control.store.retention ? () => verifyAnchors(control.store, anchor) : null,
      ...(inboxOptions.sessionSecret ? { sessionSecret: inboxOptions.sessionSecret } : {}),
    });
  }
  mountTryIt(ctx, tryIt);
  if (options.mcp) mountMcp(ctx, options.mcp, { allowOrigins: options.cors?.origins ?? [], maxPendingApprovals: options.maxPendingApprovals });

  app.notFound((c) => errorResponse(404, 'ERR_NOT_FOUND', `no route ${c.req.method} ${new URL(c.req.url).pathname}`));
  app.onError((err) => responseForError(err));
  return app;
}
