/**
 * What `ctrlrun delegate` and `ctrlrun break-glass open` share: one grant read from a YAML file,
 * and a refused plan said as the CLI says a refusal.
 *
 * @module
 */
import { AuthorityEscalation, loadGrant, type Grant } from '@ctrlrun/kernel';
import { CliRefusal } from './errors.js';
import { readRegularFile } from './files.js';

/** The grant in `file` (the grant keys minus `id`), or a refusal naming the file. */
export function readGrantFile(file: string): Grant {
  let text: string;
  try {
    text = readRegularFile(file);
  } catch (e) {
    throw new CliRefusal(`the grant file ${file} cannot be read: ${(e as Error).message}`);
  }
  return loadGrant(text, { source: file });
}

/** Runs `plan`; an {@link AuthorityEscalation} becomes a refusal naming its reason and dimension. */
export async function refusingEscalation<T>(plan: () => Promise<T>): Promise<T> {
  try {
    return await plan();
  } catch (e) {
    if (e instanceof AuthorityEscalation) throw new CliRefusal(`${e.reason}${e.dimension ? ` (${e.dimension})` : ''}: ${e.message}`);
    throw e;
  }
}
