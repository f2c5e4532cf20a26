/**
 * `<ctrlrun-try-it>` keeps its own type scale whatever the page sets: on a page with large type
 * (`html`/`body { font-size: 40px }`, the other text properties a page may set) at 375 px,
 * the element is exactly as wide as on a plain page, nothing in it overflows sideways, and its
 * text is the element's own size and font (issue 27: it once overflowed a 375 px screen by 44 px).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildWidget } from '../../playground/widget/build.js';
import { BROWSER_TEST_TIMEOUT, describeInChromium } from './support.js';
import { SPEC } from './six-steps.js';
import { act, openAllDetails, overflowing, ready, startSession, widgetPage, type ChromiumSession } from './widget-support.js';

/**
 * Large type as pages set it: the root font size (what rem is), the body's (inherited), other
 * inherited text properties, and a rule that names the element itself (`main > *`), which beats
 * `:host` unless the element's own declarations are important. The page's heading is kept from
 * overflowing on its own account.
 */
const LARGE_TYPE = `<style>
  html { font-size: 40px; }
  body { font-size: 40px; line-height: 3; font-family: 'Comic Sans MS', cursive; letter-spacing: 4px; word-spacing: 12px;
         font-weight: 900; font-style: italic; text-transform: uppercase; text-align: right; white-space: nowrap; text-indent: 30px; }
  main > * { font-size: 40px; line-height: 3; letter-spacing: 3px; font-family: fantasy; }
  h1 { font-size: 16px; letter-spacing: 0; white-space: normal; }
</style>`;

let dist = '';
let session: ChromiumSession;

/** What the element's own layout and text measure. */
async function measure(page: Page) {
  return page.evaluate(() => {
    const host = document.querySelector('ctrlrun-try-it')!;
    const root = host.shadowRoot!;
    const style = (el: Element) => getComputedStyle(el);
    const texts = ['.root', '.status', 'button', 'label', 'input', 'pre', 'h2', '.hint']
      .map((sel) => root.querySelector(sel))
      .filter((el): el is Element => el !== null)
      .map((el) => {
        const s = style(el);
        return `${el.tagName.toLowerCase()}.${String(el.className)} ${s.fontSize}/${s.lineHeight} ${s.fontFamily} ${s.fontWeight} ${s.fontStyle} ${s.letterSpacing} ${s.wordSpacing} ${s.textTransform} ${s.textAlign} ${s.whiteSpace}`;
      });
    return {
      hostWidth: host.getBoundingClientRect().width,
      hostScrollWidth: host.scrollWidth,
      rootScrollWidth: root.querySelector<HTMLElement>('.root')!.scrollWidth,
      pageScrollWidth: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
      texts,
    };
  });
}

describeInChromium('<ctrlrun-try-it> on a page with large type', () => {
  beforeAll(async () => {
    dist = mkdtempSync(join(tmpdir(), 'ctrlrun-widget-type-'));
    await buildWidget(dist);
    const tag = '<ctrlrun-try-it id="a"></ctrlrun-try-it>';
    writeFileSync(join(dist, 'plain.html'), widgetPage([tag]));
    writeFileSync(join(dist, 'large.html'), widgetPage([tag]).replace('</head>', `${LARGE_TYPE}\n  </head>`));
    session = await startSession(dist, '/w/', 'widget-type-scale-metrics.json');
  }, BROWSER_TEST_TIMEOUT);

  afterAll(async () => {
    await session?.close();
    if (dist) rmSync(dist, { recursive: true, force: true });
  }, BROWSER_TEST_TIMEOUT);

  it('at 375 px with html and body { font-size: 40px }: through the six steps nothing overflows, and the text and width are as on a plain page', async () => {
    const shown: Awaited<ReturnType<typeof measure>>[] = [];
    for (const file of ['plain.html', 'large.html']) {
      const page = await session.open(file, { width: 375, height: 740 });
      const w = page.locator('#a');
      await w.scrollIntoViewIfNeeded();
      await ready(w);
      // Every state the guide goes through, with the machinery and the chain opened after each.
      for (const [step] of SPEC) {
        await act(w, step);
        await openAllDetails(w);
        expect(await overflowing(page), `${file} after step ${step}`).toEqual([]);
      }
      const m = await measure(page);
      expect(m.hostScrollWidth, `${file}: the element's scrollWidth`).toBeLessThanOrEqual(375);
      expect(m.rootScrollWidth, `${file}: its content's scrollWidth`).toBeLessThanOrEqual(375);
      expect(m.pageScrollWidth, `${file}: the page's scrollWidth`).toBeLessThanOrEqual(375);
      shown.push(m);
    }
    const [plain, large] = shown;
    expect(large!.texts, 'the page set none of the text properties inside the element').toEqual(plain!.texts);
    expect(large!.texts[0]).toMatch(/^div\.root 14px\//);
    expect(large!.hostWidth).toBe(plain!.hostWidth);
    expect(session.outside).toEqual([]);
  });
});
