/**
 * One mask for every address a person reads: a store URL, an upstream URL, a connection string
 * in a banner, a refusal or a driver error. Pure string work (no URL parser), so it also masks
 * what no parser accepts: a password holding a raw `@`, `:`, `/`, `?` or `#`.
 *
 * @module
 */

/** What replaces a hidden part. */
const MASK = '***';

/** Query keys whose value is a credential (libpq takes `?password=`; tokens ride in queries too). */
const SECRET_KEY = /pass|pwd|secret|token|key|auth|cred|sig/i;

/** A leading scheme and `://`, where an authority (and so perhaps a userinfo) follows. */
const AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/** A leading scheme and `:` (`postgres:`, `sqlite:`). */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/** Schemes that name a local file or directory, never a server: what follows is a path. */
const FILE_SCHEME = /^(?:sqlite|file|pglite):$/i;

/** `key=value` pairs of a query (up to the fragment), with the value of a credential-named key masked. */
function maskQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      let key = pair.slice(0, eq);
      try {
        key = decodeURIComponent(key.replace(/\+/g, ' '));
      } catch {
        // A malformed escape: judge the key as written.
      }
      return SECRET_KEY.test(key) && eq < pair.length - 1 ? `${pair.slice(0, eq + 1)}${MASK}` : pair;
    })
    .join('&');
}

/** `rest` (what follows the userinfo) with the credential values of its query masked. */
function maskAfterHost(rest: string): string {
  const q = rest.indexOf('?');
  if (q < 0) return rest;
  const hash = rest.indexOf('#', q);
  const end = hash < 0 ? rest.length : hash;
  return `${rest.slice(0, q + 1)}${maskQuery(rest.slice(q + 1, end))}${rest.slice(end)}`;
}

/**
 * `url` as it may be shown: the whole userinfo (user and password) replaced by `***`, and the
 * value of every query parameter named like a credential (`password`, `sslpassword`, `token`,
 * `api_key`…) replaced by `***`; the scheme, host, port, path and the other parameters stay.
 *
 * The userinfo runs from after `://` to the string's **last** `@`, not to the first `/`, `?` or
 * `#` as a URL parser reads it: a password may hold any of them unescaped (`s3cr3t@ssw0rd`,
 * `pa/ss#word`), and the last `@` covers every reading. The price, in the rare URL whose path or
 * query holds an `@` of its own, is a host hidden with the rest.
 *
 * A string with no `scheme://` is masked the same way after its scheme (`postgres:user:pw@host`), unless
 * what follows the scheme is a path (starts with `/`, `.`, `~` or `\\`), where an `@` is part of a name;
 * so is every `@` of a local address (`sqlite:`, `file:`, `pglite:`), which has no userinfo.
 */
export function maskUrl(url: string): string {
  const scheme = SCHEME.exec(url)?.[0] ?? '';
  if (FILE_SCHEME.test(scheme)) return maskAfterHost(url);
  const authority = AUTHORITY.exec(url);
  let start: number;
  if (authority) {
    start = authority[0].length;
  } else {
    start = scheme.length;
    if (/^[/.~\\]/.test(url.slice(start))) return maskAfterHost(url);
  }
  const at = url.lastIndexOf('@');
  if (at < start) return `${url.slice(0, start)}${maskAfterHost(url.slice(start))}`;
  return `${url.slice(0, start)}${MASK}${maskAfterHost(url.slice(at))}`;
}
