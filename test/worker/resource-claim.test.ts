/**
 * Issue 28: a document the original 0.12.2 loads — a grant scoped by `resources:` on an action
 * whose entry has no `resource:` template — loads here too (the original's example policy has
 * that shape), and the risk it carried is refused where it is: at the edge, an agent's own
 * resource claim for such an action is a 400 with nothing written.
 */
import { describe, expect, it } from 'vitest';
import { AGENT, harness } from './harness.js';

const POLICY = `schema: ctrlrun.policy/v3
authority:
  grants:
    - id: billing
      subject: { agent: "billing-agent" }
      actions: ["free.form", "db.drop"]
      resources: ["table:*"]
actions:
  free.form:
    decision: allow
  db.drop:
    resource: "table:{table}"
    decision: allow
`;

describe("a resource scope on an action the policy derives no resource for: loaded, and the agent's claim refused at the edge", () => {
  it('the worker serves the document; a derived resource passes the grant', async () => {
    const h = await harness({}, POLICY);
    const derived = await h.call('POST', '/v1/actions', AGENT, { name: 'db.drop', arguments: { table: 'orders' } });
    expect(derived.status, derived.text).toBe(200);
    expect(derived.json).toMatchObject({ status: 'committed', result: { dropped: 'orders', resource: 'table:orders' } });
  });

  it("an agent's claimed resource for the underived action is 400 at $.resource, nothing written; without one the grant does not match", async () => {
    const h = await harness({}, POLICY);
    const before = await h.counts();
    const claimed = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {}, resource: 'table:orders' });
    expect(claimed.status).toBe(400);
    expect(claimed.json['error']).toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
      path: '$.resource',
      message: expect.stringContaining('free.form has no resource: template'),
    });
    expect(await h.counts()).toEqual(before);
    const bare = await h.call('POST', '/v1/actions', AGENT, { name: 'free.form', arguments: {} });
    expect(bare.status).toBe(403);
    expect(bare.json['error']).toMatchObject({ reason: 'no_authority' });
  });
});
