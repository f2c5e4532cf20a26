/**
 * `main(argv, io)`: parses the command line, runs one command, and maps what went wrong to the
 * documented exit codes — 2 for a bad command line (with usage and a `--help` hint), 1 for a
 * refusal (the kernel's errors included), each as one line `Error: <message>` on stderr.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { helpText, usageLine, type Command, type Invocation } from './command.js';
import { COMMANDS } from './commands/index.js';
import { CliRefusal, oneLine, UsageError } from './errors.js';
import { visible } from './format.js';
import type { CliIo } from './io.js';
import { VERSION } from './version.js';

function globalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = [
    'usage: ctrlrun <command> [options]',
    '',
    'The last check before an AI agent does something it cannot undo.',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    "Run 'ctrlrun <command> --help' for a command's options; 'ctrlrun --version' for the version.",
  ];
  return `${lines.join('\n')}\n`;
}

function parse(cmd: Command, args: readonly string[]): { values: Invocation['values']; positionals: string[]; help: boolean } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(cmd.options)) {
    options[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (err) {
    // parseArgs words its errors for a programmer ("Unknown option '--x'. To specify a positional…"); keep the first sentence.
    const message = err instanceof Error ? err.message.split(/\.\s/)[0]!.replace(/\.$/, '') : String(err);
    throw new UsageError(message);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  return { values, positionals: parsed.positionals, help: values['help'] === true };
}

/** Runs `ctrlrun` with `argv` (without the node and script paths); resolves to the exit code. */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const out = (line: string) => io.stdout(`${visible(line)}\n`);
  const err = (line: string) => io.stderr(`${visible(line)}\n`);
  const json = (text: string) => io.stdout(`${text}\n`);
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stderr(globalHelp());
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.stdout(globalHelp());
    return 0;
  }
  if (name === '--version' || name === '-V') {
    out(VERSION);
    return 0;
  }
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    err(`Error: unknown command ${JSON.stringify(name)}; the commands are ${COMMANDS.map((c) => c.name).join(', ')}`);
    err("Run 'ctrlrun --help' for help.");
    return 2;
  }
  try {
    const { values, positionals, help } = parse(cmd, rest);
    if (help) {
      io.stdout(helpText(cmd));
      return 0;
    }
    // A last positional written `[NAME…]` takes any number of arguments, none included.
    const variadic = cmd.positionals.at(-1)?.endsWith('…]') === true;
    const required = cmd.positionals.length - (variadic ? 1 : 0);
    if (positionals.length < required) throw new UsageError(`missing ${cmd.positionals.slice(positionals.length, required).join(' ')}`);
    if (!variadic && positionals.length > required) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[required])}`);
    return await cmd.run({ io, values, positionals, out, err, json });
  } catch (e) {
    if (e instanceof UsageError) {
      err(`Error: ${oneLine(e.message)}`);
      err(`usage: ${usageLine(cmd)}`);
      err(`Run 'ctrlrun ${cmd.name} --help' for help.`);
      return 2;
    }
    err(`Error: ${oneLine(e instanceof Error ? e.message : String(e))}`);
    return e instanceof CliRefusal ? e.exitCode : 1;
  }
}
