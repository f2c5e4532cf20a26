/**
 * `ctrlrun resolve EFFECT_KEY --committed|--failed`: a human says what happened to an ambiguous
 * effect, through the kernel (`Control.resolveEffect`), recorded as `--as NAME`,
 * `$CTRLRUN_APPROVER` or the OS login name. Only an AMBIGUOUS record moves; anything else is
 * refused before any write connection.
 *
 * @module
 */
import type { StateStore } from '@ctrlrun/kernel';
import { AS_APPROVER, STORE_URL, type Command } from '../command.js';
import { answeringControl } from '../control.js';
import { CliRefusal, UsageError } from '../errors.js';

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
    as: AS_APPROVER,
    'store-url': STORE_URL,
  },
  async run(inv) {
    const { values, positionals, out } = inv;
    const key = positionals[0]!;
    if ((values['committed'] === true) === (values['failed'] === true))
      throw new UsageError('resolve needs exactly one outcome, committed|failed: give --committed or --failed');
    const state = values['committed'] === true ? 'committed' : 'failed';
    return answeringControl(
      inv,
      (reader) => mustBeAmbiguous(reader, key),
      async (control, by) => {
        await control.resolveEffect(key, state, { by });
        out(`${key} resolved ${state} by ${by}`);
        if (state === 'failed') out(`a retry is now permitted: the next attempt reserves ${key} again`);
      },
    );
  },
};
