/**
 * `ctrlrun resolve EFFECT_KEY --committed|--failed`: a human says what happened to an ambiguous
 * effect. Only an AMBIGUOUS record moves; anything else is refused before any write connection.
 *
 * @module
 */
import { evidenceTime, type StateStore } from '@ctrlrun/kernel';
import { CLI_ACTOR, STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { CliRefusal, UsageError } from '../errors.js';
import { openAnswerer } from '../stores.js';

async function mustBeAmbiguous(reader: StateStore, key: string): Promise<void> {
  const record = await reader.getEffect(key);
  if (record === null) throw new CliRefusal(`no effect ${key}`);
  if (record.state !== 'ambiguous') throw new CliRefusal(`${key} is ${record.state}, not ambiguous: only an ambiguous effect is resolved by a human`);
}

export const resolve: Command = {
  name: 'resolve',
  summary: 'say what happened to an ambiguous effect: --committed or --failed',
  positionals: ['EFFECT_KEY'],
  options: {
    committed: { type: 'boolean', help: 'the effect happened (a retry stays refused as a duplicate)' },
    failed: { type: 'boolean', help: 'the effect did not happen (a retry is permitted)' },
    'store-url': STORE_URL,
  },
  async run({ io, values, positionals, out }) {
    const key = positionals[0]!;
    if ((values['committed'] === true) === (values['failed'] === true)) throw new UsageError('resolve needs exactly one outcome, committed|failed: give --committed or --failed');
    const state = values['committed'] === true ? 'committed' : 'failed';
    const store = await openAnswerer(storeTarget(io, values['store-url'] as string | undefined), (r) => mustBeAmbiguous(r, key));
    try {
      const record = await store.resolveEffect(key, state, CLI_ACTOR);
      await store.appendEvent({
        ts: evidenceTime(new Date()),
        type: 'EFFECT_RESOLVED',
        actionId: record.actionId,
        effectKey: key,
        approvalId: null,
        data: { state, resolver: CLI_ACTOR, resolved_by: 'human' },
      });
      out(`${key} resolved ${state} by ${CLI_ACTOR}`);
      if (state === 'failed') out(`a retry is now permitted: the next attempt reserves ${key} again`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
