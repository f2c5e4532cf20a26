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
import { generateToken, staticTokens, type Authenticator, type StaticToken } from './auth.js';
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

/** A variable's text, or `undefined` when unset or empty; a non-string binding is refused. */
export function envText(env: WorkerEnv, name: string): string | undefined {
  const v = env[name];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new InvalidArgument(`${name} must be a string`);
  return v;
}

function text(env: WorkerEnv, name: string): string | undefined {
  return envText(env, name)?.trim();
}

/** A token from `variable`; made up (and listed in `generated`) when unset and `generate` allows. */
export function envToken(
  env: WorkerEnv,
  variable: string,
  role: 'agent' | 'operator',
  options: { generate: boolean; generated: WorkerConfig['generated']; where?: string },
): string {
  const given = text(env, variable);
  if (given !== undefined) return given;
  if (!options.generate) throw new InvalidArgument(`${options.where ?? ''}${variable} is not set: bind it as a secret`);
  const made = generateToken();
  options.generated.push({ role, variable, token: made });
  return made;
}

/** The two static tokens of `CTRLRUN_AGENT_TOKEN` / `CTRLRUN_OPERATOR_TOKEN`, for `CTRLRUN_AGENT` / `CTRLRUN_OPERATOR`. */
export function envTokens(
  env: WorkerEnv,
  options: { generate: boolean; generated: WorkerConfig['generated'] },
): { agent: string; operator: string; tokens: StaticToken[] } {
  const agent = text(env, 'CTRLRUN_AGENT') ?? 'refund-agent';
  const operator = text(env, 'CTRLRUN_OPERATOR') ?? 'human:operator';
  const tokens: StaticToken[] = [
    { role: 'agent', token: envToken(env, 'CTRLRUN_AGENT_TOKEN', 'agent', options), agent },
    { role: 'operator', token: envToken(env, 'CTRLRUN_OPERATOR_TOKEN', 'operator', options), operator },
  ];
  return { agent, operator, tokens };
}

/** `CTRLRUN_DEMO` (`on`/`off`), or `undefined` when unset. */
export function envDemo(env: WorkerEnv): boolean | undefined {
  const demo = text(env, 'CTRLRUN_DEMO')?.toLowerCase();
  if (demo === undefined) return undefined;
  if (!['on', 'off', '1', '0', 'true', 'false'].includes(demo)) throw new InvalidArgument('CTRLRUN_DEMO must be on or off');
  return ['on', '1', 'true'].includes(demo);
}

/** `CTRLRUN_CORS_ORIGINS` as a list, or `undefined` when unset. */
export function envCorsOrigins(env: WorkerEnv): string[] | undefined {
  const origins = text(env, 'CTRLRUN_CORS_ORIGINS');
  return origins === undefined
    ? undefined
    : origins
        .split(',')
        .map((o) => o.trim())
        .filter((o) => o !== '');
}

/**
 * Reads the configuration. Without `generate`, a missing token is an error (workerd: a secret
 * must be bound); with it, a fresh token is made and listed in `generated`.
 */
export function configFromEnv(env: WorkerEnv, options: { generate: boolean }): WorkerConfig {
  const generated: WorkerConfig['generated'] = [];
  const { agent, operator, tokens } = envTokens(env, { generate: options.generate, generated });
  const origins = envCorsOrigins(env) ?? [];
  return {
    auth: staticTokens(tokens),
    agent,
    operator,
    generated,
    demo: envDemo(env) ?? true,
    cors: origins.length > 0 ? { origins } : null,
    databaseUrl: text(env, 'DATABASE_URL') ?? null,
  };
}
