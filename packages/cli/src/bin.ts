/**
 * The `ctrlrun` executable: the real process's arguments, streams, directory and environment.
 *
 * @module
 */
// First: the launcher's word is taken out of the environment before anything reads or passes it on.
import './signals-passed-on.js';
import { processIo } from './io.js';
import { main } from './main.js';

process.exitCode = await main(process.argv.slice(2), processIo());
