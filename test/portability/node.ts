/**
 * Node host: runs the scenario from TypeScript source (tsx, `@ctrlrun/source` condition). The
 * store imports `sql.js` itself, which resolves to its Node build (`dist/sql-wasm.js`); that
 * reads `sql-wasm.wasm` from its own directory.
 */
import process from 'node:process';
import { runScenario, type ScenarioReport } from './scenario.js';

const report: ScenarioReport = { runtime: { name: 'node', version: process.versions.node }, steps: await runScenario() };
process.stdout.write(`${JSON.stringify(report)}\n`);
