// `ctrlrun scan` reads trees it does not trust (issue 27): every file goes through the regular-file
// reader (a FIFO is refused, not waited on; a device is refused, not read for ever), no symbolic link
// is followed out of the tree, and no error quotes a file's text. Also: paths given positionally.
// The hang cases run the real executable, killed after a generous deadline: a regression is a
// failed assertion on the error, never a stuck test run.
import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { commonDirectory } from '../src/commands/scan.js';
import { isWithin } from '../src/files.js';
import { parseCatalogue, parseVocabulary } from '../src/scan/catalogue.js';
import { run, spawnCli, tempDir } from './support.js';

/** Generous: a spawned scan answers in a second or two here; only a hang comes near this. */
const HANG_KILL_MS = 60_000;
/** What must never reach stdout or stderr. */
const SECRET = 'SECRETxq7Z9w';

function fifo(path: string): string {
  const r = spawnSync('mkfifo', [path]);
  if (r.status !== 0) throw new Error(`mkfifo ${path} failed: ${r.stderr}`);
  return path;
}

/** A tree with one uncovered call, in a fresh directory of its own (`<tmp>/tree`), and a sibling `outside/`. */
function tree(): { tree: string; outside: string } {
  const top = tempDir('ctrlrun-scan-untrusted-');
  const t = join(top, 'tree');
  const outside = join(top, 'outside');
  mkdirSync(join(t, 'src'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(t, 'src', 'a.ts'), "import { rmSync } from 'node:fs';\nrmSync('/tmp/x');\n");
  return { tree: t, outside };
}

describe('ctrlrun scan: files that are not regular files', { timeout: 8 * HANG_KILL_MS }, () => {
  it('a FIFO as ctrlrun.scan.yaml, as ctrlrun.yaml, or named by --vocabulary or --catalogue: a clear error naming it, exit 2, no hang', async () => {
    for (const [name, argv] of [
      ['ctrlrun.scan.yaml', []],
      ['ctrlrun.yaml', []],
      ['verbs.fifo', ['--vocabulary', 'verbs.fifo']],
      ['extra.fifo', ['--catalogue', 'extra.fifo']],
    ] as const) {
      const { tree: cwd } = tree();
      fifo(join(cwd, name));
      const r = await spawnCli(['scan', ...argv], { cwd, killAfterMs: HANG_KILL_MS });
      expect(r.signal, `${name}: killed, so it hung`).toBeUndefined();
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toMatch(new RegExp(`${name.replace('.', '\\.')} cannot be read: it is a named pipe \\(FIFO\\), not a regular file`));
    }
  });

  it('/dev/zero: a link to it in the tree is refused unread, and named outright it is refused as a device', async () => {
    const { tree: cwd } = tree();
    symlinkSync('/dev/zero', join(cwd, 'ctrlrun.scan.yaml'));
    const linked = await spawnCli(['scan'], { cwd, killAfterMs: HANG_KILL_MS });
    expect(linked.signal).toBeUndefined();
    expect(linked.code).toBe(2);
    expect(linked.stderr).toMatch(/ctrlrun\.scan\.yaml cannot be read: it is a symbolic link leading out of .*; not followed/);
    const named = await spawnCli(['scan', '--vocabulary', '/dev/zero'], { cwd: tempDir(), killAfterMs: HANG_KILL_MS });
    expect(named.signal).toBeUndefined();
    expect(named.code).toBe(2);
    expect(named.stderr).toMatch(/the vocabulary \/dev\/zero cannot be read: it is a character device, not a regular file/);
  });

  it('a source file that is a link to /dev/zero or to a FIFO is not read: listed as not followed, the rest scanned', async () => {
    const { tree: cwd, outside } = tree();
    symlinkSync('/dev/zero', join(cwd, 'src', 'zero.ts'));
    symlinkSync(fifo(join(outside, 'pipe.ts')), join(cwd, 'src', 'pipe.ts'));
    const r = await spawnCli(['scan', '--json'], { cwd, killAfterMs: HANG_KILL_MS });
    expect(r.signal).toBeUndefined();
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout) as { findings: { file: string }[]; not_followed: string[]; totals: { files_read: number } };
    expect(d.findings.map((f) => f.file)).toEqual(['src/a.ts']);
    expect(d.not_followed).toEqual(['src/pipe.ts', 'src/zero.ts']);
    expect(d.totals.files_read).toBe(1);
    const text = await spawnCli(['scan'], { cwd, killAfterMs: HANG_KILL_MS });
    expect(text.stdout).toContain('not followed: 2 symbolic links leading out of the tree: src/pipe.ts, src/zero.ts');
  });
});

describe('ctrlrun scan: a link out of the tree never gets its target read into the output', { timeout: 8 * HANG_KILL_MS }, () => {
  it('ctrlrun.scan.yaml, ctrlrun.yaml, or a file named in the tree by --vocabulary, --catalogue or --policy: refused by path, the secret never shown', async () => {
    // Each secret file is one the reader would quote from, were it read.
    const secrets: Record<string, string> = {
      'ctrlrun.scan.yaml': `${SECRET}: 1\n`,
      'ctrlrun.yaml': `schema: ctrlrun.policy/v2\nactions:\n  ${SECRET}: {}\n`,
      'verbs.txt': `${SECRET}\n`,
      'extra.yaml': `schema: ctrlrun.scan-catalogue/v1\ngateways: ["${SECRET}"]\n`,
      'policy.yaml': `schema: ctrlrun.policy/v2\nactions:\n  ${SECRET}: {}\n`,
    };
    const flags: Record<string, string[]> = {
      'verbs.txt': ['--vocabulary', 'verbs.txt'],
      'extra.yaml': ['--catalogue', 'extra.yaml'],
      'policy.yaml': ['--policy', 'policy.yaml'],
    };
    for (const [name, text] of Object.entries(secrets)) {
      const { tree: cwd, outside } = tree();
      writeFileSync(join(outside, name), text);
      symlinkSync(join(outside, name), join(cwd, name));
      const r = await spawnCli(['scan', ...(flags[name] ?? [])], { cwd, killAfterMs: HANG_KILL_MS });
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toMatch(new RegExp(`${name.replace('.', '\\.')} cannot be read: it is a symbolic link leading out of .*; not followed`));
      expect(r.stdout + r.stderr, name).not.toContain(SECRET);
    }
  });

  it('the same files as plain files in the tree: refused by line and column, the text never quoted', async () => {
    for (const [name, text, argv, says] of [
      ['ctrlrun.scan.yaml', `${SECRET}: 1\n`, [], /ctrlrun\.scan\.yaml: document \(line 1, column 1\): an unknown key/],
      [
        'ctrlrun.scan.yaml',
        `schema: ctrlrun.scan-catalogue/v1\ngateways: [${SECRET}: [}\n`,
        [],
        /ctrlrun\.scan\.yaml: document \(line 2, column \d+\): not YAML/,
      ],
      [
        'ctrlrun.scan.yaml',
        `schema: *${SECRET}\n`,
        [],
        /ctrlrun\.scan\.yaml: document \(line 1, column \d+\): not YAML \(an alias names no anchor before it\)/,
      ],
      ['verbs.txt', `refund\n${SECRET}\n`, ['--vocabulary', 'verbs.txt'], /verbs\.txt: line 2 is not a verb/],
    ] as const) {
      const { tree: cwd } = tree();
      writeFileSync(join(cwd, name), text);
      const r = await run(['scan', ...argv], { cwd });
      expect(r.code, text).toBe(2);
      expect(r.stderr, text).toMatch(says);
      expect(r.stdout + r.stderr, text).not.toContain(SECRET);
    }
  });

  it('a source file or a directory linking out is not followed, and the compiler does not read it for an import either', async () => {
    const { tree: cwd, outside } = tree();
    // Read, it would name an action the policy does not list: the finding would carry the secret.
    writeFileSync(join(outside, 'names.ts'), `export const name = '${SECRET}';\n`);
    mkdirSync(join(outside, 'lib'));
    writeFileSync(join(outside, 'lib', 'b.ts'), `export const ${SECRET} = 1;\nimport { rmSync } from 'node:fs';\nrmSync('/');\n`);
    symlinkSync(join(outside, 'names.ts'), join(cwd, 'src', 'names.ts'));
    symlinkSync(join(outside, 'lib'), join(cwd, 'lib'));
    // Links inside the tree that stay inside are not followed either: their target is read where it is.
    symlinkSync(join(cwd, 'src', 'a.ts'), join(cwd, 'src', 'again.ts'));
    symlinkSync(join(cwd, 'src'), join(cwd, 'src-again'));
    writeFileSync(join(cwd, 'tsconfig.json'), '{ "compilerOptions": { "strict": true, "module": "nodenext" } }\n');
    writeFileSync(
      join(cwd, 'src', 'agent.ts'),
      "import { protect } from '@ctrlrun/kernel';\nimport { name } from './names.js';\nexport const run = protect(async () => 1, { name });\n",
    );
    writeFileSync(join(cwd, 'ctrlrun.yaml'), 'schema: ctrlrun.policy/v2\nactions:\n  read.thing: { decision: deny }\n');
    const r = await spawnCli(['scan', '--json'], { cwd, killAfterMs: HANG_KILL_MS });
    expect(r.stdout + r.stderr).not.toContain(SECRET);
    const d = JSON.parse(r.stdout) as { findings: { file: string; rule: string }[]; not_followed: string[]; totals: { files_read: number } };
    expect(d.not_followed).toEqual(['lib', 'src/names.ts']);
    expect(d.findings.map((f) => `${f.file} ${f.rule}`)).toEqual(['src/a.ts catalogue:fs.delete']);
    expect(d.totals.files_read).toBe(2);
  });
});

describe('ctrlrun scan [PATH…]', () => {
  it('takes the tree positionally, as --path does; several are read as one tree named from their common directory', async () => {
    const { tree: top } = tree();
    mkdirSync(join(top, 'lib'));
    writeFileSync(join(top, 'lib', 'b.ts'), "import { unlinkSync } from 'node:fs';\nunlinkSync('/tmp/y');\n");
    writeFileSync(join(top, 'other.ts'), "import { rmSync } from 'node:fs';\nrmSync('/tmp/z');\n");
    const cwd = join(top, '..');
    const findings = async (argv: string[], at = cwd) => {
      const r = await run(['scan', '--json', ...argv], { cwd: at });
      expect(r.code, argv.join(' ')).toBe(1);
      const d = JSON.parse(r.stdout) as { root: string; findings: { file: string }[] };
      return { root: d.root, files: d.findings.map((f) => f.file) };
    };
    expect(await findings(['tree'])).toEqual({ root: top, files: ['lib/b.ts', 'other.ts', 'src/a.ts'] });
    expect(await findings(['--path', 'tree'])).toEqual({ root: top, files: ['lib/b.ts', 'other.ts', 'src/a.ts'] });
    expect(await findings(['.'], top)).toEqual({ root: top, files: ['lib/b.ts', 'other.ts', 'src/a.ts'] });
    expect(await findings(['src', 'lib'], top)).toEqual({ root: top, files: ['lib/b.ts', 'src/a.ts'] });
    // PATHs and --paths are one list; a directory inside another given one is read once.
    expect(await findings(['src', '--path', 'lib', 'src/'], top)).toEqual({ root: top, files: ['lib/b.ts', 'src/a.ts'] });
    expect(await findings(['tree', 'tree/src'])).toEqual({ root: top, files: ['lib/b.ts', 'other.ts', 'src/a.ts'] });
    expect(await findings([`tree${sep}lib`])).toEqual({ root: join(top, 'lib'), files: ['b.ts'] });
    const notDir = await run(['scan', 'tree', 'tree/other.ts'], { cwd });
    expect(notDir.code).toBe(2);
    expect(notDir.stderr).toMatch(/other\.ts is not a directory/);
    const help = await run(['scan', '--help'], { cwd });
    expect(help.stdout).toMatch(/^usage: ctrlrun scan \[PATH…\] \[--path DIR\]/);
    expect(help.stdout).toContain('PATH and --path DIR name directories');
  });

  it('the common directory of any directories holds each of them, and no deeper one does (property)', () => {
    const name = fc.constantFrom('a', 'b', 'ab', 'a.b', '..a', 'a..');
    const dir = fc.array(name, { maxLength: 4 }).map((parts) => `${sep}${parts.join(sep)}`);
    fc.assert(
      fc.property(fc.array(dir, { minLength: 1, maxLength: 5 }), (dirs) => {
        const base = commonDirectory(dirs);
        for (const d of dirs) expect(isWithin(d, base)).toBe(true);
        // Any directory one level deeper on the way to the first leaves one of them out.
        const first = dirs[0]!;
        if (first !== base) {
          const deeper = first.slice(0, first.indexOf(sep, base.length + 1) === -1 ? first.length : first.indexOf(sep, base.length + 1));
          expect(dirs.every((d) => isWithin(d, deeper))).toBe(false);
        }
      }),
    );
  });

  it('isWithin: a sibling sharing a prefix is not inside (property)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z.]{0,5}$/), fc.stringMatching(/^[a-z][a-z.]{0,5}$/), (a, b) => {
        expect(isWithin(`${sep}T${sep}${a}`, `${sep}T`)).toBe(true);
        expect(isWithin(`${sep}T${a}`, `${sep}T`)).toBe(false);
        expect(isWithin(`${sep}T${sep}${a}${sep}${b}`, `${sep}T${sep}${a}`)).toBe(true);
        expect(isWithin(`${sep}T${sep}${a}`, `${sep}T${sep}${a}${sep}${b}`)).toBe(false);
        expect(isWithin(`${sep}T${sep}..${sep}${a}`, `${sep}T`)).toBe(false);
      }),
    );
  });
});

describe('the catalogue and vocabulary readers never quote the text they refuse (property)', () => {
  /** Text around the secret: YAML-ish lines, keys, lists, flow, quotes, anchors and aliases. */
  const piece = fc.constantFrom(
    'schema: ctrlrun.scan-catalogue/v1',
    'catalogue:',
    '  - id: x',
    '    module: m',
    '    call: f',
    '    why: w',
    'wrappers:',
    '  - { module: m, name: n }',
    'gateways:',
    '  - http://x/',
    '[',
    '{',
    '"',
    "'",
    '&a',
    '*a',
    '!tag',
    ': ',
    '- ',
    '  ',
    '#',
  );
  const withSecret = fc
    .tuple(
      fc.array(piece, { maxLength: 8 }),
      fc.constantFrom('', ' ', '- ', '  - ', '&', '*', '!', '"', '[', '{', 'id: ', 'gateways: ['),
      fc.array(piece, { maxLength: 8 }),
    )
    .chain(([before, lead, after]) =>
      fc.constantFrom(...[0, 1, 2, 3].map((cut) => [...before.slice(0, cut), `${lead}${SECRET}`, ...before.slice(cut), ...after].join('\n'))),
    );

  it('a catalogue refusal names the place, never the text', () => {
    fc.assert(
      fc.property(withSecret, (text) => {
        try {
          parseCatalogue(text, 'c.yaml');
        } catch (e) {
          expect((e as Error).message).toMatch(/^the scan catalogue c\.yaml: /);
          expect((e as Error).message).not.toContain(SECRET);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('a vocabulary refusal names the line, never the text', () => {
    fc.assert(
      fc.property(withSecret, (text) => {
        try {
          parseVocabulary(text, 'v.txt');
        } catch (e) {
          expect((e as Error).message).toMatch(/^the vocabulary v\.txt(?:: line \d+ is not a verb| lists no verb)/);
          expect((e as Error).message).not.toContain(SECRET);
        }
      }),
      { numRuns: 500 },
    );
  });
});
