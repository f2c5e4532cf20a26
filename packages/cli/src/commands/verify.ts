/**
 * `ctrlrun verify`: proves the declared guarantees against the operator's policy, each in a
 * scratch store (never the operator's), with fake executors and no network. Exit 0: at least one
 * applicable guarantee and none failed; 1: a failure; 2: refused or nothing applicable (0/0 is
 * never a pass); 3: verify itself went wrong.
 *
 * @module
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { loadPolicy, maskUrl, PolicyError } from '@ctrlrun/kernel';
import {
  parseOnly,
  renderVerifyJson,
  renderVerifyJunit,
  renderVerifyText,
  runVerify,
  verifyBadge,
  verifyExitCode,
  VerifyInternalError,
  VerifyRefusal,
} from '@ctrlrun/kernel/verify';
import type { Command } from '../command.js';
import { banner } from '../control.js';
import { policyPath, readPolicyText } from '../discovery.js';
import { CliRefusal } from '../errors.js';
import { readRegularFile } from '../files.js';
import { VERSION } from '../version.js';
import { nodeProcessLauncher, postgresScratch, sqliteScratch } from '../verify-node.js';

/** A refusal: exit 2. */
const refuse = (message: string) => new CliRefusal(message, 2);

export const verify: Command = {
  name: 'verify',
  summary: 'prove the declared guarantees against this policy, in scratch stores',
  positionals: [],
  options: {
    authority: { type: 'string', value: 'FILE', help: 'a standalone authority document (not with an inline authority: section)' },
    json: { type: 'boolean', help: 'the ctrlrun.verify/v1 report on stdout' },
    junit: { type: 'string', value: 'FILE', help: 'also write JUnit XML to FILE' },
    only: { type: 'string', value: 'G1,G3', help: 'run only these guarantees (no badge is written)' },
    badge: { type: 'string', value: 'FILE', help: 'write the shields.io badge document to FILE (complete runs only)' },
    'store-url': { type: 'string', value: 'URL', help: 'the scratch backend: sqlite (default) or postgresql://… (scratch schemas, dropped after)' },
  },
  details:
    'Exit 0: at least one applicable guarantee, none failed. 1: a guarantee failed. 2: refused (observe mode, a policy that does not load, a bad selection) or none applicable. 3: verify itself went wrong.\nNot applicable is never a pass: it is kept out of the fraction.',
  async run({ io, values, out, err }) {
    try {
      const path = policyPath(io);
      const text = readPolicyText(path, refuse);
      let mode: string;
      try {
        mode = loadPolicy(text, { source: path }).mode;
      } catch (e) {
        if (e instanceof PolicyError) throw refuse(e.message);
        throw e;
      }
      if (mode === 'observe') {
        banner(loadPolicy(text, { source: path }), err);
        throw refuse(`${path} is in observe mode: nothing is enforced, so no guarantee can hold; verify an enforcing configuration`);
      }
      let authority: { text: string; path: string } | null = null;
      if (values['authority'] !== undefined) {
        const file = resolvePath(io.cwd, values['authority'] as string);
        try {
          authority = { text: readRegularFile(file), path: file };
        } catch (e) {
          throw refuse(`the authority document ${file} cannot be read: ${(e as Error).message}`);
        }
      }
      const only = values['only'] === undefined ? null : parseOnly(values['only'] as string);
      // Only the flag: the operator's store ($CTRLRUN_STORE_URL, $CTRLRUN_STATE) is never touched.
      const url = (values['store-url'] as string | undefined) ?? 'sqlite';
      const postgres = /^postgres(ql)?:\/\//i.test(url);
      if (!postgres && !/^sqlite(:|$)/i.test(url)) throw refuse(`--store-url must be sqlite or postgresql://…, got ${JSON.stringify(maskUrl(url))}`);
      const root = mkdtempSync(join(tmpdir(), 'ctrlrun-verify-'));
      let report;
      let closeScratch = async () => {};
      try {
        let scratchStore = sqliteScratch(root);
        if (postgres) {
          const pg = await postgresScratch(url).catch((e: unknown) => {
            throw new VerifyInternalError(`the scratch database ${maskUrl(url)} cannot be reached: ${e instanceof Error ? e.message : String(e)}`);
          });
          scratchStore = pg.factory;
          closeScratch = pg.close;
        }
        report = await runVerify({
          policyText: text,
          policyPath: path,
          authority,
          only,
          scratchStore,
          launchProcesses: nodeProcessLauncher(root),
          backend: postgres ? 'postgresql' : 'sqlite',
          version: VERSION,
        });
      } finally {
        await closeScratch().catch(() => undefined);
        rmSync(root, { recursive: true, force: true });
      }
      if (values['json'] === true) io.stdout(renderVerifyJson(report));
      else for (const line of renderVerifyText(report).replace(/\n$/, '').split('\n')) out(line);
      if (values['junit'] !== undefined) writeFileSync(resolvePath(io.cwd, values['junit'] as string), renderVerifyJunit(report));
      const code = verifyExitCode(report);
      const badge = verifyBadge(report);
      if (values['badge'] !== undefined && badge !== null) writeFileSync(resolvePath(io.cwd, values['badge'] as string), `${JSON.stringify(badge)}\n`);
      if (code === 2) err('Error: no declared guarantee applies to this policy, and 0/0 is not a pass');
      return code;
    } catch (e) {
      if (e instanceof VerifyRefusal) throw refuse(e.message);
      if (e instanceof VerifyInternalError) throw new CliRefusal(`verify went wrong: ${e.message}`, 3);
      throw e;
    }
  },
};
