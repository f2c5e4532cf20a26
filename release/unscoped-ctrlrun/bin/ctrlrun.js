#!/usr/bin/env node
// The unscoped name `ctrlrun`, held so that `npx --yes ctrlrun` where @ctrlrun/cli is not
// installed runs nobody else's code. It runs nothing: it says where the command is and fails.
process.stderr.write(
  'ctrlrun: this is a placeholder package; the ctrlrun command is @ctrlrun/cli.\n' +
    '  npm install @ctrlrun/cli      then: npx ctrlrun ' +
    (process.argv.slice(2).length > 0 ? '<your arguments>' : 'init') +
    '\n',
);
process.exitCode = 1;
