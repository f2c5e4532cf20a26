/**
 * Where the policy and the store are (docs/spec/04-surfaces.md §1): the policy is `$CTRLRUN_CONFIG`, else
 * `./ctrlrun.yaml`; the store is `--store-url`, else `$CTRLRUN_STORE_URL`, else the SQLite file
 * `$CTRLRUN_STATE`, else `.ctrlrun/state.db` beside the policy.
 *
 * @module
 */
import { isAbsolute, resolve } from 'node:path';
import { InvalidArgument, maskUrl } from '@ctrlrun/kernel';
import { parseStoreUrl, policyFilePath, stateFilePath } from '@ctrlrun/store-node';
import { CliRefusal } from './errors.js';
import type { CliIo } from './io.js';

export { loadPolicyFile, POLICY_FILE, readPolicyText, STATE_DIR, STATE_FILE } from '@ctrlrun/store-node';

/** `$NAME`, refusing a set-but-blank value (blank is a mistake, never "use the default"). */
function envValue(io: CliIo, name: string, error: (m: string) => Error): string | null {
  const v = io.env[name];
  if (v === undefined) return null;
  if (v.trim() === '') throw error(`${name} is set but blank; unset it or give it a value`);
  return v;
}

/** The policy path: `$CTRLRUN_CONFIG`, else `./ctrlrun.yaml` (absolute), as `fromFile` finds it. */
export function policyPath(io: CliIo): string {
  return policyFilePath({ env: io.env, cwd: io.cwd });
}

/** Where a store lives. */
export type StoreTarget = { readonly kind: 'sqlite'; readonly path: string; readonly isDefault: boolean } | { readonly kind: 'postgres'; readonly url: string };

/** The address `openStore` takes for a target. */
export function storeAddress(target: StoreTarget): string {
  return target.kind === 'sqlite' ? `sqlite:${target.path}` : target.url;
}

/** A target for messages: a file path, or the URL without its password. */
export function describeTarget(target: StoreTarget): string {
  if (target.kind === 'sqlite') return target.path;
  return maskUrl(target.url);
}

/** The default SQLite file: `$CTRLRUN_STATE`, else `.ctrlrun/state.db` beside the policy, as `fromFile` finds it. */
export function defaultStatePath(io: CliIo): string {
  return stateFilePath({ env: io.env, cwd: io.cwd });
}

/**
 * Resolves `--store-url` (the flag wins over `$CTRLRUN_STORE_URL`): absent → the default SQLite
 * file; `sqlite://PATH` (or `sqlite:PATH`) → that file, relative to the working directory;
 * `postgres://…`/`postgresql://…` → PostgreSQL; anything else → a refusal (exit 1).
 */
export function storeTarget(io: CliIo, flag: string | undefined): StoreTarget {
  const url = flag ?? envValue(io, 'CTRLRUN_STORE_URL', (m) => new CliRefusal(m));
  if (url === null || url === undefined) return { kind: 'sqlite', path: defaultStatePath(io), isDefault: true };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'sqlite') {
    // One parser for SQLite addresses (store-node's): a path only, no query string or fragment.
    let path: string;
    try {
      const address = parseStoreUrl(url);
      if (address.kind !== 'sqlite') throw new InvalidArgument(`not a SQLite address`);
      path = address.path;
    } catch (err) {
      throw new CliRefusal(`the store URL ${JSON.stringify(maskUrl(url))} is refused: ${(err as Error).message}; expected sqlite://<path>`);
    }
    return { kind: 'sqlite', path: isAbsolute(path) ? path : resolve(io.cwd, path), isDefault: false };
  }
  if ((scheme === 'postgres' || scheme === 'postgresql') && url.slice(scheme.length + 1).startsWith('//')) return { kind: 'postgres', url };
  throw new CliRefusal(`no backend for the store URL ${JSON.stringify(maskUrl(url))}; expected sqlite://<path> or postgresql://…`);
}
