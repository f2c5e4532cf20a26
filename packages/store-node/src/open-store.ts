/**
 * `openStore(url)`: one address for every server store. A bare path or `sqlite:PATH` is a SQLite
 * file (better-sqlite3); `postgres://…` / `postgresql://…` is a PostgreSQL server (pg);
 * `pglite:` / `pglite:DIR` is PGlite, in memory or in a directory. Each driver is imported only
 * when its scheme is used, so an install carries only the drivers it opens.
 *
 * @module
 */
import { InvalidArgument, maskUrl, type Clock } from '@ctrlrun/kernel';
import { type SqlStateStore } from '@ctrlrun/kernel/store';

/** Options of {@link openStore}, shared by every driver. */
export interface OpenStoreOptions {
  /** The clock every decision and stored timestamp uses (the only test seam). */
  clock?: Clock;
  /** Open an up-to-date store for reading only: nothing created or migrated, every write refused. */
  readOnly?: boolean;
}

/** The addresses {@link openStore} accepts, for messages. */
export const ACCEPTED_STORE_URLS = 'a file path, sqlite:PATH, sqlite://PATH, postgres://…, postgresql://…, pglite: or pglite:DIR';

/** A scheme is two or more letters before a colon; a single letter is a Windows drive (`C:\…`). */
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]+):/;

/** Which driver an address names, and what that driver is handed. */
export type StoreAddress =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string }
  | { readonly kind: 'pglite'; readonly dir: string | null };

/**
 * Refuses a query string or fragment in a file or directory address: `sqlite:q.db?mode=ro` would
 * otherwise name a file literally called `q.db?mode=ro`. Options go in {@link OpenStoreOptions}.
 */
function refuseUrlParts(url: string, path: string): void {
  const at = path.search(/[?#]/);
  if (at < 0) return;
  const part = path[at] === '?' ? 'a query string' : 'a fragment';
  throw new InvalidArgument(
    `store url ${JSON.stringify(maskUrl(url))} has ${part} (${JSON.stringify(maskUrl(path.slice(at)))}), which openStore does not take: the address names a file or directory only, and options such as readOnly go in openStore's options. Nothing was opened or created.`,
  );
}

/**
 * Parses a store address without opening anything. `sqlite:PATH` and `sqlite://PATH` both name
 * the file PATH exactly as written (`sqlite:///srv/ctrlrun.db` is `/srv/ctrlrun.db`); nothing is
 * percent-decoded. A `?` or `#` in a SQLite path or PGlite directory is refused (a URL's query
 * or fragment is not part of a file name; SQLite URI parameters are not supported).
 */
export function parseStoreUrl(url: string): StoreAddress {
  if (typeof url !== 'string' || url.trim() === '') throw new InvalidArgument(`store url must be a non-empty string: ${ACCEPTED_STORE_URLS}`);
  const scheme = SCHEME.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    refuseUrlParts(url, url);
    return { kind: 'sqlite', path: url };
  }
  const rest = url.slice(scheme.length + 1);
  switch (scheme) {
    case 'sqlite': {
      const path = rest.startsWith('//') ? rest.slice(2) : rest;
      if (path === '') throw new InvalidArgument(`store url ${JSON.stringify(maskUrl(url))} names no file: sqlite:PATH`);
      refuseUrlParts(url, path);
      return { kind: 'sqlite', path };
    }
    case 'postgres':
    case 'postgresql':
      if (!rest.startsWith('//'))
        throw new InvalidArgument(`store url ${JSON.stringify(maskUrl(url))} is not a PostgreSQL URL: postgres://user@host:port/database`);
      return { kind: 'postgres', url };
    case 'pglite': {
      const dir = rest.startsWith('//') ? rest.slice(2) : rest;
      refuseUrlParts(url, dir);
      return { kind: 'pglite', dir: dir === '' ? null : dir };
    }
    default:
      throw new InvalidArgument(
        `store url ${JSON.stringify(maskUrl(url))} has an unknown scheme ${JSON.stringify(scheme)}: accepted are ${ACCEPTED_STORE_URLS} (a file whose name contains a colon: write it as sqlite:PATH or ./PATH)`,
      );
  }
}

/**
 * Opens the store at `url`, migrated and ready (a reader: only an up-to-date one).
 *
 * @example
 * const store = await openStore('./ctrlrun.db');              // SQLite file (better-sqlite3)
 * const store = await openStore('sqlite:/srv/ctrlrun.db');
 * const store = await openStore('postgres://ctrlrun@db.internal/ctrlrun');   // PostgreSQL (pg)
 * const store = await openStore('pglite:./ctrlrun-pgdata');                 // PGlite in a directory
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<SqlStateStore> {
  if (typeof options !== 'object' || options === null) throw new InvalidArgument('openStore options must be an object');
  const address = parseStoreUrl(url);
  const { clock, readOnly } = options;
  switch (address.kind) {
    case 'sqlite': {
      const { createBetterSqlite3Store } = await import('./sqlite/better-sqlite3.js');
      return createBetterSqlite3Store(address.path, { clock, readOnly });
    }
    case 'postgres':
      return (await import('./postgres/pg.js')).openPgStore(address.url, { clock, readOnly });
    case 'pglite':
      return (await import('./pglite/pglite.js')).openPgliteStore(address.dir, { clock, readOnly });
  }
}
