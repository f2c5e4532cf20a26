/**
 * Whether bin/ctrlrun.js (a source checkout's launcher) runs this process and passes every signal
 * on to it: it sets `CTRLRUN_SIGNALS_PASSED_ON=1` for its child (see `untilSignalled`). Read once,
 * when the command starts, and taken out of the environment then, so that the processes this one
 * starts (an MCP upstream command, a nested ctrlrun) do not inherit what was said to this one.
 *
 * @module
 */
export const signalsPassedOn: boolean = process.env['CTRLRUN_SIGNALS_PASSED_ON'] === '1';
delete process.env['CTRLRUN_SIGNALS_PASSED_ON'];
