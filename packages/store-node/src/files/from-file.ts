/**
 * `fromFile()`: a `Control` composed the way the `ctrlrun` CLI finds things (docs/spec/01-core.md §11,
 * docs/spec/04-surfaces.md §1), so that an application and the CLI answering its approvals read and write the same
 * policy, store and evidence files:
 *
 * - the policy is `path`, else `$CTRLRUN_CONFIG`, else `./ctrlrun.yaml` (relative to `cwd`);
 * - the store is `store` (an open store, or an address `openStore` takes), else the SQLite file
 *   `$CTRLRUN_STATE`, else `.ctrlrun/state.db` beside the policy;
 * - a {@link jsonlFileSink} writes `events.jsonl` and `receipts.jsonl` in the state directory
 *   (the SQLite file's directory), before any `sinks` given;
 * - the policy's inline `authority:` section, if any, is in force (the Control's default);
 * - the environment is `environment`, else `$CTRLRUN_ENVIRONMENT`, else the policy's, else
 *   `production`.
 *
 * A set-but-blank `$CTRLRUN_CONFIG`, `$CTRLRUN_STATE` or `$CTRLRUN_ENVIRONMENT` is an error, never
 * "use the default". The CLI composes its Control through this same function.
 *
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Control, InvalidArgument, loadPolicy, PolicyError, type ControlOptions, type EventSink, type Policy, type StateStore } from '@ctrlrun/kernel';
import { jsonlFileSink, type JsonlFileOptions } from './jsonl-file.js';
import { openStore, parseStoreUrl } from '../open-store.js';
import { readRegularFile, UnreadableFile } from './regular-file.js';

/** The policy file name looked for in the working directory. */
export const POLICY_FILE = 'ctrlrun.yaml';
/** The state directory beside the policy. */
export const STATE_DIR = '.ctrlrun';
/** The default SQLite file in the state directory. */
export const STATE_FILE = 'state.db';

/** Where {@link fromFile} and the CLI look: the environment and the working directory. */
export interface DiscoveryOptions {
  /** The environment variables read (`CTRLRUN_CONFIG`, `CTRLRUN_STATE`, `CTRLRUN_ENVIRONMENT`); default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The directory relative paths are resolved against; default `process.cwd()`. */
  cwd?: string;
}

/** `$NAME`, refusing a set-but-blank value; null when unset. */
function envValue(env: DiscoveryOptions['env'], name: string, error: (m: string) => Error): string | null {
  const v = (env ?? process.env)[name];
  if (v === undefined) return null;
  if (v.trim() === '') throw error(`${name} is set but blank; unset it or give it a value`);
  return v;
}

/** The policy path, absolute: `$CTRLRUN_CONFIG`, else `./ctrlrun.yaml`. */
export function policyFilePath(options: DiscoveryOptions = {}): string {
  const configured = envValue(options.env, 'CTRLRUN_CONFIG', (m) => new PolicyError(m));
  return resolve(options.cwd ?? process.cwd(), configured ?? POLICY_FILE);
}

/** The SQLite state file, absolute: `$CTRLRUN_STATE`, else `.ctrlrun/state.db` beside the policy at `policyPath`. */
export function stateFilePath(options: DiscoveryOptions & { policyPath?: string } = {}): string {
  const state = envValue(options.env, 'CTRLRUN_STATE', (m) => new InvalidArgument(m));
  if (state !== null) return resolve(options.cwd ?? process.cwd(), state);
  return resolve(dirname(options.policyPath ?? policyFilePath(options)), STATE_DIR, STATE_FILE);
}

/** `$CTRLRUN_ENVIRONMENT` (blank is an `InvalidArgument`), else undefined: the policy's, else `production`. */
export function environmentFromEnv(env?: DiscoveryOptions['env']): string | undefined {
  const v = (env ?? process.env)['CTRLRUN_ENVIRONMENT'];
  if (v === undefined) return undefined;
  if (v.trim() === '') throw new InvalidArgument('CTRLRUN_ENVIRONMENT is set but blank; unset it or name the deployment');
  return v;
}

/**
 * Reads a policy file's text: a missing file, or one that is not a regular file (a FIFO, a
 * device such as `/dev/zero`, a directory), is an error from `refuse` (default `PolicyError`) naming it.
 */
export function readPolicyText(path: string, refuse: (message: string) => Error = (m) => new PolicyError(m)): string {
  try {
    return readRegularFile(path);
  } catch (err) {
    if (!(err instanceof UnreadableFile)) throw err;
    if (err.reason === 'missing') throw refuse(`no policy at ${path}: run 'ctrlrun init' to write one, or set CTRLRUN_CONFIG`);
    throw refuse(`the policy ${path} cannot be read: ${err.message}`);
  }
}

/** Reads and loads a policy file; missing, unreadable or malformed is a `PolicyError` naming it. */
export function loadPolicyFile(path: string): { policy: Policy; text: string } {
  const text = readPolicyText(path);
  return { policy: loadPolicy(text, { source: path }), text };
}

/** Options of {@link fromFile}: discovery, the store, the JSONL files, and the Control's own options. */
export interface FromFileOptions extends DiscoveryOptions, Omit<ControlOptions, 'policy' | 'store'> {
  /** The policy file; else `$CTRLRUN_CONFIG`, else `./ctrlrun.yaml`. */
  path?: string;
  /** An already loaded policy (then no file is read; `path` only names the state directory's default). */
  policy?: Policy;
  /**
   * The store: an open `StateStore` (yours to close), or an address for `openStore` (opened,
   * migrated, and closed by {@link FileControl.close}). Default: the SQLite file `$CTRLRUN_STATE`,
   * else `.ctrlrun/state.db` beside the policy, its directory created if absent.
   */
  store?: StateStore | string;
  /**
   * The directory `events.jsonl` and `receipts.jsonl` go to. Default: the SQLite file's directory
   * when the store is a SQLite file fromFile opened; none for an open store or another backend.
   * `null`: no JSONL files.
   */
  stateDir?: string | null;
  /** Rotation and fsync of the JSONL files (see {@link jsonlFileSink}); `false`: no JSONL files. */
  jsonl?: JsonlFileOptions | false;
  /** More sinks, after the JSONL one (an OpenTelemetry sink, a webhook provider's sink, …). */
  sinks?: readonly EventSink[];
}

/** A {@link Control} that owns what {@link fromFile} opened: close it when done. */
export class FileControl extends Control {
  /** The policy file (absolute). */
  readonly policyPath: string;
  /** Where the JSONL files are written, or null. */
  readonly stateDir: string | null;
  readonly #closers: (() => void | Promise<void>)[];

  /** Use {@link fromFile}. */
  constructor(options: ControlOptions, files: { policyPath: string; stateDir: string | null; closers: (() => void | Promise<void>)[] }) {
    super(options);
    this.policyPath = files.policyPath;
    this.stateDir = files.stateDir;
    this.#closers = files.closers;
  }

  /** Closes the JSONL files, and the store if fromFile opened it (a store you passed stays open). Idempotent. */
  async close(): Promise<void> {
    const closers = this.#closers.splice(0);
    for (const c of closers) await c();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * A {@link FileControl} over the policy and store the CLI would find (see the module notes).
 *
 * @example
 * const control = await fromFile({ principal: { agent: 'refund-agent' } });
 * const refund = protect(stripeRefund, { control, name: 'stripe.refund' });
 * // …
 * await control.close();
 */
export async function fromFile(options: FromFileOptions = {}): Promise<FileControl> {
  if (options === null || typeof options !== 'object') throw new InvalidArgument('fromFile options must be an object');
  const { env, cwd, path, policy: given, store: storeOption, stateDir: stateDirOption, jsonl, sinks, environment: envOption, ...controlOptions } = options;
  if (cwd !== undefined && (typeof cwd !== 'string' || cwd === '')) throw new InvalidArgument('cwd must be a non-empty path');
  if (path !== undefined && (typeof path !== 'string' || path === '')) throw new InvalidArgument('path must be a non-empty path to a policy file');
  if (sinks !== undefined && !Array.isArray(sinks)) throw new InvalidArgument('sinks must be an array of event sinks');
  const base = cwd ?? process.cwd();
  const policyPath = path !== undefined ? resolve(base, path) : policyFilePath({ env, cwd: base });
  // Everything that can be refused is checked before anything is opened or created.
  const policy = given ?? loadPolicyFile(policyPath).policy;
  const environment = envOption ?? environmentFromEnv(env);

  let store: StateStore;
  let sqliteFile: string | null = null;
  const closers: (() => void | Promise<void>)[] = [];
  if (storeOption !== undefined && typeof storeOption !== 'string') {
    store = storeOption;
  } else {
    const address = storeOption ?? `sqlite:${stateFilePath({ env, cwd: base, policyPath })}`;
    const parsed = parseStoreUrl(address);
    if (parsed.kind === 'sqlite') {
      sqliteFile = resolve(base, parsed.path);
      mkdirSync(dirname(sqliteFile), { recursive: true });
    }
    store = await openStore(parsed.kind === 'sqlite' ? `sqlite:${sqliteFile}` : address, controlOptions.clock ? { clock: controlOptions.clock } : {});
    closers.push(() => store.close());
  }
  const stateDir =
    jsonl === false
      ? null
      : stateDirOption !== undefined
        ? stateDirOption === null
          ? null
          : resolve(base, stateDirOption)
        : sqliteFile === null
          ? null
          : dirname(sqliteFile);
  const allSinks: EventSink[] = [];
  try {
    if (stateDir !== null) {
      const sink = jsonlFileSink(stateDir, jsonl === undefined || jsonl === false ? {} : jsonl);
      allSinks.push(sink);
      closers.unshift(() => sink.close());
    }
    allSinks.push(...(sinks ?? []));
    return new FileControl(
      { ...controlOptions, policy, store, sinks: allSinks, ...(environment !== undefined ? { environment } : {}) },
      { policyPath, stateDir, closers },
    );
  } catch (err) {
    for (const c of closers) await c();
    throw err;
  }
}
