/**
 * `ctrlrun delegate --parent ID --file GRANT.yaml --as AGENT[/USER]` and `ctrlrun revoke ID`:
 * authority is handed down and taken back through `Control`, exactly as an application does.
 * `--as` is an assertion made from a shell, recorded with `created_via: "cli"`.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import { evidenceTime, parseTime } from '@ctrlrun/kernel/store';
import { STORE_URL, type Command } from '../command.js';
import type { FileControl } from '@ctrlrun/store-node';
import { banner, operatorControl, operatorName } from '../control.js';
import { loadPolicyFile, policyPath, storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { readGrantFile, refusingEscalation } from '../grant-file.js';
import { hasUnsafe, stamp } from '../format.js';
import { openWriter } from '../stores.js';

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`missing --${name}`);
  return v;
}

/** `AGENT[/USER]`, split on the first `/`. */
export function parseAs(text: string): { agent: string; user: string | null } {
  const slash = text.indexOf('/');
  const agent = slash < 0 ? text : text.slice(0, slash);
  const user = slash < 0 ? null : text.slice(slash + 1);
  const bad = (s: string) => s.trim() === '' || hasUnsafe(s);
  if (bad(agent) || (user !== null && bad(user))) throw new UsageError(`--as must be AGENT or AGENT/USER, got ${JSON.stringify(text)}`);
  return { agent, user };
}

export const delegate: Command = {
  name: 'delegate',
  summary: 'hand a narrower grant down beneath a grant or delegation',
  positionals: [],
  options: {
    parent: { type: 'string', value: 'ID', help: 'the parent: a grant id of the policy, or a dlg_… delegation (required)' },
    file: { type: 'string', value: 'FILE', help: 'one grant in YAML: the grant keys minus id (required)' },
    as: { type: 'string', value: 'AGENT[/USER]', help: "who is delegating: the parent's subject (required; recorded as created_via cli)" },
    json: { type: 'boolean', help: 'the created delegation as JSON' },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, err, json }) {
    const parent = required(values, 'parent');
    const file = resolvePath(io.cwd, required(values, 'file'));
    const by = parseAs(required(values, 'as'));
    const { policy } = loadPolicyFile(policyPath(io));
    banner(policy, err);
    const grant = readGrantFile(file);
    const target = storeTarget(io, values['store-url'] as string | undefined);
    const store = await openWriter(target);
    let control: FileControl | undefined;
    try {
      control = await operatorControl(io, policy, store, target, err);
      const d = await refusingEscalation(() => control!.delegate(parent, grant, { by, via: 'cli' }));
      if (values['json'] === true) {
        json(
          JSON.stringify({
            delegation_id: d.delegationId,
            parent_id: d.parentId,
            depth: d.depth,
            created_by_agent: d.createdBy.agent,
            created_by_user: d.createdBy.user,
            created_via: d.createdVia,
            created_at: stamp(d.createdAt),
          }),
        );
      } else {
        out(`created ${d.delegationId}`);
        out(`parent ${d.parentId} at depth ${d.depth}`);
        out(`take it back with: ctrlrun revoke ${d.delegationId}`);
      }
      return 0;
    } finally {
      await control?.close();
      await store.close();
    }
  },
};

export const revoke: Command = {
  name: 'revoke',
  summary: 'revoke a delegation: everything beneath it is denied from the next evaluation',
  positionals: ['DELEGATION_ID'],
  options: {
    by: { type: 'string', value: 'NAME', help: 'who revokes, recorded on the delegation (default: $CTRLRUN_APPROVER, else your OS login name)' },
    'store-url': STORE_URL,
  },
  async run({ io, values, positionals, out, err }) {
    const id = positionals[0]!;
    const by = operatorName(io, values['by'] as string | undefined, '--by');
    const { policy } = loadPolicyFile(policyPath(io));
    banner(policy, err);
    const target = storeTarget(io, values['store-url'] as string | undefined);
    const store = await openWriter(target);
    let control: FileControl | undefined;
    try {
      // The already-revoked warning is said below, in the command's own words.
      control = await operatorControl(io, policy, store, target, (line) => void (line.includes('already revoked') || err(line)));
      if (await control.revoke(id, { by })) {
        out(`revoked ${id} by ${by}`);
        out('every delegation beneath it is denied from the next evaluation');
      } else {
        const record = await store.getDelegation(id);
        const when = record?.revokedAt ? evidenceTime(parseTime(record.revokedAt)) : 'an earlier time';
        out(`${id} was already revoked at ${when}${record?.revokedBy ? ` by ${record.revokedBy}` : ''}; nothing changed`);
      }
      return 0;
    } finally {
      await control?.close();
      await store.close();
    }
  },
};
