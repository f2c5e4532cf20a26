/**
 * `@ctrlrun/worker`: the kernel's control path over HTTP, as a Hono app that runs unchanged on
 * workerd, Deno and Node. `createApp` takes a `Control`, executors and an authenticator; the
 * entry points (`runtime/`: `workerd.ts`, `cloudflare.ts`, `deno.ts`, `deno-serve.ts`, `node.ts`) read
 * the environment and serve the embedded default (`createDemoApp`); `app.ts` composes the route
 * groups of `routes/`.
 *
 * @module
 */
export { createApp, type App, type AppOptions, type CorsOptions, type McpOptions, type McpUpstream } from './app.js';
export {
  anyOf,
  identityProviderAuth,
  identityProviderOperators,
  bearerToken,
  constantTimeEqual,
  generateToken,
  MIN_TOKEN_LENGTH,
  staticTokens,
  type AgentIdentity,
  type Authenticator,
  type Identity,
  type OperatorIdentity,
  type StaticToken,
} from './auth.js';
export {
  checkExecutors,
  executorFor,
  httpForwarder,
  neverConnected,
  UpstreamError,
  type ActionExecutor,
  type Executors,
  type ForwardedResult,
  type HttpForwarderOptions,
} from './executors.js';
export { DEFAULT_BODY_LIMIT, HttpError, jsonPathAt, readJsonBody, statusForCode, type WorkerErrorCode } from './http.js';
export { configFromEnv, envCorsOrigins, envDemo, envText, envToken, envTokens, type WorkerConfig, type WorkerEnv } from './config.js';
export { createDemoApp, createFakeRemote, type DemoAppOptions, type FakeRemote } from './demo.js';
export {
  loadWorkerSettings,
  parseWorkerConfig,
  settingsBanner,
  type ExecutorDeclaration,
  type ExecutorSummary,
  type JwtDeclaration,
  type McpUpstreamDeclaration,
  type RuntimeAccess,
  type SecretRef,
  type WorkerFileConfig,
  type WorkerSettings,
} from './settings.js';
export { createConfiguredApp } from './configured.js';
