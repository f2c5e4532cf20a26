/**
 * `ctrlrun policy check [--config PATH] [--authority FILE] [--tools FILE --alias NAME] [--json]`:
 * what the policy lets through that its author probably meant to stop (the kernel's
 * `checkPolicy`): rules that a missing or mistyped argument, or another spelling of a value,
 * skips onto a less strict decision, and deny-list constraints; with an MCP upstream's tool list,
 * also each tool the policy has no entry for (every call to it denied). Reads files only; no
 * store, no network.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import { checkPolicy, loadAuthority, PolicyError, type PolicyFinding } from '@ctrlrun/kernel';
import type { Command } from '../command.js';
import { loadPolicyFile, policyPath } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { readRegularFile } from '../files.js';
import { visible } from '../format.js';

/** The schema tag of `--json`. */
export const POLICY_CHECK_SCHEMA = 'ctrlrun.policy-check/v1';

/**
 * The tool names of an MCP upstream's tool list: its `tools/list` result (`{ "tools": [{ "name" }] }`)
 * or a JSON array of names (or of `{ "name" }` objects). Anything else is a {@link PolicyError}
 * naming what was wrong; the file's content is never quoted. A name the gateway would refuse
 * anyway is left to `toolsWithoutEntry`, which skips it.
 */
export function parseToolList(text: string, source: string): string[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new PolicyError(`the tool list ${source} is not JSON: give the upstream's tools/list result, or a JSON array of tool names`);
  }
  const list = Array.isArray(doc)
    ? doc
    : typeof doc === 'object' && doc !== null && Array.isArray((doc as { tools?: unknown }).tools)
      ? (doc as { tools: unknown[] }).tools
      : null;
  if (list === null)
    throw new PolicyError(`the tool list ${source} has no tools: give the upstream's tools/list result ({"tools": [...]}), or a JSON array of tool names`);
  return list.map((t, i) => {
    const name = typeof t === 'string' ? t : typeof t === 'object' && t !== null && !Array.isArray(t) ? (t as { name?: unknown }).name : undefined;
    if (typeof name !== 'string') throw new PolicyError(`the tool list ${source}: tool [${i}] has no name (a string)`);
    return name;
  });
}

function readToolList(file: string): string[] {
  let text: string;
  try {
    text = readRegularFile(file);
  } catch (e) {
    throw new PolicyError(`the tool list ${file} cannot be read: ${(e as Error).message}`);
  }
  return parseToolList(text, file);
}

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
    tools: {
      type: 'string',
      value: 'FILE',
      help: "an MCP upstream's tool list (its tools/list result as JSON, or a JSON array of names): name each tool with no mcp.<alias>.<tool> entry",
    },
    alias: { type: 'string', value: 'NAME', help: "with --tools: the gateway's --alias" },
    json: { type: 'boolean', help: `the ${POLICY_CHECK_SCHEMA} document on stdout` },
  },
  details:
    'Exit 0: nothing found. 1: findings (each printed; the policy still loads and decides exactly as written). 2: the policy, the authority document or the tool list does not load.\n' +
    'A condition on a missing or mistyped argument is false, so its rule is skipped (the reference semantics, kept). Write rules as an allow-list: bounded allow and approve rules first, deny last.',
  async run({ io, values, positionals, out }) {
    if (positionals[0] !== 'check') throw new UsageError(`unknown subcommand ${JSON.stringify(positionals[0])}; the one subcommand is 'check'`);
    const path = values['config'] === undefined ? policyPath(io) : resolvePath(io.cwd, values['config'] as string);
    const toolsFile = values['tools'] as string | undefined;
    const alias = values['alias'] as string | undefined;
    if ((toolsFile === undefined) !== (alias === undefined))
      throw new UsageError('--tools and --alias go together: the tool list, and the alias the gateway serves it under');
    // The MCP package (and its SDK) is loaded only when a tool list is checked.
    const mcp = alias === undefined ? null : await import('@ctrlrun/mcp');
    if (mcp !== null && !mcp.ALIAS_PATTERN.test(alias!)) throw new UsageError(`--alias must match ${mcp.ALIAS_PATTERN.source}, got ${JSON.stringify(alias)}`);
    let uncovered: string[] = [];
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
      }
      findings = checkPolicy(loaded, { authority });
      policyHash = loaded.hashFor({ authority });
      if (mcp !== null) uncovered = mcp.toolsWithoutEntry(loaded, alias!, readToolList(resolvePath(io.cwd, toolsFile!)));
    } catch (e) {
      if (e instanceof PolicyError) throw refuse(e.message);
      throw e;
    }
    const toolFindings = uncovered.map((tool) => ({
      code: 'tool_without_entry',
      action: `mcp.${alias}.${tool}`,
      where: 'actions',
      argument: null,
      message: `the upstream tool ${tool} has no entry mcp.${alias}.${tool}: every call to it will be denied (unknown_action)`,
    }));
    const count = findings.length + toolFindings.length;
    if (values['json'] === true) {
      out(JSON.stringify({ schema: POLICY_CHECK_SCHEMA, policy: path, policy_hash: policyHash, findings: [...findings.map(findingJson), ...toolFindings] }));
    } else {
      for (const f of [...findings, ...toolFindings]) out(`warning [${f.code}] ${visible(f.message)}`);
      out(count === 0 ? `${visible(path)}: no findings` : `${visible(path)}: ${count} finding${count === 1 ? '' : 's'}`);
    }
    return count === 0 ? 0 : 1;
  },
};
