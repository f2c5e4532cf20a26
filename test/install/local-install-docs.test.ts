// What the docs say about installing before the packages are published (issue 35), held to what
// is true, without the network: the root README's first screen keeps the clone's two commands
// first and says how to install by path (npm run pack:local) and what is clone-only; every package
// README points at that note with names pack:local accepts and that cover its install line; each
// adapter README's install line names every package its example imports, and says how to run it
// as an ES module. (adapter-readmes.test.ts runs the examples from the tarballs.)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLONE_ONLY, withInternalDependencies } from '../../scripts/pack-local.js';
import { publishablePackages, ROOT } from '../../scripts/packages.js';
import { adapterReadme, importedPackages, splitSpec } from './adapter-readme.js';

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const packages = publishablePackages();
const NOTE = 'https://github.com/ctrlrun/ctrlrun-ts#before-the-packages-are-published';

describe('the root README: installing before the packages are published', () => {
  const readme = read('README.md');
  const firstScreen = readme.slice(0, readme.indexOf('\n## '));

  it('keeps the demo and the tests as its first commands, then says how to install by path', () => {
    const blocks = [...firstScreen.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
    expect(blocks[0]![2]).toMatch(/^npm ci && npm run demo .*\nnpm test .*\n$/);
    expect(firstScreen).toContain('\n#### Before the packages are published\n');
    const note = firstScreen.slice(firstScreen.indexOf('#### Before the packages are published'));
    expect(note).toContain('npm run pack:local -- ../my-app ');
    expect(note).toContain(
      `npm pack of the ${['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'][packages.length]} packages`,
    );
    const root = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(root.scripts['pack:local']).toBe('node --import tsx scripts/pack-local.ts');
  });

  it('names the clone-only parts, and they are private workspaces', () => {
    const note = firstScreen.replace(/\s+/g, ' ');
    for (const part of ['the worker', 'operator inbox', 'the playground', '<ctrlrun-try-it>` widget']) expect(note).toContain(part);
    for (const name of Object.keys(CLONE_ONLY)) {
      const dir = name.replace('@ctrlrun/', '');
      const manifest = JSON.parse(read(`${dir}/package.json`)) as { name: string; private?: boolean };
      expect(manifest).toMatchObject({ name, private: true });
      expect(packages.map((p) => p.name)).not.toContain(name);
    }
    for (const script of ['npm run worker', 'npm run playground', 'npm run build:widget']) {
      expect(note).toContain(script);
      const root = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
      expect(root.scripts[script.slice('npm run '.length)], script).toBeDefined();
    }
  });
});

describe('pack:local chooses the packages', () => {
  it('a named package comes with the @ctrlrun packages it depends on; none named is all of them', () => {
    expect(withInternalDependencies(['ai-sdk']).map((p) => p.name)).toEqual(['@ctrlrun/ai-sdk', '@ctrlrun/kernel']);
    expect(withInternalDependencies(['@ctrlrun/cli']).map((p) => p.name)).toEqual([
      '@ctrlrun/cli',
      '@ctrlrun/kernel',
      '@ctrlrun/mcp',
      '@ctrlrun/store-node',
      '@ctrlrun/store-sqljs',
    ]);
    expect(withInternalDependencies([]).map((p) => p.name)).toEqual(packages.map((p) => p.name));
  });

  it('an unknown or private name is refused, naming what there is', () => {
    expect(() => withInternalDependencies(['kernal'])).toThrow(/no publishable package is called "kernal"; there are: ai-sdk, cli, kernel/);
    expect(() => withInternalDependencies(['worker'])).toThrow(/@ctrlrun\/worker is private, the HTTP gateway and its operator inbox/);
  });
});

describe('every package README points at the note', () => {
  for (const p of packages) {
    it(`packages/${p.dir}/README.md: npm run pack:local with names it accepts, covering its install line`, () => {
      const readme = read(`packages/${p.dir}/README.md`);
      const pointer = new RegExp(
        `^Not on the npm registry yet: from a clone, \`npm run pack:local -- \\.\\./my-app ([\\w -]+)\` packs and installs them by path \\(\\[how\\]\\(${NOTE.replace(/[.?#]/g, '\\$&')}\\)\\)\\.$`,
        'm',
      ).exec(readme);
      expect(pointer, 'the one-line pointer').not.toBeNull();
      const chosen = withInternalDependencies(pointer![1]!.split(' ')).map((x) => x.name);
      expect(chosen).toContain(p.name);
      const install = /^npm install (.*)$/m.exec(readme)?.[1];
      for (const word of install?.replace(/\s#.*$/, '').split(/\s+/) ?? []) if (word.startsWith('@ctrlrun/')) expect(chosen, word).toContain(word);
    });
  }
});

describe('the adapter READMEs', () => {
  for (const dir of ['ai-sdk', 'openai-agents', 'langgraph']) {
    const file = `packages/${dir}/README.md`;
    const readme = read(file);
    const parsed = adapterReadme(readme, file);

    it(`${file}: its install line names every package its example imports`, () => {
      const named = parsed.install.map((w) => splitSpec(w).name);
      expect(importedPackages(parsed.example).filter((p) => !named.includes(p))).toEqual([]);
    });

    it(`${file}: says the example is an ES module to save as example.ts in a "type": "module" project and run with npx tsx`, () => {
      const text = readme.replace(/\s+/g, ' ');
      expect(text).toContain('It is TypeScript and an ES module (top-level `await`)');
      expect(text).toContain('`package.json` says `"type": "module"`');
      expect(readme).toContain('\n```sh\nnpx tsx example.ts ');
    });
  }
});
