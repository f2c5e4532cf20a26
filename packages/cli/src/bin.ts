/**
 * The `ctrlrun` executable: the real process's arguments, streams, directory and environment.
 *
 * @module
 */
import { processIo } from './io.js';
import { main } from './main.js';

process.exitCode = await main(process.argv.slice(2), processIo());
