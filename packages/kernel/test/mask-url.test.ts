import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maskUrl } from '../src/mask-url.js';

/** Passwords rich in what a URL reads as structure: `@ : / # ? % & =`, escapes, unicode, the mask's own `*`. */
const password = fc.string({
  minLength: 1,
  maxLength: 24,
  unit: fc.oneof(
    fc.constantFrom('@', ':', '/', '#', '?', '%', '%40', '%2F', '&', '=', ' ', '*', '[', ']', '\\', 'é', '日', '😀', 's', '3'),
    fc.string({ minLength: 1, maxLength: 1, unit: 'grapheme' }),
  ),
});
const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
const host = fc.oneof(
  fc.tuple(label, fc.constantFrom('example', 'internal', 'db'), fc.constantFrom('com', 'net', 'local')).map((p) => p.join('.')),
  fc.ipV4(),
);
const user = fc.oneof(fc.stringMatching(/^[a-z][a-z0-9._-]{0,8}$/), fc.stringMatching(/^[a-z]{1,6}@[a-z]{1,6}$/));
const tail = fc.record({
  port: fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined }),
  path: fc.option(fc.stringMatching(/^\/[a-z0-9_]{0,10}$/), { nil: undefined }),
  query: fc.option(fc.constantFrom('sslmode=require', 'connect_timeout=5&application_name=app', 'schema=s1'), { nil: undefined }),
  fragment: fc.option(fc.constantFrom('top', 'x-y'), { nil: undefined }),
});
const scheme = fc.constantFrom('postgres', 'postgresql', 'http', 'https', 'mysql', 'redis', 'amqp');
/** Where the password sits: after a user, alone after `:`, as the whole userinfo (a token), or as `?password=`. */
const shape = fc.constantFrom('user:pw', ':pw', 'pw', 'query', 'opaque');

interface Built {
  readonly url: string;
  /** The password as written into `url`, and where. */
  readonly written: string;
  readonly at: number;
  readonly host: string;
}

function build(
  s: string,
  u: string,
  pw: string,
  encode: boolean,
  h: string,
  t: { port?: number | undefined; path?: string | undefined; query?: string | undefined; fragment?: string | undefined },
  form: string,
): Built {
  let written = pw;
  if (encode || form === 'query') {
    try {
      written = encodeURIComponent(pw);
    } catch {
      written = pw; // a lone surrogate cannot be encoded: written raw
    }
  }
  const after = `${h}${t.port === undefined ? '' : `:${t.port}`}${t.path ?? ''}`;
  const fragment = t.fragment === undefined ? '' : `#${t.fragment}`;
  if (form === 'query') {
    const prefix = `${s}://${after}?${t.query === undefined ? '' : `${t.query}&`}password=`;
    return { url: `${prefix}${written}${fragment}`, written, at: prefix.length, host: h };
  }
  const query = t.query === undefined ? '' : `?${t.query}`;
  const userinfoHead = form === 'user:pw' ? `${u}:` : form === ':pw' ? ':' : '';
  const prefix = form === 'opaque' ? `${s}:${u}:` : `${s}://${userinfoHead}`;
  return { url: `${prefix}${written}@${after}${query}${fragment}`, written, at: prefix.length, host: h };
}

/** Substrings of `text` of length ≥ 4. */
function longSubstrings(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i++) for (let j = i + 4; j <= text.length; j++) out.push(text.slice(i, j));
  return out;
}

describe('maskUrl', () => {
  it('never shows the password (nor a 4-character piece of it found nowhere else in the URL), and keeps the host when the URL parses', () => {
    fc.assert(
      fc.property(scheme, user, password, fc.boolean(), host, tail, shape, (s, u, pw, encode, h, t, form) => {
        const b = build(s, u, pw, encode, h, t, form);
        const shown = maskUrl(b.url);
        const before = b.url.slice(0, b.at);
        const after = b.url.slice(b.at + b.written.length);
        // What the mask wrote is not the URL's: judge the text between masks.
        const pieces = shown.split('***');
        for (const secret of new Set([pw, b.written])) {
          for (const piece of [secret, ...longSubstrings(secret)]) {
            if (before.includes(piece) || after.includes(piece)) continue;
            expect(
              pieces.some((p) => p.includes(piece)),
              `${JSON.stringify(b.url)} shown as ${JSON.stringify(shown)} keeps ${JSON.stringify(piece)}`,
            ).toBe(false);
          }
        }
        let parsed: URL | null = null;
        try {
          parsed = new URL(b.url);
        } catch {
          parsed = null;
        }
        if (parsed !== null && parsed.hostname === b.host) expect(shown, b.url).toContain(b.host);
      }),
      { numRuns: 300 },
    );
  });

  it('masks a password holding an @ whole: s3cr3t@ssw0rd', () => {
    expect(maskUrl('postgres://u:s3cr3t@ssw0rd@db.example.com:5432/app')).toBe('postgres://***@db.example.com:5432/app');
    expect(maskUrl('postgres://u:s3cr3t%40ssw0rd@db.example.com/app?sslmode=require')).toBe('postgres://***@db.example.com/app?sslmode=require');
  });

  it('masks a password holding : / # ? unescaped, a token as the whole userinfo, and credential query values', () => {
    expect(maskUrl('postgresql://u:pa:ss/wo#rd?x@h:5432/db')).toBe('postgresql://***@h:5432/db');
    expect(maskUrl('https://ghp_token123@mcp.example.com/mcp')).toBe('https://***@mcp.example.com/mcp');
    expect(maskUrl('postgres://h/db?user=u&password=hunter22&sslmode=require#x')).toBe('postgres://h/db?user=u&password=***&sslmode=require#x');
    expect(maskUrl('https://h/mcp?access_token=abc&api%5Fkey=def&page=2')).toBe('https://h/mcp?access_token=***&api%5Fkey=***&page=2');
    expect(maskUrl('postgres:u:s3cr3t@ssw0rd@h/db')).toBe('postgres:***@h/db');
  });

  it('leaves what has no userinfo as it is: a URL without one, file paths and sqlite:PATH holding an @', () => {
    for (const plain of [
      'postgres://db.example.com:5432/app?sslmode=require',
      'sqlite:/home/me@work/state.db',
      'sqlite:./me@work.db',
      'sqlite:///home/me@work/state.db',
      'sqlite://me@work/state.db',
      'file:///srv/a@b/state.db',
      '/srv/a@b/state.db',
      'pglite:~/data@1',
      'sql.js in memory',
    ])
      expect(maskUrl(plain)).toBe(plain);
  });
});
