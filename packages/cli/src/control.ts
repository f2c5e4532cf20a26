/**
 * For the commands that load the policy (`stats`, `delegate`, `revoke`, `verify`): the banner
 * under observe mode, the deployment's environment, and a `Control` composed as `from_file`
 * composes it (the policy's inline authority, a JSONL sink in the state directory).
 *
 * @module
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Control, InvalidArgument, jsonlSink, type EventSink, type Policy, type StateStore } from '@ctrlrun/kernel';
import { OBSERVE_BANNER } from './command.js';
import type { StoreTarget } from './discovery.js';
import type { CliIo } from './io.js';

/** Prints the observe-mode banner to stderr, first, every run. */
export function banner(policy: Policy, err: (line: string) => void): void {
  if (policy.mode === 'observe') err(OBSERVE_BANNER);
}

/** `$CTRLRUN_ENVIRONMENT` (blank is an error), else undefined: the policy's, else `production`. */
export function environmentFromEnv(io: CliIo): string | undefined {
  const v = io.env['CTRLRUN_ENVIRONMENT'];
  if (v === undefined) return undefined;
  if (v.trim() === '') throw new InvalidArgument('CTRLRUN_ENVIRONMENT is set but blank; unset it or name the deployment');
  return v;
}

/** A JSONL sink writing `events.jsonl`/`receipts.jsonl` beside a SQLite store; none for PostgreSQL. */
export function stateDirSinks(target: StoreTarget): EventSink[] {
  if (target.kind !== 'sqlite') return [];
  const dir = dirname(target.path);
  return [
    jsonlSink({
      append: (file, line) => {
        mkdirSync(dir, { recursive: true });
        appendFileSync(join(dir, file), line);
      },
    }),
  ];
}

/** A Control over the operator's policy and store, as an application's `from_file` builds it. */
export function operatorControl(io: CliIo, policy: Policy, store: StateStore, target: StoreTarget, warn: (line: string) => void): Control {
  const environment = environmentFromEnv(io);
  return new Control({
    policy,
    store,
    sinks: stateDirSinks(target),
    logger: { warn: (message: string) => warn(`warning: ${message}`) },
    ...(environment !== undefined ? { environment } : {}),
  });
}
