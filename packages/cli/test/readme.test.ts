// The README tells the truth: its demo block is the demo's real output, its walkthrough runs, and
// the example policy in the repository is the one `ctrlrun init` writes.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_POLICY_YAML } from '@ctrlrun/kernel';
import { run, tempDir } from './support.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The README section under `## title`, up to the next `## ` heading. */
function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  expect(start, `README has a "## ${title}" section`).toBeGreaterThanOrEqual(0);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

/** Generated ids are the only thing that may differ between runs. */
const mask = (text: string) => text.replace(/\b(apr|dlg)_[0-9a-f]{32}\b/g, '$1_<id>');

describe('the README', () => {
  it('test_the_readme_demo_section_quotes_the_demo_output_verbatim', async () => {
    const r = await run(['demo'], { cwd: tempDir() });
    expect(r.code).toBe(0);
    const block = /```text\n([\s\S]*?)\n```/.exec(section('The demo'))?.[1];
    expect(block, 'a ```text block in "## The demo"').toBeDefined();
    const printed = mask(r.stdout.trimEnd()).split('\n');
    const quoted = mask(block!).split('\n');
    for (const line of printed) expect(quoted, `README quotes: ${line}`).toContain(line);
    // Verbatim: the same lines in the same order, nothing added.
    expect(quoted).toEqual(printed);
  });

  it('test_the_shipped_example_policy_is_the_one_in_the_repository', async () => {
    const shipped = readFileSync(join(ROOT, 'examples', 'ctrlrun.yaml'), 'utf8');
    expect(shipped).toBe(EXAMPLE_POLICY_YAML);
    const cwd = tempDir();
    expect((await run(['init'], { cwd })).code).toBe(0);
    expect(readFileSync(join(cwd, 'ctrlrun.yaml'), 'utf8')).toBe(shipped);
  });

  it('the command-line walkthrough runs: init, protect, approve from a second terminal, receipts --verify-chain', async () => {
    const walkthrough = section('The command line');
    for (const step of [
      'npx ctrlrun init',
      '../examples/refund.ts',
      'npx ctrlrun inspect apr_',
      'npx ctrlrun approve apr_',
      'npx ctrlrun receipts --verify-chain',
    ])
      expect(walkthrough).toContain(step);
    // Every id the walkthrough passes is one something before it printed: no act_ id nothing shows.
    expect(walkthrough).not.toMatch(/npx ctrlrun inspect act_/);
    // The approve line as the README writes it, and what it says the command prints.
    const approveLine = /^npx ctrlrun approve apr_[0-9a-f]{32}( .*)?$/m.exec(walkthrough);
    expect(approveLine, 'the README shows an approve command').not.toBeNull();
    const approveFlags = (approveLine![1] ?? '')
      .trim()
      .split(/\s+/)
      .filter((f) => f !== '');
    const quotedGrant = /^# (granted apr_[0-9a-f]{32} for sha256:[0-9a-f]{64}.*)$/m.exec(walkthrough)?.[1];
    expect(quotedGrant, 'the README quotes what approve prints').toBeDefined();
    const cwd = tempDir();
    expect((await run(['init'], { cwd })).code).toBe(0);
    const example = join(ROOT, 'examples', 'refund.ts');
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const agent = (...args: string[]) =>
      new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['--conditions=@ctrlrun/source', '--import', tsx, example, ...args], {
          cwd,
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
        child.on('error', reject);
        child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`examples/refund.ts exited ${code}: ${out}`))));
      });
    const first = await agent();
    const requestId = /ctrlrun approve (apr_[0-9a-f]{32})/.exec(first)?.[1];
    expect(requestId, first).toBeDefined();
    // The second terminal: the human reads what they are approving, by the request id printed.
    const inspected = await run(['inspect', requestId!], { cwd });
    expect(inspected.code, inspected.stderr).toBe(0);
    expect(inspected.stdout).toContain(`approval    ${requestId}  pending`);
    // The second terminal: the human answers.
    const granted = await run(['approve', requestId!, ...approveFlags], { cwd });
    expect(granted.code).toBe(0);
    expect(granted.stdout).toMatch(/^granted apr_[0-9a-f]{32} for sha256:[0-9a-f]{64}.*\nexpires /);
    const maskGrant = (line: string) => line.replace(/apr_[0-9a-f]{32}/, 'apr_<id>').replace(/sha256:[0-9a-f]{64}/, 'sha256:<hash>');
    expect(maskGrant(granted.stdout.split('\n')[0]!)).toBe(maskGrant(quotedGrant!));
    expect(await agent(requestId!)).toBe('refunded {"id":"re_txn_42","amount":120000}\n');
    const chain = await run(['receipts', '--verify-chain'], { cwd });
    expect(chain).toEqual({ code: 0, stdout: 'chain: 1 of 1 receipts verified\nthe chain is intact\n', stderr: '' });
    expect((await run(['receipts'], { cwd })).stdout).toMatch(/ {2}stripe\.refund {2}approve\/committed {2}refund:txn_42 {2}refund-agent\n$/);
  });

  it('test_T119_the_link_target_carries_the_exact_phrase', () => {
    const verify = section('Verify');
    const firstSentence = verify.replace(/^\n## Verify\n\n/, '').split(/(?<=[.:])\s/)[0]!;
    expect(firstSentence.replace(/\s+/g, ' ')).toContain('declared guarantees pass');
  });

  it('test_T119_no_claim_uses_the_forbidden_vocabulary', () => {
    for (const word of ['secure', 'safe', 'compliant', 'certified', 'audited']) {
      expect(section('Verify').toLowerCase(), word).not.toMatch(new RegExp(`\\b${word}`));
    }
  });
});
