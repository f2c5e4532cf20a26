// `npm run bench`: runs every section in scripts/bench/ in its own process, one after another,
// so no section's warm-up or garbage skews another. Each prints its own figures and ratios. The
// packages are measured as they ship: their built `dist/` (`npm run bench` builds it first with
// `tsc -b`), not their TypeScript source through tsx, whose transform adds work of its own.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(import.meta.dirname, 'bench');
const only = process.argv.slice(2);
const sections = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !f.startsWith('_'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const f of sections) {
  console.log(`\n== ${f.replace(/\.ts$/, '')} ==`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(dir, f)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.log(`(section ${f} exited ${r.status ?? r.signal})`);
  }
}
process.exitCode = failed ? 1 : 0;
