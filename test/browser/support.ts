/**
 * What the Chromium-driven tests share: where Chromium is (installed with apt, never
 * downloaded), whether to skip or fail without it, a launcher, and a static server on 127.0.0.1.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { describe, it } from 'vitest';
import { scaled } from '../support/load.js';

export { progressWatchdog } from '../support/load.js';

/** The browser: Debian's `chromium` package (`apt-get install -y chromium`). */
export const CHROMIUM = '/usr/bin/chromium';
/** The repository root. */
export const ROOT = resolve(import.meta.dirname, '..', '..');
/** Where screenshots and measurements go (gitignored). */
export const ARTIFACTS = join(ROOT, 'test-artifacts');

/**
 * Per test: generous on a free machine (a test takes 2–7 s there), and stretched by the measured
 * load (`test/support/load.ts`), because CI machines are shared and a browser under load is slow.
 * No assertion is about time.
 */
export const BROWSER_TEST_TIMEOUT = scaled(120_000);
/** Playwright's per-action and navigation timeout inside a test, stretched the same way. */
export const PAGE_TIMEOUT = scaled(60_000);
/**
 * `beforeAll` (build + launch) is guarded by {@link progressWatchdog}, not by this: a ceiling far
 * above any live build, so that a slow build on a busy machine is waited for, never skipped.
 */
export const SETUP_CEILING = scaled(15 * 60_000);
/** How long setup may go without progress (a module built, a chunk written, the browser up) before it fails. */
export const SETUP_STALL_MS = scaled(120_000);

const inCI = (): boolean => /^(1|true|yes)$/i.test(process.env['CI'] ?? '');

/**
 * `describe` when Chromium is installed. Without it: skipped with a one-line reason, except under
 * `CI=true`, where a missing browser is a failure (CI installs it).
 */
export function describeInChromium(name: string, body: () => void): void {
  if (existsSync(CHROMIUM)) {
    describe(name, { timeout: BROWSER_TEST_TIMEOUT }, body);
  } else if (inCI()) {
    describe(name, () => {
      it(`needs ${CHROMIUM}, which CI must install (apt-get install -y chromium)`, () => {
        throw new Error(`${CHROMIUM} is missing under CI=true: .ci/run installs it with apt-get install -y chromium`);
      });
    });
  } else {
    const reason = `${CHROMIUM} is absent (apt-get install -y chromium)`;
    // Printed, not only in the suite's name (which the default reporter does not show for a skip).
    console.warn(`[skipped] ${name}: ${reason}`);
    describe.skip(`${name} — skipped: ${reason}`, body);
  }
}

/** Headless Chromium with nothing of its own on the network; its launch may take {@link SETUP_STALL_MS}. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    timeout: SETUP_STALL_MS,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/** A static server for `dir`, mounted at `prefix` (e.g. `/try/`), on 127.0.0.1 and a free port. */
export interface StaticServer {
  /** `http://127.0.0.1:<port><prefix>` */
  readonly url: string;
  readonly origin: string;
  /** Every path requested, in order. */
  readonly requested: string[];
  close(): Promise<void>;
}

/** Serves files from `dir` under `prefix`; `…/` serves `index.html`; nothing outside `dir`. */
export async function serveStatic(dir: string, prefix = '/'): Promise<StaticServer> {
  const base = resolve(dir);
  const requested: string[] = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requested.push(path);
    if (!path.startsWith(prefix)) return void res.writeHead(404).end();
    let file = normalize(join(base, path.slice(prefix.length)));
    if (file !== base && !file.startsWith(base + sep)) return void res.writeHead(403).end();
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    if (!existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    res.end(readFileSync(file));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}${prefix}`,
    origin,
    requested,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
