/**
 * The docs example (`examples/vitepress`): a VitePress site with one module script in its head and
 * `<ctrlrun-try-it>` tags in Markdown pages, built with VitePress and driven in Chromium. The
 * element renders and step 1 runs; on the page that embeds it twice, the six steps run in each
 * element (two independent stores), with the page in light and in dark, at 375 px wide, nothing
 * overflowing sideways. Screenshots go to `test-artifacts/`; timings are reported, not asserted.
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWidget } from '../../playground/widget/build.js';
import { expectStep, SPEC } from './six-steps.js';
import { ARTIFACTS, BROWSER_TEST_TIMEOUT, describeInChromium, ROOT } from './support.js';
import { act, currentStepUncovered, openAllDetails, overflowing, ready, seriousViolations, startSession, type ChromiumSession } from './widget-support.js';

const EXAMPLE = join(ROOT, 'examples', 'vitepress');
const VITEPRESS = join(EXAMPLE, 'node_modules', 'vitepress', 'bin', 'vitepress.js');
/** A VitePress build on a loaded machine: minutes, not seconds. */
const BUILD_TIMEOUT = 600_000;

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${out}`))));
  });
}

let site = '';
let work = '';
let session: ChromiumSession;

if (!existsSync(VITEPRESS) && process.env['CI'] === 'true') {
  // Under CI a missing component is a failure: .ci/run installs the example (npm ci --prefix examples/vitepress).
  describe('the VitePress docs example', () => {
    it('is installed (CI=true: .ci/run runs npm ci --prefix examples/vitepress)', () => {
      expect.fail(`VitePress is not installed in examples/vitepress; run: npm ci --prefix examples/vitepress`);
    });
  });
} else if (!existsSync(VITEPRESS)) {
  describe.skip(`the VitePress docs example — skipped: VitePress is not installed in examples/vitepress (cd examples/vitepress && npm install)`, () => {
    it('builds and runs', () => undefined);
  });
  console.warn('widget-docs: skipped — VitePress is not installed in examples/vitepress (cd examples/vitepress && npm install)');
} else {
  describeInChromium('the VitePress docs example in Chromium', () => {
    beforeAll(async () => {
      // Built in a copy of the example, so the source tree never holds build output (another
      // test, ctrlrun scan over examples/, reads that tree while this one runs).
      work = mkdtempSync(join(tmpdir(), 'ctrlrun-vitepress-src-'));
      cpSync(join(EXAMPLE, 'docs'), join(work, 'docs'), {
        recursive: true,
        filter: (from) => !/[\\/](public[\\/]ctrlrun|\.vitepress[\\/](cache|dist))$/.test(from),
      });
      cpSync(join(EXAMPLE, 'package.json'), join(work, 'package.json'));
      symlinkSync(join(EXAMPLE, 'node_modules'), join(work, 'node_modules'), 'dir');
      await buildWidget(join(work, 'docs', 'public', 'ctrlrun'));
      site = mkdtempSync(join(tmpdir(), 'ctrlrun-vitepress-'));
      const t0 = performance.now();
      await run(process.execPath, [VITEPRESS, 'build', 'docs', '--outDir', site], work);
      session = await startSession(site, '/', 'widget-docs-metrics.json');
      session.metrics['vitepressBuildMs'] = Math.round(performance.now() - t0);
    }, BUILD_TIMEOUT);

    afterAll(async () => {
      await session?.close();
      if (site) rmSync(site, { recursive: true, force: true });
      if (work) rmSync(work, { recursive: true, force: true });
    }, BROWSER_TEST_TIMEOUT);

    it('the Markdown page renders the element and step 1 runs', async () => {
      const page = await session.open('index.html', { width: 1280, height: 800, colorScheme: 'light' });
      const w = page.locator('ctrlrun-try-it');
      await expect.poll(() => w.locator('.step').count(), { timeout: 60_000 }).toBe(6);
      await ready(w);
      session.metrics['readyMsFromNavigation'] = Number(await w.getAttribute('data-ready-at'));
      const shown = await act(w, '1');
      expectStep('1', SPEC[0]![1], shown);
      expect(await seriousViolations(page, ROOT), 'axe, on the page with the element').toEqual([]);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'widget-vitepress.png'), fullPage: true });
      expect(session.outside).toEqual([]);
    });

    for (const colorScheme of ['light', 'dark'] as const) {
      it(`two elements on one page, two stores: the six steps in each, page in ${colorScheme}, 375 px wide`, async () => {
        const wasmBefore = session.server.requested.filter((p) => p.endsWith('.wasm')).length;
        const page = await session.open('twice.html', { width: 375, height: 740, colorScheme });
        for (const id of ['#first', '#second']) {
          const w = page.locator(id);
          await w.scrollIntoViewIfNeeded();
          await ready(w);
          for (const [step, want] of SPEC) {
            expectStep(step, want, await act(w, step));
            // The step it moved to is in view, clear of VitePress's sticky bars.
            await expect.poll(() => currentStepUncovered(w), { timeout: 30_000 }).toMatchObject({ uncovered: true });
          }
          expect(await w.locator('.chain-verdict').getAttribute('data-ok')).toBe('true');
        }
        // Each store saw only its own six steps: the same receipts, not twice as many.
        const counts = await page.locator('ctrlrun-try-it .chain-verdict').evaluateAll((ps) => ps.map((p) => (p as HTMLElement).dataset['count']));
        expect(counts[0]).toBe(counts[1]);
        expect(Number(counts[0])).toBe(8);
        expect(session.server.requested.filter((p) => p.endsWith('.wasm')).length - wasmBefore, 'one wasm fetch for both elements').toBe(1);
        for (const id of ['#first', '#second']) await openAllDetails(page.locator(id));
        expect(await overflowing(page)).toEqual([]);
        await page.screenshot({ path: join(ARTIFACTS, `widget-vitepress-twice-375-${colorScheme}.png`), fullPage: true });
        await page.locator('#first').screenshot({ path: join(ARTIFACTS, `widget-vitepress-first-375-${colorScheme}.png`) });
        await page.locator('#second').screenshot({ path: join(ARTIFACTS, `widget-vitepress-second-375-${colorScheme}.png`) });
        expect(session.outside).toEqual([]);
      });
    }
  });
}
