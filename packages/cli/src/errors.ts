/**
 * The CLI's two kinds of failure besides the kernel's own errors: a bad command line (exit 2)
 * and a refusal (exit 1, or a command's own code). Either prints one line, `Error: <message>`.
 *
 * @module
 */

/** A bad command line: missing argument, unknown option, malformed value. Exit 2, usage printed. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A refusal the CLI itself makes (a store that is not there, an unknown id). */
export class CliRefusal extends Error {
  override name = 'CliRefusal';
  /** The exit code (1 unless a command documents another). */
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** One line, whatever the message held: a refusal is never more than one line on stderr. */
export function oneLine(message: string): string {
  return message.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
