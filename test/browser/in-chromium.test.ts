/**
 * The kernel's unit tests and the sql.js store's conformance suite, run inside headless
 * Chromium: the listed test files (see `harness/entry.ts`) are bundled with esbuild for the
 * browser (`browser` condition: sql.js's browser build, its `.wasm` served next to the page),
 * `vitest` replaced by a stand-in that runs Vitest's own `expect`. Every test must pass there.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Harness } from './harness/entry.js';
import {
  ARTIFACTS,
  BROWSER_TEST_TIMEOUT,
  describeInChromium,
  launchChromium,
  progressWatchdog,
  ROOT,
  serveStatic,
  SETUP_CEILING,
  SETUP_STALL_MS,
  type StaticServer,
} from './support.js';

const require = createRequire(import.meta.url);
let dir = '';
let server: StaticServer;
let browser: Browser;

describeInChromium('kernel and store suites in Chromium', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ctrlrun-harness-'));
    await build({
      entryPoints: [join(ROOT, 'test', 'browser', 'harness', 'entry.ts')],
      outfile: join(dir, 'harness.js'),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      conditions: ['@ctrlrun/source'],
      alias: { vitest: join(ROOT, 'test', 'browser', 'harness', 'vitest-shim.ts') },
      absWorkingDir: ROOT,
      logLevel: 'silent',
    });
    // sql.js's browser build looks for its wasm next to the page.
    copyFileSync(join(dirname(require.resolve('sql.js')), 'sql-wasm-browser.wasm'), join(dir, 'sql-wasm-browser.wasm'));
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>ctrlrun harness</title><pre id="log"></pre><script type="module" src="harness.js"></script>\n',
    );
    server = await serveStatic(dir);
    browser = await progressWatchdog('launching Chromium', SETUP_STALL_MS, () => launchChromium());
  }, SETUP_CEILING);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, BROWSER_TEST_TIMEOUT);

  it('every listed kernel and sql.js test passes inside Chromium', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(server.url);
    await page.waitForFunction(() => (globalThis as { __harness?: { done: boolean } }).__harness?.done === true, null, {
      timeout: BROWSER_TEST_TIMEOUT - 10_000,
      polling: 200,
    });
    const harness = (await page.evaluate(() => (globalThis as { __harness?: unknown }).__harness)) as Harness;
    const passed = harness.results.filter((r) => r.status === 'pass').length;
    const skipped = harness.results.filter((r) => r.status === 'skip').length;
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(join(ARTIFACTS, 'in-chromium.json'), `${JSON.stringify({ chromium: browser.version(), passed, skipped, ...harness }, null, 2)}\n`);
    expect(harness.error, 'the harness itself').toBeUndefined();
    expect(errors, 'uncaught errors in the page').toEqual([]);
    const failed = harness.results.filter((r) => r.status === 'fail').map((r) => `${r.file} > ${r.name}\n${r.error}`);
    expect(failed, 'tests that failed in Chromium').toEqual([]);
    const ran = new Set(harness.results.filter((r) => r.status === 'pass').map((r) => r.file));
    expect(
      harness.files.filter((f) => !ran.has(f)),
      'files with no passing test',
    ).toEqual([]);
    expect(harness.results.some((r) => r.name.includes('store conformance: sql.js on IndexedDB'))).toBe(true);
    console.log(
      `in Chromium ${browser.version()}: ${passed} passed, ${skipped} skipped across ${harness.files.length} files; ${JSON.stringify(harness.measurements)}`,
    );
  });
});
