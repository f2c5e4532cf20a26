// The object createAction returns: frozen data fields, canonicalArguments a getter it inherits
// (a fresh copy on each read), and a copy of it that is not an action refused by name.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { actionFromJson, actionToJson, createAction, InvalidArgument } from '@ctrlrun/kernel';
import { describe, expect, it } from 'vitest';
import { setup } from './harness.js';

const input = { name: 'stripe.refund', arguments: { payment_id: 'p1', amount: 500 }, principal: { agent: 'refund-agent' } };

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
      let ran = false;
      const err = await control
        .execute(copy, () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidArgument);
      expect((err as Error).message).toMatch(/createAction.*no canonicalArguments.*spread or JSON copy/);
      expect(ran).toBe(false);
    }
    expect(events).toEqual([]);
    expect(await store.listEffects()).toEqual([]);
    // The action itself runs.
    await control.execute(action, () => 'ok');
    expect((await store.listEffects()).map((e) => e.state)).toEqual(['committed']);
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
