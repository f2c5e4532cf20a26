/**
 * Node host: runs the scenario from TypeScript source (tsx, `@ctrlrun/source` condition). sql.js
 * resolves to its Node build, which reads `sql-wasm.wasm` from its own directory.
 */
import process from 'node:process';
import { runScenario, type ScenarioReport } from './scenario.js';

const report: ScenarioReport = { runtime: { name: 'node', version: process.versions.node }, steps: await runScenario() };
process.stdout.write(`${JSON.stringify(report)}\n`);
