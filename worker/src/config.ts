/**
 * Token configuration from the environment (Node's `process.env`, Deno's `Deno.env`, workerd's
 * bindings). The entry points read everything through `settings.ts` (`loadWorkerSettings`:
 * the config document, the policy, executors, tokens, JWT); this is the environment-only subset,
 * kept for embedders. Every variable is optional:
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `CTRLRUN_AGENT_TOKEN` | the agent's bearer token | generated and printed (Node, Deno); required on workerd |
 * | `CTRLRUN_OPERATOR_TOKEN` | the operator's bearer token | as above |
 * | `CTRLRUN_AGENT` | the principal the agent token acts as | `refund-agent` |
 * | `CTRLRUN_OPERATOR` | who the operator token is recorded as | `human:operator` |
 * | `CTRLRUN_DEMO` | `off` turns the playground route off | on |
 * | `CTRLRUN_CORS_ORIGINS` | comma-separated origins allowed cross-origin | none (CORS off) |
 * | `DATABASE_URL` | a server store (Node, Deno): SQLite path or `postgres://…` | in-memory sql.js |
 *
 * @module
 */
import { InvalidArgument } from '@ctrlrun/kernel';
import { generateToken, staticTokens, type Authenticator } from './auth.js';
import type { CorsOptions } from './app.js';

/** Environment variables or bindings, by name. */
export type WorkerEnv = Readonly<Record<string, unknown>>;

/** What the entry points need from the environment. */
export interface WorkerConfig {
  auth: Authenticator;
  agent: string;
  operator: string;
  /** Tokens made up because none was set: print them, once, at start. */
  generated: { role: 'agent' | 'operator'; variable: string; token: string }[];
  demo: boolean;
  cors: CorsOptions | null;
  databaseUrl: string | null;
}

function text(env: WorkerEnv, name: string): string | undefined {
  const v = env[name];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new InvalidArgument(`${name} must be a string`);
  return v.trim();
}

/**
 * Reads the configuration. Without `generate`, a missing token is an error (workerd: a secret
 * must be bound); with it, a fresh token is made and listed in `generated`.
 */
export function configFromEnv(env: WorkerEnv, options: { generate: boolean }): WorkerConfig {
  const agent = text(env, 'CTRLRUN_AGENT') ?? 'refund-agent';
  const operator = text(env, 'CTRLRUN_OPERATOR') ?? 'human:operator';
  const generated: WorkerConfig['generated'] = [];
  const token = (role: 'agent' | 'operator', variable: string): string => {
    const given = text(env, variable);
    if (given !== undefined) return given;
    if (!options.generate) throw new InvalidArgument(`${variable} is not set: bind it as a secret`);
    const made = generateToken();
    generated.push({ role, variable, token: made });
    return made;
  };
  const auth = staticTokens([
    { role: 'agent', token: token('agent', 'CTRLRUN_AGENT_TOKEN'), agent },
    { role: 'operator', token: token('operator', 'CTRLRUN_OPERATOR_TOKEN'), operator },
  ]);
  const origins = (text(env, 'CTRLRUN_CORS_ORIGINS') ?? '').split(',').map((o) => o.trim()).filter((o) => o !== '');
  const demo = (text(env, 'CTRLRUN_DEMO') ?? 'on').toLowerCase();
  if (!['on', 'off', '1', '0', 'true', 'false'].includes(demo)) throw new InvalidArgument('CTRLRUN_DEMO must be on or off');
  return {
    auth,
    agent,
    operator,
    generated,
    demo: ['on', '1', 'true'].includes(demo),
    cors: origins.length > 0 ? { origins } : null,
    databaseUrl: text(env, 'DATABASE_URL') ?? null,
  };
}

/** The lines an entry point prints before it listens. */
export function startupBanner(config: WorkerConfig, where: { url: string; store: string; runtime: string }): string {
  const lines = [
    `ctrlrun worker (${where.runtime}) on ${where.url}`,
    `  store:    ${where.store}`,
    `  policy:   try-it (stripe.refund: allow ≤ 100000, approve ≤ 1000000, else deny)`,
    `  agent:    ${config.agent}    operator: ${config.operator}`,
    `  try-it:   ${config.demo ? 'POST /v1/try-it/step' : 'off'}    CORS: ${config.cors ? config.cors.origins.join(', ') : 'off'}`,
  ];
  for (const g of config.generated) lines.push(`  ${g.variable}=${g.token}   (generated; set it to keep it)`);
  return lines.join('\n');
}
