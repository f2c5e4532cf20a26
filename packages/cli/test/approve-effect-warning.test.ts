// `ctrlrun approve` says "this effect already happened" before it asks (issue 35): a request filed
// while its effect key was free, whose effect then committed (or went ambiguous) another way, can
// only be refused when the agent presents the grant. The person sees the effect, the action that
// holds it and its receipt first, on standard error, before the question.
import { describe, expect, it } from 'vitest';
import { ApprovalRequired, protect, resolveCommands } from '@ctrlrun/kernel';
import { main, type CliIo } from '@ctrlrun/cli';
import { openStore } from '@ctrlrun/store-node';
import { exampleControl, run, seed } from './support.js';

/** Runs `ctrlrun` in-process at a scripted terminal; `log` holds stdout, stderr and each question, in the order they came. */
async function atTerminal(argv: string[], cwd: string, answers: string[]): Promise<{ code: number; stdout: string; stderr: string; log: string[] }> {
  let stdout = '';
  let stderr = '';
  const log: string[] = [];
  const io: CliIo = {
    stdout: (t) => void ((stdout += t), log.push(`out ${t}`)),
    stderr: (t) => void ((stderr += t), log.push(`err ${t}`)),
    cwd,
    env: {},
    interactive: true,
    ask: async (q) => {
      log.push(`ask ${q}`);
      const answer = answers.shift();
      if (answer === undefined) throw new Error(`unexpected question: ${q}`);
      return answer;
    },
  };
  const code = await main(argv, io);
  return { code, stdout, stderr, log };
}

/** Runs a refund of `payment_id` through the kernel on the seeded store, as the application would; `lose` loses its reply. */
async function refund(storePath: string, payment_id: string, options: { lose?: boolean } = {}) {
  const store = await openStore(storePath);
  try {
    const control = exampleControl(store);
    const fn = protect<{ payment_id: string; amount: number }, unknown>(
      () => {
        if (options.lose) throw new Error('the reply was lost');
        return { id: `re_${payment_id}` };
      },
      { control, name: 'stripe.refund' },
    );
    await fn({ payment_id, amount: 100 }).catch(() => undefined);
    const effect = (await store.getEffect(`refund:${payment_id}`))!;
    const receipt = (await store.receipts()).filter((r) => r.action_id === effect.actionId).at(-1)!;
    return { actionId: effect.actionId, receiptId: String(receipt.receipt_id), state: effect.state };
  } finally {
    await store.close();
  }
}

describe('ctrlrun approve: an effect that happened meanwhile', () => {
  it('committed since the request was filed: "this effect already happened" with the action and its receipt, before the question; the grant is still the human\'s to give', async () => {
    const s = await seed();
    const done = await refund(s.storePath, 'txn_2');
    expect(done.state).toBe('committed');
    const no = await atTerminal(['approve', s.pending[0], '--as', 'dana'], s.dir, ['n']);
    expect(no.code).toBe(1);
    const warning = `this effect already happened: refund:txn_2 was committed by action ${done.actionId}, receipt ${done.receiptId}\n`;
    expect(no.stderr).toContain(warning);
    expect(no.stderr).toContain(`deny the request instead (see: ctrlrun inspect ${done.actionId})`);
    const said = no.log.indexOf(`err ${warning}`);
    const asked = no.log.findIndex((l) => l.startsWith('ask '));
    expect(said).toBeGreaterThanOrEqual(0);
    expect(said).toBeLessThan(asked);

    // Off a terminal (a script): said on standard error, the answer given, standard output unchanged.
    const script = await run(['approve', s.pending[0], '--as', 'dana'], { cwd: s.dir });
    expect(script.code).toBe(0);
    expect(script.stderr).toContain(warning);
    expect(script.stdout).toMatch(new RegExp(`^granted ${s.pending[0]} for sha256:[0-9a-f]{64} by dana\\nexpires \\S+Z\\n$`));
  });

  it('ambiguous since: "nobody knows whether this effect happened" and how to resolve it; a free effect says nothing', async () => {
    const s = await seed();
    const lost = await refund(s.storePath, 'txn_3', { lose: true });
    expect(lost.state).toBe('ambiguous');
    const r = await run(['approve', s.pending[1], '--as', 'dana', '--yes'], { cwd: s.dir });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `nobody knows whether this effect happened: refund:txn_3 is ambiguous (left by action ${lost.actionId}, receipt ${lost.receiptId})\n`,
    );
    expect(r.stderr).toContain('ctrlrun resolve refund:txn_3 --committed (or --failed)');
    // txn_2 is untouched here: no warning at all.
    const free = await run(['approve', s.pending[0], '--as', 'dana'], { cwd: s.dir });
    expect(free).toMatchObject({ code: 0, stderr: '' });
  });

  it("the resolve command holds the agent's key as one shell word: a quote or ; in it cannot end the argument and run a second command", async () => {
    const s = await seed();
    const payment = "t'; touch /tmp/pwned; echo '";
    // A request filed for a refund of that payment (over the amount that needs a human) …
    const store = await openStore(s.storePath);
    let requestId: string;
    try {
      const fn = protect<{ payment_id: string; amount: number }, unknown>(() => ({}), { control: exampleControl(store), name: 'stripe.refund' });
      requestId = await fn({ payment_id: payment, amount: 200000 }).then(
        () => expect.fail('the refund ran without approval'),
        (err: unknown) => (err instanceof ApprovalRequired ? err.requestId : expect.fail(String(err))),
      );
    } finally {
      await store.close();
    }
    // … whose effect went ambiguous another way.
    expect((await refund(s.storePath, payment, { lose: true })).state).toBe('ambiguous');
    const r = await run(['approve', requestId, '--as', 'dana', '--yes'], { cwd: s.dir });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`ctrlrun resolve 'refund:t'\\''; touch /tmp/pwned; echo '\\''' --committed (or --failed)`);
    expect(resolveCommands(`refund:${payment}`)?.committed).toBe(`ctrlrun resolve 'refund:t'\\''; touch /tmp/pwned; echo '\\''' --committed`);
  });
});
