// @ctrlrun/mcp is runtime-neutral (the transports are the caller's): it bundles for the browser
// platform, which refuses Node built-ins, and the bundle names no `node:` module.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

it('bundles for the browser platform with no Node built-in', async () => {
  const result = await build({
    entryPoints: [fileURLToPath(new URL('../src/index.ts', import.meta.url))],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    conditions: ['@ctrlrun/source'],
    write: false,
    logLevel: 'silent',
  });
  expect(result.errors).toEqual([]);
  const text = result.outputFiles[0]!.text;
  expect(text).not.toMatch(/\bfrom\s*["']node:|require\(["']node:/);
  expect(text).toContain('mcp.');
}, 60_000);
