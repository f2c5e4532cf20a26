// The object createAction returns: frozen data fields, canonicalArguments a getter it inherits
// (a fresh copy on each read), and a copy of it that is not an action refused by name.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { actionToJson, createAction, InvalidArgument, type Action, type Control } from '@ctrlrun/kernel';
import { actionFromJson } from '@ctrlrun/kernel/store';
import { describe, expect, it } from 'vitest';
import { setup } from './harness.js';

const input = { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' } };

/** `execute` refuses `copy` with an InvalidArgument matching `message`, and never runs the executor. */
async function expectRefused(control: Control, copy: Action, message: RegExp): Promise<void> {
  let ran = false;
  const err = await control
    .execute(copy, () => {
      ran = true;
    })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(InvalidArgument);
  expect((err as Error).message).toMatch(message);
  expect(ran).toBe(false);
}

describe('an action', () => {
  it('has its fields as frozen data, in this order, and canonicalArguments as a fresh copy on each read', () => {
    const action = createAction(input);
    expect(Object.keys(action)).toEqual(['actionId', 'name', 'arguments', 'principal', 'resource', 'environment', 'actionHash', 'canonical']);
    expect(Object.isFrozen(action)).toBe(true);
    expect(() => {
      (action as { name: string }).name = 'iam.grant_admin';
    }).toThrow(TypeError);
    const a = action.canonicalArguments;
    const b = action.canonicalArguments;
    expect(a).toEqual({ amount: 500, payment_id: 'p1' });
    expect(a).not.toBe(b);
    a['amount'] = 1;
    expect(action.canonicalArguments['amount']).toBe(500);
    expect(actionFromJson(actionToJson(action)).canonicalArguments).toEqual({ amount: 500, payment_id: 'p1' });
  });

  it('hands out copies that share nothing with it, nested values included', () => {
    const action = createAction({ ...input, arguments: { refund: { lines: [{ sku: 'a', qty: 1 }] }, note: 'x' } });
    const a = action.canonicalArguments as { refund: { lines: { sku: string; qty: number }[] } };
    a.refund.lines[0]!.qty = 99;
    a.refund.lines.push({ sku: 'b', qty: 2 });
    expect(action.canonicalArguments).toEqual({ note: 'x', refund: { lines: [{ qty: 1, sku: 'a' }] } });
    expect(actionToJson(action)).toContain('"refund":{"lines":[{"qty":1,"sku":"a"}]}');
  });

  it('is built by createAction only: its class, reached from any action, refuses to build one', () => {
    const action = createAction(input);
    const Ctor = (Object.getPrototypeOf(action) as { constructor: new (...a: unknown[]) => unknown }).constructor;
    expect(() => new Ctor(undefined, { ...action, arguments: { amount: 99 } }, '{"amount":99}')).toThrow(TypeError);
    // createAction takes an action it built, and builds the same one.
    const again = createAction(action);
    expect([again.actionId, again.actionHash, again.canonical]).toEqual([action.actionId, action.actionHash, action.canonical]);
  });

  it('cannot have what its canonical arguments read redefined', () => {
    const action = createAction(input);
    const proto = Object.getPrototypeOf(action) as object;
    expect(() => Object.defineProperty(proto, 'canonicalArguments', { get: () => ({ amount: 1 }) })).toThrow(TypeError);
    expect(() => Object.defineProperty(action, 'canonicalArguments', { get: () => ({ amount: 1 }) })).toThrow(TypeError);
    expect(action.canonicalArguments).toEqual({ amount: 500, payment_id: 'p1' });
  });

  it('a spread or JSON copy of an action is refused by execute by name, and nothing is written', async () => {
    const { control, store, events } = await setup();
    const action = createAction(input);
    for (const copy of [{ ...action }, JSON.parse(JSON.stringify(action)) as typeof action]) {
      await expectRefused(control, copy, /createAction.*no canonicalArguments.*spread or JSON copy/);
    }
    expect(events).toEqual([]);
    expect(await store.listEffects()).toEqual([]);
    // The action itself runs.
    await control.execute(action, () => 'ok');
    expect((await store.listEffects()).map((e) => e.state)).toEqual(['committed']);
  });

  it('an object that is not what its hash says is refused by execute and never stored; an exact copy with its arguments runs', async () => {
    const { control, store, events } = await setup();
    const action = createAction(input);
    const other = createAction({ ...input, arguments: { payment_id: 'p2', amount: 99 } });
    const proto = Object.prototype as Record<string, unknown>;
    const forged: Action[] = [
      // Another action's fields under this one's hash, and the reverse.
      { ...other, canonicalArguments: other.canonicalArguments, actionHash: action.actionHash, canonical: action.canonical },
      { ...action, canonicalArguments: other.canonicalArguments },
      // The right fields, but `arguments` says something else.
      { ...action, canonicalArguments: action.canonicalArguments, arguments: other.arguments },
      // A proxy of an action: its getter cannot read the action's own state through it.
      new Proxy(action, {}),
    ];
    for (const copy of forged) {
      await expectRefused(control, copy, /needs an Action built by createAction/);
      expect(() => actionToJson(copy)).toThrow(InvalidArgument);
      await expect(
        store.putApprovalRequest({
          requestId: 'apr_x',
          actionHash: copy.actionHash,
          action: copy,
          createdAt: '2026-01-01T12:00:00+00:00',
          expiresAt: '2026-01-02T12:00:00+00:00',
          policyHash: null,
        }),
      ).rejects.toThrow(InvalidArgument);
    }
    // Each refusal says what is wrong, and shows a carried hash as it is (invisible characters escaped).
    const says = async (copy: Action): Promise<string> => ((await control.execute(copy, () => 'ran').catch((e: unknown) => e)) as Error).message;
    expect(await says({ ...action, canonicalArguments: action.canonicalArguments, arguments: other.arguments })).toMatch(
      /its arguments are not the canonical arguments its hash covers/,
    );
    expect(await says({ ...action, canonicalArguments: action.canonicalArguments, canonical: other.canonical })).toMatch(
      /its canonical text is not the one its fields hash/,
    );
    const hidden = await says({ ...action, canonicalArguments: action.canonicalArguments, actionHash: 'sha256:\u202eabc\u0000' });
    expect(hidden).toContain(`its fields hash to ${action.actionHash}, not to the actionHash it carries ("sha256:\\u202eabc\\u0000")`);
    expect(hidden).not.toMatch(/[\u202e\u0000]/);
    // A JSON copy while something has put canonicalArguments on Object.prototype: it must not read them.
    proto['canonicalArguments'] = { payment_id: 'p2', amount: 99 };
    try {
      const err = await control.execute(JSON.parse(JSON.stringify(action)) as Action, () => 'ran').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidArgument);
    } finally {
      delete proto['canonicalArguments'];
    }
    expect(events).toEqual([]);
    expect(await store.getApproval('apr_x')).toBeNull();
    expect(await store.listEffects()).toEqual([]);
    // An exact copy that carries its arguments (as an action of another copy of the kernel does) is an action.
    const exact = { ...action, canonicalArguments: action.canonicalArguments };
    expect(await control.execute(exact, (args) => args['payment_id'])).toBe('p1');
    expect(actionFromJson(actionToJson(exact)).actionHash).toBe(action.actionHash);
  });

  // Why it is a class: V8 keeps a frozen object with an accessor of its own in dictionary mode,
  // and an action's fields are read dozens of times per action. Checked in a child process, where
  // V8's own predicate can be called.
  it("keeps its fields in V8's fast mode (a frozen object with a getter of its own would not)", () => {
    const script = `
      const { createAction } = await import('@ctrlrun/kernel');
      const fast = new Function('o', 'return %HasFastProperties(o)');
      const a = createAction({ name: 'x', arguments: { a: 1 }, principal: { agent: 'z' } });
      const own = Object.freeze({ x: 1, get y() { return 2; } });
      console.log(JSON.stringify([fast(a), fast(a.principal), fast(own)]));
    `;
    const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--conditions=@ctrlrun/source', '--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.stderr).toBe('');
    // The control: V8 still makes the frozen own-getter object slow, so the first two mean something.
    expect(JSON.parse(r.stdout.trim())).toEqual([true, true, false]);
  });
});
