// Playground figures: the built page in headless Chromium, persisted in IndexedDB, the six steps
// of the guide clicked through the page as a reader would (a guide button, then Run or Approve).
// Each step is timed inside the tab with performance.now(): from the click until the page is idle
// again (the entry shown, the store and the page's record saved). Then Reset, and the same steps
// again on that page: the code compiled and warm, the store fresh. Between the page's rounds, the
// same ten steps through the same modules and store on a second page with no DOM at all
// (scripts/bench/playground-kernel): what the figure costs before any page work. The floor,
// measured in the same tab in the same run: sql.js's bare export of the very database the steps
// left, plus one strict IndexedDB put of those bytes — the least one durable save costs — once
// per step.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { GUIDE } from '../../playground/src/guide.js';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = resolve(import.meta.dirname, '..', '..');
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

if (!existsSync(CHROMIUM)) {
  console.log(`playground six steps: skipped, ${CHROMIUM} is absent (apt-get install -y chromium)`);
  process.exit(0);
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
};

/** Serves `dir` at `/`, and sql.js's own dist (for the floor) at `/sqljs/`, on 127.0.0.1. */
async function serve(dir: string, sqljs: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const [base, rel] = path.startsWith('/sqljs/') ? [sqljs, path.slice('/sqljs/'.length)] : [dir, path.slice(1)];
    let file = normalize(join(base, rel));
    if (file !== base && !file.startsWith(base + sep)) return void res.writeHead(403).end();
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    if (!existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    res.end(readFileSync(file));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

/**
 * `CTRLRUN_BENCH_PROFILE=1`: also print where the tab's main thread spent the steps (Chromium's
 * sampling profiler), on a build left unminified so the functions keep their names.
 */
const PROFILE = process.env['CTRLRUN_BENCH_PROFILE'] === '1';
const dist = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-playground-'));
const sqljsDist = join(ROOT, 'node_modules', 'sql.js', 'dist');
const server = await (async () => {
  await build({
    configFile: join(ROOT, 'playground', 'vite.config.ts'),
    logLevel: 'warn',
    build: { outDir: dist, emptyOutDir: true, ...(PROFILE ? { minify: false, rolldownOptions: { output: { minify: false } } } : {}) },
  });
  return serve(dist, sqljsDist);
})();
// The second page: the same ten steps through the same modules and store, and no page around them
// (scripts/bench/playground-kernel), built by the playground's own Vite configuration.
const kernelDist = mkdtempSync(join(tmpdir(), 'ctrlrun-bench-kernel-page-'));
const kernelServer = await (async () => {
  await build({
    // The playground's own build (conditions, target, minification, CSP), on this page.
    configFile: join(ROOT, 'playground', 'vite.config.ts'),
    root: join(ROOT, 'scripts', 'bench', 'playground-kernel'),
    logLevel: 'warn',
    build: { outDir: kernelDist, emptyOutDir: true },
  });
  return serve(kernelDist, sqljsDist);
})();
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
const plan = GUIDE.flatMap((s) => s.actions.map((a) => [a.id, a.fill.kind === 'approve' ? 'approve' : 'run'] as const));
const WANT = [
  'executed',
  'approval_required',
  'approved',
  'approval_mismatch',
  'executed',
  'approval_mismatch',
  'denied',
  'reply_lost',
  'ambiguous_retry',
  'duplicate',
];
/** Fresh pages (each its own IndexedDB, its own cold start), so one busy moment of a shared machine does not make the figure. */
const ROUNDS = 9;

interface Step {
  id: string;
  ms: number;
  outcome: string;
}

/** One run of the six steps: each click's time, and the tab's main-thread CPU time over all of them. */
interface Round {
  steps: Step[];
  cpuMs: number;
}

async function openPage(): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  // tsx keeps function names with a helper the page does not have; the evaluated functions need it.
  await page.addInitScript('globalThis.__name = (f) => f');
  await page.goto(server.url);
  await page.waitForSelector('body[data-ready]');
  const ready = await page.getAttribute('body', 'data-ready');
  const persistent = await page.getAttribute('body', 'data-persistent');
  if (ready !== 'true' || persistent !== 'true')
    throw new Error(
      `the page is not ready with IndexedDB persistence (ready=${ready}, persistent=${persistent}): ${await page.locator('#status').innerText()}`,
    );
  return page;
}

/**
 * The six steps, clicked and timed inside the tab: the page's own time (kernel, store, IndexedDB,
 * DOM), not the driver's. Beside it, the main thread's CPU time (Chromium's `ThreadTime`), which a
 * busy machine stretches far less than the wall clock.
 */
async function sixSteps(page: Page): Promise<Round> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const threadTime = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'ThreadTime')?.value ?? NaN;
  const cpu0 = await threadTime();
  const steps = await page.evaluate(async (plan) => {
    const list = document.getElementById('entries')!;
    const output = document.getElementById('output')!;
    /** The step's entry is shown and the page is idle again (every save it makes has completed). */
    const settled = (n: number) =>
      new Promise<void>((done) => {
        const check = () => list.children.length >= n && output.getAttribute('aria-busy') === 'false';
        if (check()) return done();
        const watch = new MutationObserver(() => {
          if (check()) {
            watch.disconnect();
            done();
          }
        });
        watch.observe(list, { childList: true });
        watch.observe(output, { attributes: true, attributeFilter: ['aria-busy'] });
      });
    const out: { id: string; ms: number; outcome: string }[] = [];
    for (const [id, button] of plan) {
      const n = list.children.length + 1;
      const t0 = performance.now();
      document.getElementById(`fill-${id}`)!.click();
      document.getElementById(button)!.click();
      await settled(n);
      out.push({ id, ms: performance.now() - t0, outcome: (list.children[n - 1] as HTMLElement).dataset['outcome'] ?? '?' });
    }
    return out;
  }, plan);
  const cpuMs = ((await threadTime()) - cpu0) * 1000;
  await cdp.detach();
  const got = steps.map((s) => s.outcome);
  if (got.join() !== WANT.join()) throw new Error(`the six steps gave ${got.join(', ')}, not ${WANT.join(', ')}`);
  return { steps, cpuMs };
}

/** The ten steps through the kernel alone on a fresh page (cold), then again on a fresh store in that page: each total, in ms. */
async function kernelAlone(): Promise<{ cold: number; again: number }> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.addInitScript('globalThis.__name = (f) => f');
    await page.goto(kernelServer.url);
    await page.waitForSelector('body[data-ready]', { state: 'attached' });
    const run = async () => {
      const steps = await page.evaluate(() => (globalThis as unknown as { tenSteps(): Promise<[string, number, string][]> }).tenSteps());
      const got = steps.map((s) => s[2]);
      if (got.join() !== WANT.join()) throw new Error(`the kernel alone gave ${got.join(', ')}, not ${WANT.join(', ')}`);
      return steps.reduce((a, s) => a + s[1], 0);
    };
    const cold = await run();
    return { cold, again: await run() };
  } finally {
    await context.close();
  }
}

/** Presses Reset and waits until the page is idle again with only Reset's note shown (a fresh store, the counts at zero). */
async function resetPage(page: Page): Promise<void> {
  await page.click('#reset');
  await page.waitForFunction(() => {
    const list = document.getElementById('entries')!;
    return list.children.length === 1 && document.getElementById('output')!.getAttribute('aria-busy') === 'false';
  });
}

/** Self time per function over the steps, the largest first (`CTRLRUN_BENCH_PROFILE=1`). */
async function profiled(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
  await cdp.send('Profiler.start');
  await sixSteps(page);
  const { profile } = await cdp.send('Profiler.stop');
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  (profile.samples ?? []).forEach((id, i) => {
    const f = nodes.get(id)!.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop() ?? ''}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas?.[i] ?? 0) / 1000);
  });
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)
    .map(([k, v]) => `${v.toFixed(1).padStart(8)} ms  ${k}`);
}

try {
  const rounds: Round[] = [];
  let page!: Page;
  /** The same steps again on the same page after Reset: the code is compiled and warm, the store fresh. */
  const warm: Round[] = [];
  /** The kernel alone, no page: what the page's figure costs before any page work. */
  const alone: { cold: number; again: number }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (page) await page.context().close();
    page = await openPage();
    rounds.push(await sixSteps(page));
    await resetPage(page);
    warm.push(await sixSteps(page));
    // Interleaved with the page's rounds, so the machine's drift hits both alike.
    alone.push(await kernelAlone());
  }
  const totalOf = (round: Round) => round.steps.reduce((a, s) => a + s.ms, 0);
  const median = [...rounds].sort((a, b) => totalOf(a) - totalOf(b))[Math.floor(ROUNDS / 2)]!;
  const { steps } = median;

  // The floor, in the same tab: the database the steps left, exported bare by sql.js and put into
  // a scratch IndexedDB database with strict durability (as the store saves), timed per save.
  await page.addScriptTag({ url: `${server.url}sqljs/sql-wasm.js` });
  const floor = await page.evaluate(
    async ({ wasm, saves }) => {
      const req = <T>(r: IDBRequest<T>) => new Promise<T>((ok, fail) => ((r.onsuccess = () => ok(r.result)), (r.onerror = () => fail(r.error))));
      const open = (name: string, store: string) => {
        const r = indexedDB.open(name, 1);
        r.onupgradeneeded = () => void (r.result.objectStoreNames.contains(store) || r.result.createObjectStore(store));
        return req(r);
      };
      // The store keeps its bytes in pages (keys 0, 1, …) and their length under `length`; earlier
      // versions kept them whole under `database`.
      const kept = await open('ctrlrun-playground', 'sqljs');
      const store = kept.transaction('sqljs', 'readonly').objectStore('sqljs');
      const [keys, values] = await Promise.all([req(store.getAllKeys()), req(store.getAll())]);
      kept.close();
      const at = new Map(keys.map((k, i) => [k, values[i]]));
      let bytes = at.get('database') as Uint8Array | undefined;
      if (!bytes) {
        bytes = new Uint8Array(at.get('length') as number);
        for (const [k, v] of at) if (typeof k === 'number') bytes.set(v as Uint8Array, k * 4096);
      }
      const init = (
        globalThis as unknown as { initSqlJs: (c: object) => Promise<{ Database: new (b: Uint8Array) => { export(): Uint8Array; close(): void } }> }
      ).initSqlJs;
      const SQL = await init({ locateFile: () => wasm });
      const db = new SQL.Database(bytes);
      const scratch = await open('ctrlrun-bench-floor', 'sqljs');
      const put = async (data: Uint8Array) => {
        const tx = scratch.transaction('sqljs', 'readwrite', { durability: 'strict' });
        const done = new Promise<void>((ok, fail) => ((tx.oncomplete = () => ok()), (tx.onerror = () => fail(tx.error)), (tx.onabort = () => fail(tx.error))));
        tx.objectStore('sqljs').put(data, 'database');
        await done;
      };
      await put(db.export()); // warm
      const each: number[] = [];
      for (let i = 0; i < saves; i++) {
        const t0 = performance.now();
        await put(db.export());
        each.push(performance.now() - t0);
      }
      db.close();
      scratch.close();
      each.sort((a, b) => a - b);
      return { bytes: bytes.length, median: each[Math.floor(each.length / 2)]!, total: each.reduce((a, b) => a + b, 0) };
    },
    { wasm: `${server.url}sqljs/sql-wasm.wasm`, saves: steps.length },
  );

  const total = totalOf(median);
  const ms = (n: number) => `${n.toFixed(1)} ms`;
  console.log(`in Chromium ${browser.version()}, the built page, IndexedDB persistence on; timed in the tab, the median of ${ROUNDS} fresh pages`);
  console.log(
    `playground six steps, through the page ${ms(total).padStart(9)}   ${steps.length} clicks: ${steps.map((s) => `${s.id} ${s.ms.toFixed(0)}`).join(', ')} (target < 100 ms); rounds ${rounds.map((r) => totalOf(r).toFixed(0)).join(' / ')} ms, the quickest ${ms(Math.min(...rounds.map(totalOf)))}`,
  );
  console.log(
    `  main-thread CPU in those steps         ${ms(median.cpuMs).padStart(9)}   the tab's own work (JavaScript, sql.js, layout, paint); the rest is waiting for IndexedDB or for a core`,
  );
  const warmMedian = [...warm].sort((a, b) => totalOf(a) - totalOf(b))[Math.floor(ROUNDS / 2)]!;
  console.log(
    `  the same page again after Reset     ${ms(totalOf(warmMedian)).padStart(9)}   the code already compiled and warm, the store fresh: ${warmMedian.steps.map((s) => `${s.id} ${s.ms.toFixed(0)}`).join(', ')}; CPU ${ms(warmMedian.cpuMs)}`,
  );
  const medianOf = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const aloneCold = medianOf(alone.map((a) => a.cold));
  console.log(
    `  the kernel alone, no page            ${ms(aloneCold).padStart(9)}   the same ten steps, modules and store (IndexedDB, saves held as the page holds them) on a fresh page with no DOM: rounds ${alone.map((a) => a.cold.toFixed(0)).join(' / ')} ms; again on a fresh store ${ms(medianOf(alone.map((a) => a.again)))}; ${((aloneCold / total) * 100).toFixed(0)}% of the page's figure`,
  );
  console.log(
    `floor: one bare save per click        ${ms(floor.total).padStart(9)}   sql.js export + strict IndexedDB put of the same ${(floor.bytes / 1024).toFixed(0)} KiB database, ${ms(floor.median)} median, ${steps.length} times`,
  );
  console.log(`ratio floor / page                    ${`${((floor.total / total) * 100).toFixed(0)}%`.padStart(9)}`);
  if (PROFILE) {
    await page.context().close();
    console.log('where a fresh page spends the six steps (self time, sampled):');
    for (const line of await profiled(await openPage())) console.log(line);
  }
} finally {
  await browser.close();
  await server.close();
  await kernelServer.close();
  rmSync(dist, { recursive: true, force: true });
  rmSync(kernelDist, { recursive: true, force: true });
}
