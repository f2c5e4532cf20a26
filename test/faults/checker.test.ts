/**
 * The history checker can fail: on the real sql.js store every command sequence fast-check tries
 * leaves a consistent history, and on each broken store (the conformance suite's kind of fixture)
 * the checker finds the anomaly it should, and fast-check shrinks the failing sequence to a
 * minimal trace saved under test-artifacts/faults/.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { describe, expect, it } from 'vitest';
import { scaled } from '../support/load.js';
import { BROKEN, brokenStore } from './broken.js';
import { checkHistory, snapshot, type AnomalyKind } from './checker.js';
import type { HistoryEntry, UpstreamRow } from './history.js';
import { shrinkToArtifact } from './model.js';
import { faultControl, runOp } from './workload.js';

const ARTIFACTS = join(import.meta.dirname, '..', '..', 'test-artifacts', 'faults');
const SEED = Number(process.env['FAULTS_SEED'] ?? 20261205);

/** What each broken store must be caught as, and the most commands its shrunk trace may keep. */
const EXPECTED: Record<string, { kind: AnomalyKind; maxCommands: number }> = {
  'reserves-a-taken-key': { kind: 'ran-twice', maxCommands: 2 },
  'grants-twice': { kind: 'approval-used-twice', maxCommands: 5 },
  'guesses-failed': { kind: 'ran-twice', maxCommands: 3 },
};

describe('the history checker', () => {
  it(
    'passes every command sequence on the real sql.js store',
    async () => {
      const trace = await shrinkToArtifact('sql.js', () => createSqlJsStore(), join(ARTIFACTS, 'unexpected-sql.js.json'), { seed: SEED, numRuns: 60 });
      expect(trace, trace ? JSON.stringify(trace, null, 2) : '').toBeNull();
    },
    scaled(120_000),
  );

  it(
    "passes on the broken stores' wrapper with nothing broken (the fixtures, not the wrapping, fail)",
    async () => {
      const trace = await shrinkToArtifact(
        'unbroken-wrapper',
        brokenStore(() => ({})),
        join(ARTIFACTS, 'unexpected-wrapper.json'),
        { seed: SEED, numRuns: 30 },
      );
      expect(trace, trace ? JSON.stringify(trace, null, 2) : '').toBeNull();
    },
    scaled(120_000),
  );

  for (const [name, { breaks }] of Object.entries(BROKEN)) {
    it(
      `fails on the broken store ${name} (breaks ${breaks}) with a shrunk trace saved as an artifact`,
      async () => {
        const file = join(ARTIFACTS, `shrunk-${name}.json`);
        const trace = await shrinkToArtifact(name, brokenStore(BROKEN[name]!.overrides), file, { seed: SEED, numRuns: 200 });
        expect(trace, `${name} must make the checker fail`).not.toBeNull();
        const expected = EXPECTED[name]!;
        expect(trace!.anomalies.map((a) => a.kind)).toContain(expected.kind);
        expect(trace!.commands.length).toBeGreaterThan(0);
        expect(trace!.commands.length).toBeLessThanOrEqual(expected.maxCommands);
        expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(JSON.parse(JSON.stringify(trace)));
      },
      scaled(120_000),
    );
  }

  it('a hand-written history: each check names what it found', async () => {
    const store = await createSqlJsStore();
    const history: HistoryEntry[] = [];
    const upstream: UpstreamRow[] = [];
    const ctx = {
      control: faultControl(store),
      upstream: { run: (r: UpstreamRow) => void upstream.push(r) },
      record: (e: HistoryEntry) => void history.push(e),
    };
    await runOp(ctx, { op: 'w/0', worker: 'w', kind: 'allow', ref: 'x', approvalId: null, behaviour: 'ok' });
    await runOp(ctx, { op: 'w/1', worker: 'w', kind: 'allow', ref: 'x', approvalId: null, behaviour: 'ok' });
    await runOp(ctx, { op: 'w/2', worker: 'w', kind: 'allow', ref: 'y', approvalId: null, behaviour: 'not-sent' });
    await runOp(ctx, { op: 'w/3', worker: 'w', kind: 'allow', ref: 'z', approvalId: null, behaviour: 'lost-reply' });
    await runOp(ctx, { op: 'w/4', worker: 'w', kind: 'deny', ref: 'd', approvalId: null, behaviour: 'ok' });
    const snap = await snapshot(store);
    expect(checkHistory(history, upstream, snap)).toEqual([]);
    const kinds = (h: HistoryEntry[], u: UpstreamRow[], s = snap) => checkHistory(h, u, s).map((a) => a.kind);
    // The upstream ran x a second time (a double the store never saw).
    expect(kinds(history, [...upstream, { ...upstream[0]!, op: 'ghost' }])).toContain('ran-twice');
    // The upstream ran y, which its client saw fail.
    const failedAction = history.find((e) => e.t === 'invoke' && e.op === 'w/2') as { actionId: string };
    expect(kinds(history, [...upstream, { effectKey: 'pay:y', actionId: failedAction.actionId, op: 'w/2' }])).toContain('failed-but-ran');
    // The denied action ran upstream.
    const denied = history.find((e) => e.t === 'invoke' && e.op === 'w/4') as { actionId: string };
    expect(kinds(history, [...upstream, { effectKey: 'pay:d', actionId: denied.actionId, op: 'w/4' }])).toContain('ran-without-approval');
    // A receipt removed; a receipt altered (the chain breaks).
    expect(kinds(history, upstream, { ...snap, receipts: snap.receipts.slice(1) })).toContain('receipt-lost');
    const [first, ...rest] = snap.receipts;
    expect(kinds(history, upstream, { ...snap, receipts: [{ ...first!, json: first!.json!.replace('"pay.small"', '"pay.smalL"') }, ...rest] })).toContain(
      'chain-broken',
    );
    // The duplicate's refusal event missing.
    expect(kinds(history, upstream, { ...snap, events: snap.events.filter((e) => e.type !== 'EFFECT_RESERVATION_REFUSED') })).toContain('refusal-record');
    // An ambiguous outcome with its start removed.
    expect(kinds(history, upstream, { ...snap, events: snap.events.filter((e) => !(e.type === 'EXECUTION_STARTED' && e.effectKey === 'pay:z')) })).toContain(
      'ambiguous-without-start',
    );
    await store.close();
  });
});
