// Shared fixtures for the CLI tests: temp directories, in-process and real-binary runs, and a
// seeded SQLite store written through the kernel as an application writes it.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { ApprovalRequired, Control, EXAMPLE_POLICY_YAML, loadPolicy, protect, type StateStore } from '@ctrlrun/kernel';
import { main, type CliIo } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { bundleSource } from '../src/verify-node.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** A fresh directory, removed after the file's tests. */
export function tempDir(prefix = 'ctrlrun-cli-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `ctrlrun` in-process with its own directory and environment. */
export async function run(argv: string[], options: { cwd: string; env?: Record<string, string>; userName?: () => string }): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    cwd: options.cwd,
    env: options.env ?? {},
    ...(options.userName ? { userName: options.userName } : {}),
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

const SRC = (file: string) => fileURLToPath(new URL(`../src/${file}`, import.meta.url));
/** `bin/ctrlrun.js`, the installed command (in a checkout it runs the TypeScript under tsx in a child process). */
export const LAUNCHER = fileURLToPath(new URL('../bin/ctrlrun.js', import.meta.url));
let built: Promise<string> | null = null;

/**
 * The executable bundled once per test file, laid out as a build ships it: `bin.js` with its
 * sibling `race-child.js` (verify's racing processes) in an ES-module package; plain `node` runs it.
 */
export function executable(): Promise<string> {
  return (built ??= (async () => {
    const dir = tempDir('ctrlrun-bin-');
    writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
    await Promise.all([bundleSource(SRC('bin.ts'), join(dir, 'bin.js')), bundleSource(SRC('race-child.ts'), join(dir, 'race-child.js'))]);
    return join(dir, 'bin.js');
  })());
}

/**
 * Runs the real `ctrlrun` executable as a subprocess: the entry `src/bin.ts` bundled as a build
 * ships it, or with `launcher: true` through `bin/ctrlrun.js` itself (the installed command, which
 * in a checkout runs the TypeScript under tsx).
 */
export async function spawnCli(
  args: string[],
  options: { cwd: string; env?: Record<string, string>; launcher?: boolean; killAfterMs?: number },
): Promise<RunResult & { signal?: NodeJS.Signals | null }> {
  const argv = options.launcher ? [LAUNCHER, ...args] : [await executable(), ...args];
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...(options.env ?? {}) };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { cwd: options.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => void (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
    // A hang is an outcome to report, not a test that never ends: the process is killed after `killAfterMs`.
    const timer = options.killAfterMs === undefined ? null : setTimeout(() => child.kill('SIGKILL'), options.killAfterMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (timer !== null) clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr, ...(signal !== null ? { signal } : {}) });
    });
  });
}

/**
 * A digest of a SQLite store's bytes and its WAL's, to prove a command wrote nothing. An empty
 * WAL (what a read-only connection leaves beside a WAL-mode file) holds nothing and counts as none.
 */
export function storeBytes(path: string): string {
  const parts = ['', '-wal'].map((s) => {
    const bytes = existsSync(path + s) ? readFileSync(path + s) : null;
    return bytes === null || (s === '-wal' && bytes.length === 0) ? '-' : createHash('sha256').update(bytes).digest('hex');
  });
  return parts.join('|');
}

/** What {@link seed} wrote. */
export interface Seeded {
  dir: string;
  storePath: string;
  /** Two pending approval requests (stripe.refund txn_2 €2,000 and txn_3 €3,000). */
  pending: [string, string];
  /** `email:m1`, left AMBIGUOUS by a lost reply. */
  ambiguousKey: string;
  /** The action ids, in the order they ran. */
  actions: { read: string; refund: string; suspended: string; lost: string; denied: string };
}

/** A Control over `store` with the example policy, acting as `refund-agent`. */
export function exampleControl(store: StateStore, policyYaml = EXAMPLE_POLICY_YAML): Control {
  return new Control({ policy: loadPolicy(policyYaml), store, principal: { agent: 'refund-agent' }, logger: { warn: () => {} } });
}

/**
 * A directory with the example policy and a store (by default at `.ctrlrun/state.db`) holding: a
 * committed read, a committed refund, two pending approvals, an ambiguous email and a denied grant.
 */
export async function seed(dir = tempDir(), open?: () => Promise<StateStore>): Promise<Seeded> {
  writeFileSync(join(dir, 'ctrlrun.yaml'), EXAMPLE_POLICY_YAML);
  const storePath = join(dir, '.ctrlrun', 'state.db');
  mkdirSync(join(dir, '.ctrlrun'), { recursive: true });
  const store = open ? await open() : await openStore(storePath);
  const control = exampleControl(store);
  const ids: string[] = [];
  const track = (fn: (a: Record<string, unknown>) => unknown, name: string) => protect<Record<string, unknown>, unknown>((args) => fn(args), { control, name });
  const actionOf = async (p: Promise<unknown>) => {
    await p.catch(() => undefined);
    const events = await store.events();
    ids.push(events.filter((e) => e.type === 'ACTION_PROPOSED').at(-1)!.actionId!);
  };
  const pending: string[] = [];
  await actionOf(track(() => ({ id: 'c1' }), 'customer.read')({ customer_id: 'c1' }));
  await actionOf(track((a) => ({ id: `re_${String(a['payment_id'])}` }), 'stripe.refund')({ payment_id: 'txn_1', amount: 20000 }));
  for (const [payment, amount] of [
    ['txn_2', 200000],
    ['txn_3', 300000],
  ] as const) {
    try {
      await track(() => ({}), 'stripe.refund')({ payment_id: payment, amount });
    } catch (err) {
      if (!(err instanceof ApprovalRequired)) throw err;
      pending.push(err.requestId);
    }
  }
  ids.push((await store.events()).filter((e) => e.type === 'ACTION_PROPOSED').at(-2)!.actionId!);
  await actionOf(
    track(() => {
      throw Object.assign(new Error('the reply was lost'), { name: 'TimeoutError' });
    }, 'email.send')({ message_id: 'm1', to: 'ana@example.com' }),
  );
  await actionOf(track(() => ({}), 'iam.grant_admin')({ user: 'mallory' }));
  await store.close();
  const [read, refund, suspended, lost, denied] = ids as [string, string, string, string, string];
  return { dir, storePath, pending: pending as [string, string], ambiguousKey: 'email:m1', actions: { read, refund, suspended, lost, denied } };
}

/** A v3 policy with one delegable grant for a human (€100,000). */
export const AUTHORITY_POLICY = `schema: ctrlrun.policy/v3
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 100000 }
        decision: allow
      - decision: deny
authority:
  max_delegation_depth: 3
  grants:
    - id: head-of-support
      subject: { agent: head-of-support, user: dana@example.com }
      actions: [stripe.refund]
      constraints: { amount_lte: 10000000 }
      delegable: true
      expires_at: "2099-01-01T00:00:00Z"
`;

/** A grant file for `ctrlrun delegate`: finance-agent under the human, up to `amount` minor units. */
export const grantYaml = (amount: number) => `subject: { agent: finance-agent, user: dana@example.com }
actions: [stripe.refund]
constraints: { amount_lte: ${amount} }
delegable: true
expires_at: "2098-01-01T00:00:00Z"
`;
