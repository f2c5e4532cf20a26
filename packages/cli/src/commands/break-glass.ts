/**
 * `ctrlrun break-glass open --envelope ID --file GRANT.yaml --reason TEXT [--ttl DURATION]` with a
 * verified identity: an incident commander opens a grant beneath a break-glass envelope the policy
 * declares, through `Control.breakGlass`. The opener is the person their own token names (never a
 * name typed in), and their roles must include every role the envelope's controls require. What
 * is opened is a delegation like any other: recorded (`created_via: break-glass`), bounded by the
 * envelope, expiring within its `max_ttl`, revocable with `ctrlrun revoke`.
 *
 * @module
 */
import { resolve as resolvePath } from 'node:path';
import type { FileControl } from '@ctrlrun/store-node';
import { STORE_URL, type Command } from '../command.js';
import { banner, operatorControl } from '../control.js';
import { loadPolicyFile, policyPath, storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { readGrantFile, refusingEscalation } from '../grant-file.js';
import { stamp, stampOrNull } from '../format.js';
import { JWT_OPTIONS } from '../jwt-options.js';
import { openWriter } from '../stores.js';
import { verifiedIdentity } from '../verified-identity.js';

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`missing --${name}`);
  return v;
}

export const breakGlass: Command = {
  name: 'break-glass',
  summary: 'open a grant beneath a break-glass envelope of the policy, as a verified person whose roles its controls require',
  positionals: ['open'],
  options: {
    envelope: { type: 'string', value: 'ID', help: "the envelope: an id under the policy's 'authority: break_glass:' (required)" },
    file: { type: 'string', value: 'FILE', help: 'the grant in YAML: the grant keys minus id, inside the envelope on every dimension (required)' },
    reason: { type: 'string', value: 'TEXT', help: 'why it is opened, e.g. the incident id (required; recorded on DELEGATION_CREATED)' },
    ttl: {
      type: 'string',
      value: 'DURATION',
      help: "how long it lives from now, as max_ttl is written (PT1H, PT30M); or give 'expires_at' in the file. At most the envelope's max_ttl",
    },
    ...JWT_OPTIONS,
    'approver-token-file': {
      type: 'string',
      value: 'FILE',
      help: 'with --identity-jwt …: a file holding your own token; verified, it names who opens (required)',
    },
    'approver-roles-claim': {
      type: 'string',
      value: 'CLAIM',
      help: "with --identity-jwt …: the token's claim listing your roles (copy it with --identity-jwt-claim; required)",
    },
    json: { type: 'boolean', help: 'the opened grant as JSON' },
    'store-url': STORE_URL,
  },
  details:
    'The opener is verified, never asserted: --identity-jwt with its companion flags, --identity-jwt-user-claim, --identity-jwt-claim ROLES, ' +
    '--approver-roles-claim ROLES and --approver-token-file. Each control the envelope cites must declare an approver_role, and the opener must hold every one. ' +
    'Refused (exit 1, nothing written but a DELEGATION_REJECTED event): an id that is no envelope (an ordinary grant id included), a grant with no expiry or one beyond max_ttl, ' +
    'a grant wider than the envelope, an opener without the role. Every action under the grant names it on its receipt (authority_grant_id); ' +
    'it stops authorising at its expiry, when the envelope is narrowed below it, or when revoked: ctrlrun revoke ID.',
  async run(inv) {
    const { io, values, positionals, out, err, json } = inv;
    if (positionals[0] !== 'open') throw new UsageError(`unknown subcommand ${JSON.stringify(positionals[0])}; the one subcommand is 'open'`);
    const envelope = required(values, 'envelope');
    const file = resolvePath(io.cwd, required(values, 'file'));
    const reason = required(values, 'reason');
    const ttl = values['ttl'] as string | undefined;
    if (values['identity-jwt'] !== true) {
      throw new UsageError(
        'break-glass open needs a verified opener: --identity-jwt with its companion flags and --approver-token-file (your own token), so that who opens is a verified person, never a name typed in',
      );
    }
    if (values['approver-roles-claim'] === undefined)
      throw new UsageError("break-glass open needs --approver-roles-claim: the token's claim listing the roles the envelope's controls require");
    const identity = (await verifiedIdentity(inv, { commands: 'break-glass open', who: 'who opens', action: 'ctrlrun.break-glass' }))!;
    const { policy } = loadPolicyFile(policyPath(io));
    banner(policy, err);
    const grant = readGrantFile(file);
    const target = storeTarget(io, values['store-url'] as string | undefined);
    const store = await openWriter(target);
    let control: FileControl | undefined;
    try {
      control = await operatorControl(io, policy, store, target, err, identity.approvers);
      const d = await refusingEscalation(() =>
        control!.breakGlass(envelope, grant, { verified: identity.principal, reason, ...(ttl === undefined ? {} : { ttl }) }),
      );
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
            expires_at: stampOrNull(d.grant.expiresAt),
            reason,
          }),
        );
      } else {
        out(`opened ${d.delegationId} beneath ${d.parentId} by ${identity.who}`);
        out(`expires ${d.grant.expiresAt === null ? 'never' : stamp(d.grant.expiresAt)}`);
        out(`take it back with: ctrlrun revoke ${d.delegationId}`);
      }
      return 0;
    } finally {
      await control?.close();
      await store.close();
    }
  },
};
