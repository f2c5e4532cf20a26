/**
 * The playground's build. Workspace packages resolve to their TypeScript source (the
 * `@ctrlrun/source` condition) and sql.js to its browser build (the `browser` condition); the
 * `.wasm` is an asset of the app. `base` is relative by default, so the built folder works from
 * any static host and any path; `PLAYGROUND_BASE=/try/` (or `vite build --base`) fixes it.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultClientConditions, defineConfig, type Plugin } from 'vite';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
/** A package's version; sql.js exports no `./package.json`, so it is found from the main file. */
const version = (pkg: string, file = 'package.json'): string => {
  const path = file === 'package.json' ? require.resolve(`${pkg}/package.json`) : join(dirname(require.resolve(pkg)), file);
  return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
};

/**
 * The built page may load only its own files and compile its own wasm: the browser itself
 * enforces "nothing is sent anywhere". Build only (the dev server injects styles and a socket).
 */
const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const contentSecurityPolicy: Plugin = {
  name: 'ctrlrun-csp',
  apply: 'build',
  transformIndexHtml: () => [{ tag: 'meta', attrs: { 'http-equiv': 'Content-Security-Policy', content: CSP }, injectTo: 'head-prepend' }],
};

/**
 * Starts fetching sql.js's wasm with the page instead of after the script has run: the first
 * step is runnable once both have arrived.
 */
function preloadWasm(): Plugin {
  let base = './';
  return {
    name: 'ctrlrun-preload-wasm',
    apply: 'build',
    configResolved(config) {
      base = config.base;
    },
    transformIndexHtml: {
      order: 'post',
      handler(_html, ctx) {
        const wasm = Object.values(ctx.bundle ?? {}).filter((f) => f.type === 'asset' && f.fileName.endsWith('.wasm'));
        return wasm.map((f) => ({
          tag: 'link',
          attrs: { rel: 'preload', href: `${base}${f.fileName}`, as: 'fetch', type: 'application/wasm', crossorigin: '' },
          injectTo: 'head' as const,
        }));
      },
    },
  };
}

export default defineConfig({
  root: here,
  base: process.env['PLAYGROUND_BASE'] ?? './',
  resolve: { conditions: ['@ctrlrun/source', ...defaultClientConditions] },
  define: { __CTRLRUN_VERSIONS__: JSON.stringify({ kernel: version('@ctrlrun/kernel'), sqljs: version('sql.js', '../package.json') }) },
  plugins: [contentSecurityPolicy, preloadWasm()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    rolldownOptions: {
      // The kernel's errors take their `name` from their class (`new.target.name`), and the page
      // names them (ActionDenied, DuplicateEffect, …): minified class names would read `p`.
      output: {
        minify: {
          compress: { keepNames: { class: true, function: false } },
          mangle: { keepNames: { class: true, function: false } },
        },
      },
      onwarn(warning, warn) {
        // The store imports sql.js lazily for callers that hand it nothing; the page hands it the
        // module, so sql.js is in the main chunk either way.
        if (warning.code === 'INEFFECTIVE_DYNAMIC_IMPORT' && warning.message.includes('sql.js')) return;
        warn(warning);
      },
    },
  },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
});
