/**
 * The shape of a command: its options (parsed by Node's `util.parseArgs`), its positional
 * arguments, its help, and what it does.
 *
 * @module
 */
import type { CliIo } from './io.js';

/** One option, as `util.parseArgs` takes it, with its help line. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  /** `VALUE` placeholder shown in help (string options). */
  readonly value?: string;
  readonly help: string;
}

/** What a command's `run` receives. */
export interface Invocation {
  readonly io: CliIo;
  readonly values: Readonly<Record<string, string | boolean | string[] | undefined>>;
  readonly positionals: readonly string[];
  /**
   * Writes one line of text for a person to stdout, every control, bidi and separator character
   * in it escaped visibly (`visible` in format.ts): a line written with `out` is one line on the screen.
   */
  out(line: string): void;
  /** Writes one line of text for a person to stderr, escaped as {@link out} escapes. */
  err(line: string): void;
  /** Writes machine-readable output (JSON) to stdout exactly as given, and a newline. */
  json(text: string): void;
}

/** A `ctrlrun` command. */
export interface Command {
  readonly name: string;
  /** One line, for the command list. */
  readonly summary: string;
  /** Positional argument names, in order, all required except a last one written `[NAME…]`, which takes any number. */
  readonly positionals: readonly string[];
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Paragraphs shown after the options in `--help`. */
  readonly details?: string;
  /** Runs; resolves to the exit code. */
  run(inv: Invocation): Promise<number>;
}

/** The usage line: `ctrlrun approve REQUEST_ID [--store-url URL]`. */
export function usageLine(cmd: Command): string {
  const opts = Object.entries(cmd.options).map(([name, o]) => `[--${name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}]`);
  return ['ctrlrun', cmd.name, ...cmd.positionals, ...opts].join(' ');
}

/** The whole `--help` text. */
export function helpText(cmd: Command): string {
  const lines = [`usage: ${usageLine(cmd)}`, '', cmd.summary];
  const opts = Object.entries(cmd.options);
  if (opts.length > 0) {
    lines.push('', 'options:');
    const labels = opts.map(([name, o]) => `--${name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}`);
    const width = Math.max(...labels.map((l) => l.length), '--help'.length);
    opts.forEach(([, o], i) => lines.push(`  ${labels[i]!.padEnd(width)}  ${o.help}`));
    lines.push(`  ${'--help'.padEnd(width)}  show this help`);
  }
  if (cmd.details) lines.push('', cmd.details);
  return `${lines.join('\n')}\n`;
}

/** The `--store-url` option every store command takes. */
export const STORE_URL: OptionSpec = {
  type: 'string',
  value: 'URL',
  help: 'sqlite://PATH or postgresql://… (default: $CTRLRUN_STORE_URL, else $CTRLRUN_STATE, else .ctrlrun/state.db beside the policy)',
};

/**
 * `--as NAME` of the commands that answer (`approve`, `deny`, `resolve`): who answers, recorded as
 * the approver or resolver.
 */
export const AS_APPROVER: OptionSpec = {
  type: 'string',
  value: 'NAME',
  help: 'who answers, recorded on the record and its event (default: $CTRLRUN_APPROVER, else your OS login name)',
};

/** Printed to stderr first by every command that loads a policy in observe mode. */
export const OBSERVE_BANNER = 'OBSERVE MODE — nothing is enforced';
