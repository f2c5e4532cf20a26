/**
 * `ctrlrun policy check [--config PATH] [--authority FILE] [--json]`: what the policy lets
 * through that its author probably meant to stop (the kernel's `checkPolicy`): rules that a
 * missing or mistyped argument, or another spelling of a value, skips onto a less strict
 * decision, and deny-list constraints. Reads files only; no store, no network.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import { checkPolicy, checkResourceScopes, loadAuthority, PolicyError, type PolicyFinding } from '@ctrlrun/kernel';
import type { Command } from '../command.js';
import { loadPolicyFile, policyPath } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { readRegularFile } from '../files.js';
import { visible } from '../format.js';

/** The schema tag of `--json`. */
export const POLICY_CHECK_SCHEMA = 'ctrlrun.policy-check/v1';

/** A refusal: exit 2 (the policy, or the authority document, does not load). */
const refuse = (message: string) => new CliRefusal(message, 2);

function findingJson(f: PolicyFinding): Record<string, unknown> {
  return {
    code: f.code,
    action: f.action,
    where: f.where,
    argument: f.argument,
    ...(f.bypasses ? { bypasses: [...f.bypasses], from: f.from, to: f.to } : {}),
    message: f.message,
  };
}

export const policy: Command = {
  name: 'policy',
  summary: 'check the policy for rules a missing or mistyped argument turns from deny into allow',
  positionals: ['check'],
  options: {
    config: { type: 'string', value: 'PATH', help: 'the policy to check (default: $CTRLRUN_CONFIG, else ./ctrlrun.yaml)' },
    authority: { type: 'string', value: 'FILE', help: 'also check a standalone authority document against the policy' },
    json: { type: 'boolean', help: `the ${POLICY_CHECK_SCHEMA} document on stdout` },
  },
  details:
    'Exit 0: nothing found. 1: findings (each printed; the policy still loads and decides exactly as written). 2: the policy or the authority document does not load.\n' +
    'A condition on a missing or mistyped argument is false, so its rule is skipped (the reference semantics, kept). Write rules as an allow-list: bounded allow and approve rules first, deny last.',
  async run({ io, values, positionals, out }) {
    if (positionals[0] !== 'check') throw new UsageError(`unknown subcommand ${JSON.stringify(positionals[0])}; the one subcommand is 'check'`);
    const path = values['config'] === undefined ? policyPath(io) : resolvePath(io.cwd, values['config'] as string);
    let findings: PolicyFinding[];
    let policyHash: string;
    try {
      const { policy: loaded } = loadPolicyFile(path);
      let authority = loaded.authority;
      if (values['authority'] !== undefined) {
        const file = resolvePath(io.cwd, values['authority'] as string);
        let text: string;
        try {
          text = readRegularFile(file);
        } catch (e) {
          throw new PolicyError(`the authority document ${file} cannot be read: ${(e as Error).message}`);
        }
        if (loaded.authority !== null) throw new PolicyError(`authority is declared twice: in ${path} and in ${file}; keep one`);
        authority = loadAuthority(text, { source: file });
        // What `new Control` would refuse, refused here before deployment.
        checkResourceScopes(authority, loaded);
      }
      findings = checkPolicy(loaded, { authority });
      policyHash = loaded.hashFor({ authority });
    } catch (e) {
      if (e instanceof PolicyError) throw refuse(e.message);
      throw e;
    }
    if (values['json'] === true) {
      out(JSON.stringify({ schema: POLICY_CHECK_SCHEMA, policy: path, policy_hash: policyHash, findings: findings.map(findingJson) }));
    } else {
      for (const f of findings) out(`warning [${f.code}] ${visible(f.message)}`);
      out(findings.length === 0 ? `${visible(path)}: no findings` : `${visible(path)}: ${findings.length} finding${findings.length === 1 ? '' : 's'}`);
    }
    return findings.length === 0 ? 0 : 1;
  },
};
