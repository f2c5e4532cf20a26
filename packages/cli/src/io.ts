/**
 * What a command may touch of its process: output streams, the working directory and the
 * environment. `main` takes these as an argument so tests run commands in-process with their own
 * directory and environment, and the bin passes the real ones.
 *
 * @module
 */
import { userInfo } from 'node:os';
import { createInterface } from 'node:readline';

/** The process as a command sees it. */
export interface CliIo {
  /** Writes text to standard output as is (commands add the newlines). */
  stdout(text: string): void;
  /** Writes text to standard error as is. */
  stderr(text: string): void;
  /**
   * Resolves once standard output has taken what was written (its buffer is below its
   * high-water mark): a streaming listing awaits it between pages, so a slow reader of a pipe
   * holds the command back instead of the output piling up in memory. Absent: nothing to wait for.
   */
  readonly drained?: () => Promise<void>;
  /** The directory relative paths are resolved against. */
  readonly cwd: string;
  /** The environment (`CTRLRUN_CONFIG`, `CTRLRUN_STATE`, `CTRLRUN_STORE_URL`, `CTRLRUN_ENVIRONMENT`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /**
   * The login name of the operating-system user running the command (`os.userInfo().username`),
   * the default approver; absent means that same lookup. Throws when the system has no name for
   * the user.
   */
  readonly userName?: () => string;
  /**
   * Whether a person is at a terminal: standard input is a TTY. `approve` and `deny` then show
   * the action and ask before answering (unless `--yes`); otherwise (a script, a pipe, CI) they
   * answer without asking, as they always did. Absent means false.
   */
  readonly interactive?: boolean;
  /** Writes `question` to stderr and resolves to the line typed, or null at end of input. */
  readonly ask?: (question: string) => Promise<string | null>;
  /**
   * Reads standard input to its end as UTF-8 (`approve --edit -`), refusing more than `limit`
   * bytes (a `RangeError`). Absent: standard input cannot be read.
   */
  readonly readStdin?: (limit: number) => Promise<string>;
}

/** Standard input to its end, at most `limit` bytes; more is a `RangeError` (nothing more is read). */
function readProcessStdin(limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        process.stdin.off('data', onData);
        process.stdin.pause();
        reject(new RangeError(`standard input holds more than the ${limit} bytes this command reads`));
        return;
      }
      chunks.push(chunk);
    };
    process.stdin.on('data', onData);
    process.stdin.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.once('error', reject);
  });
}

/** One line from standard input after `question` on stderr; null when input ends first. */
function askOnTerminal(question: string): Promise<string | null> {
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
    let answered = false;
    rl.on('close', () => {
      if (!answered) {
        process.stderr.write('\n');
        resolve(null);
      }
    });
    rl.question(question, (line) => {
      answered = true;
      rl.close();
      resolve(line);
    });
  });
}

/** One of the process's output streams as a command writes to it. */
interface Output {
  write(text: string): void;
  /** Resolves once the stream has taken what was written, or at once when it is closed. */
  drained(): Promise<void>;
}

/**
 * `stream` with its reader's going away taken as an ordinary end: an EPIPE (`ctrlrun … | head`
 * exited after the lines it wanted) closes it quietly, and whatever the command writes after that
 * is dropped, so the command ends with its own exit code instead of an unhandled 'error' event's
 * stack and exit 1. Any other write error is thrown as before.
 */
function output(stream: NodeJS.WriteStream): Output {
  let closed = false;
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    closed = true;
  });
  return {
    write: (text) => {
      if (!closed && !stream.destroyed) stream.write(text);
    },
    drained: () =>
      closed || stream.destroyed || !stream.writableNeedDrain
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            // A reader that goes away while the buffer is full never drains it: its close ends the wait too.
            const done = () => {
              stream.off('drain', done);
              stream.off('close', done);
              resolve();
            };
            stream.once('drain', done);
            stream.once('close', done);
          }),
  };
}

/** The real process. */
export function processIo(): CliIo {
  const stdout = output(process.stdout);
  const stderr = output(process.stderr);
  return {
    stdout: stdout.write,
    stderr: stderr.write,
    drained: stdout.drained,
    cwd: process.cwd(),
    env: process.env,
    userName: () => userInfo().username,
    interactive: process.stdin.isTTY === true,
    ask: askOnTerminal,
    readStdin: readProcessStdin,
  };
}
