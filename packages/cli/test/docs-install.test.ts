// What the docs say about installing the CLI and running it under a supervisor (issue 35), held to
// what is true: better-sqlite3 builds from source with node-gyp when no prebuilt binding can be
// fetched (so the toolchain is named), and `node_modules/.bin/ctrlrun` is the launcher whose
// signal forwarding binary.test.ts proves (so supervised runs are pointed at it, not at npx).
import { readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LAUNCHER } from './support.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(path, 'utf8').replace(/\s+/g, ' ');
const docs = { 'README.md': read(join(ROOT, 'README.md')), 'packages/cli/README.md': read(join(CLI, 'README.md')) };

describe('installing @ctrlrun/cli', () => {
  it('better-sqlite3 falls back to node-gyp, and the docs say how long that takes and what it needs', () => {
    // The premise: the install script fetches a prebuilt binding, else compiles with node-gyp.
    const sqlite = createRequire(join(CLI, 'package.json'))('better-sqlite3/package.json') as { scripts: { install: string } };
    expect(sqlite.scripts.install).toMatch(/^prebuild-install \|\| node-gyp rebuild/);
    for (const [file, text] of Object.entries(docs)) {
      expect(text, file).toMatch(/compiles (it|the binding) (from source )?with node-gyp/);
      expect(text, file).toContain('about 3 on a 2-core machine');
      for (const tool of ['python3', 'make', 'g++']) expect(text, `${file} names ${tool}`).toContain(tool);
    }
  });
});

describe('running the gateway under a supervisor', () => {
  it('the docs point supervised runs at node_modules/.bin/ctrlrun, which is the signal-forwarding launcher', () => {
    const bin = (JSON.parse(readFileSync(join(CLI, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['ctrlrun'];
    expect(realpathSync(join(CLI, bin!))).toBe(realpathSync(LAUNCHER));
    // npm links the installed command to that file.
    expect(realpathSync(join(ROOT, 'node_modules', '.bin', 'ctrlrun'))).toBe(realpathSync(LAUNCHER));
    for (const [file, text] of Object.entries({ ...docs, 'packages/mcp/README.md': read(join(ROOT, 'packages', 'mcp', 'README.md')) })) {
      expect(text, file).toMatch(/node_modules\/\.bin\/ctrlrun (gateway )?…/);
      expect(text, file).toMatch(/npx does not pass the signal on|does not pass the signal on/);
    }
  });
});
