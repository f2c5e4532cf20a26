/**
 * Deno host: bundled by `scripts/portability.ts` with `sql.js` left external, then run with
 * `deno run -A --node-modules-dir=manual` from the repository root. The store's own
 * `import('sql.js')` is resolved by Deno from `node_modules` to sql.js's Node build
 * (`dist/sql-wasm.js`, CommonJS), which reads its `.wasm` through Deno's Node compatibility.
 */
import { runScenario, type ScenarioReport } from './scenario.js';

declare const Deno: { version: { deno: string }; stdout: { write(bytes: Uint8Array): Promise<number> } };

const report: ScenarioReport = { runtime: { name: 'deno', version: Deno.version.deno }, steps: await runScenario() };
const bytes = new TextEncoder().encode(`${JSON.stringify(report)}\n`);
for (let at = 0; at < bytes.length;) at += await Deno.stdout.write(bytes.subarray(at));
