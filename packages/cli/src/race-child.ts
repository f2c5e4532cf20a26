/**
 * One of G4's racing processes. Reads its orders (one JSON line) from stdin, opens the scratch
 * store, builds its Control and protected function as an application would, says `ready`, waits
 * for `go`, runs once, and prints its outcome as one JSON line. The executor marks each run by
 * creating a file of its own exclusively, so runs are counted outside the store.
 *
 * @module
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Control, loadAuthority, loadPolicy, parseJson, protect, type JsonObject } from '@ctrlrun/kernel';
import { isObject } from './format.js';
import { describeOutcome } from '@ctrlrun/kernel/verify';
import { openAddress } from './stores.js';

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const first = await lines.next();
const orders = parseJson(String(first.value)) as JsonObject;
const args = orders['arguments'];
if (!isObject(args)) throw new Error('race-child: the orders carry no arguments');
const principal = orders['principal'] as { agent: string; user: string | null };

const store = await openAddress(orders['locator'] as string);
const authorityText = orders['authorityText'];
const control = new Control({
  policy: loadPolicy(orders['policyText'] as string, { source: orders['policySource'] as string }),
  ...(typeof authorityText === 'string' ? { authority: loadAuthority(authorityText, { source: orders['authoritySource'] as string }) } : {}),
  store,
  environment: orders['environment'] as string,
  logger: { warn: () => {} },
});
const run = protect<JsonObject, JsonObject>(
  () => {
    writeFileSync(join(orders['markers'] as string, `run-${process.pid}`), '', { flag: 'wx' });
    return { ok: true, pid: process.pid };
  },
  { control, name: orders['action'] as string },
);
process.stdout.write('ready\n');
await lines.next();
let outcome: string;
try {
  await run(args as JsonObject, { principal });
  outcome = 'committed';
} catch (error) {
  outcome = describeOutcome({ ok: false, error });
}
await store.close();
process.stdout.write(`${JSON.stringify({ pid: process.pid, outcome })}\n`);
process.exit(0);
