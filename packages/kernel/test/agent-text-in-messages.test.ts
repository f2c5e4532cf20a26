// Every message an agent, an operator or a log reads that names something the agent chose (an
// effect key, an argument's name, a claimed resource, an environment, a timestamp) shows it
// escaped and cut: a line break cannot start a forged line, a bidi override cannot turn the rest
// around, and ten thousand characters cannot bury the message. The siblings the earlier passes
// missed, each reached through the public path an agent's call takes.
import { describe, expect, it } from 'vitest';
import { createAction, intake, NotExecuted, protect } from '@ctrlrun/kernel';
import { setup } from './harness.js';

const HIDDEN = `\n[ctrlrun] forged line\u202eEVIL`;
const EVIL = `x${HIDDEN}${'y'.repeat(10_000)}`;

/** The message shows none of the hidden characters raw, and stays short. */
function shownEscaped(message: string): void {
  expect(message).not.toMatch(/[\n\u202e]/);
  expect(message).toContain('\\u202e');
  expect(message.length).toBeLessThan(2_000);
}

async function refusal(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => expect.fail('the call was not refused'),
    (err: unknown) => err as Error,
  );
}

describe('agent-chosen text in messages', () => {
  it('max_attempts: the refusal names the effect key escaped and cut', async () => {
    const { control } = await setup(`schema: ctrlrun.policy/v5
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    max_attempts: 1
    decision: allow
`);
    const fn = protect<{ payment_id: string }, string>(
      () => {
        throw new NotExecuted('rejected');
      },
      { control, name: 'stripe.refund' },
    );
    await fn({ payment_id: EVIL }).catch(() => undefined);
    const err = await refusal(fn({ payment_id: EVIL }));
    expect(err.name).toBe('ActionDenied');
    shownEscaped(err.message);
  });

  it('an effect key template with no value for a placeholder: the argument names it lists are escaped, cut and counted, in the error and the denied receipt', async () => {
    const { control, receipts } = await setup();
    const args: Record<string, unknown> = { amount: 1 };
    for (let i = 0; i < 500; i++) args[`${EVIL}${i}`] = i;
    const err = await refusal(protect<Record<string, unknown>, string>(() => 'ran', { control, name: 'stripe.refund' })(args));
    expect(err.name).toBe('EffectKeyError');
    shownEscaped(err.message);
    expect(err.message).toMatch(/, and 481 more\)/);
    shownEscaped(String(receipts.at(-1)!.document['error']));
  });

  it("a condition on an argument the action lacks: the warning's list of the names it has is escaped", async () => {
    const warnings: string[] = [];
    const { control } = await setup(
      `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    rules:
      - {when: {amount_lte: 100}, decision: allow}
      - {decision: allow}
`,
      { logger: { warn: (m: string) => void warnings.push(m) } },
    );
    await protect<Record<string, unknown>, string>(() => 'ran', { control, name: 'stripe.refund' })({ [EVIL]: 1 });
    expect(warnings.length).toBeGreaterThan(0);
    for (const w of warnings) shownEscaped(w);
  });

  it('an argument no action can carry: its path is escaped and cut', () => {
    let message = '';
    try {
      createAction({ name: 'stripe.refund', arguments: { [EVIL]: 1.5 }, principal: { agent: 'a' } });
    } catch (err) {
      message = (err as Error).message;
    }
    shownEscaped(message);
  });

  it("intake: a claimed effect key that is not the policy's, a claimed environment, a credential expiry that is no time: each escaped", async () => {
    const { control } = await setup();
    const mismatch = await refusal(intake(control, { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 1 }, effectKey: EVIL }));
    expect(mismatch.message).toContain('is not the policy');
    shownEscaped(mismatch.message);
    const elsewhere = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p2', amount: 1 }, principal: { agent: 'a' }, environment: EVIL });
    shownEscaped((await refusal(control.execute(elsewhere, () => 'ran'))).message);
    const expiry = createAction({ name: 'stripe.refund', arguments: { payment_id: 'p3', amount: 1 }, principal: { agent: 'a', expiresAt: EVIL } });
    shownEscaped((await refusal(control.execute(expiry, () => 'ran'))).message);
  });

  it("an effect key in the policy-change flow's reserved space: named escaped", async () => {
    const { control } = await setup(`schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "{payment_id}"
    decision: allow
`);
    const err = await refusal(protect<{ payment_id: string }, string>(() => 'ran', { control, name: 'stripe.refund' })({ payment_id: `policy:${EVIL}` }));
    shownEscaped(err.message);
  });
});
