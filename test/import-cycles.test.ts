// No import circle in any package (scripts/check-cycles.ts, run by `npm test` as check:cycles):
// the repository has none, and the check finds one as it would be written.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importCycles, repositoryCycles, valueImports } from '../scripts/check-cycles.js';

const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-cycles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

describe('import circles', () => {
  it('the packages, the worker and the playground have none', () => {
    expect(repositoryCycles().map((c) => c.join(' '))).toEqual([]);
  });

  it('a circle through a multi-line import is found; type-only imports and dynamic imports are not edges', () => {
    const a = file('a.ts', "import {\n  b,\n  c,\n} from './b.js';\nexport const a = 1;\n");
    const b = file('b.ts', "import type { T } from './c.js';\nimport { type U } from './c.js';\nexport { a } from './a.js';\nexport const b = 2;\n");
    const c = file('c.ts', "export type T = 1;\nexport type U = 2;\nexport const load = () => import('./a.js');\n");
    const d = file('d.ts', "import './d.js';\n");
    expect(valueImports(b)).toEqual([a]);
    expect(valueImports(c)).toEqual([]);
    expect(importCycles([a, b, c, d]).map((cycle) => cycle.map((f) => f.slice(dir.length + 1)))).toEqual([['a.ts', 'b.ts'], ['d.ts']]);
    // The circle this check was written for: the receipt's edit view in edit.ts, needed by evidence.ts.
    const evidence = file('evidence.ts', "import { receiptEdit } from './edit.js';\n");
    const gates = file('gates.ts', "import { note } from './evidence.js';\n");
    const edit = file('edit.ts', "import { evaluate } from './gates.js';\nexport function receiptEdit() {}\n");
    expect(importCycles([evidence, gates, edit])).toHaveLength(1);
  });
});
