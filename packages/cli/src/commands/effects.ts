/**
 * `ctrlrun effects [--state STATE] [--all]`: the newest page of effect records, oldest first
 * (`--all` streams every one, page by page). A reserved or executing record whose lease lapsed is
 * shown `(lease expired)`; the display transitions nothing.
 *
 * @module
 */
import type { EffectRecord, EffectState, StateStore } from '@ctrlrun/kernel';
import { STORE_URL, type Command } from '../command.js';
import { storeTarget } from '../discovery.js';
import { UsageError } from '../errors.js';
import { stamp } from '../format.js';
import { openListing } from '../stores.js';

const STATES = ['new', 'reserved', 'executing', 'committed', 'failed', 'ambiguous'] as const;
/** Rows per read while streaming. */
const PAGE = 1000;
/** Records the default view shows: the newest page. */
export const NEWEST_EFFECTS = 50;

/** Every record (optionally only `state`), page by page; a store without paged reads in one page. */
async function* effectPages(store: StateStore, state: EffectState | undefined): AsyncGenerator<EffectRecord[]> {
  if (!store.effectsPage) {
    yield await store.listEffects(state);
    return;
  }
  for (let after: { createdAt: string | null; effectKey: string } | null = null; ;) {
    const page: EffectRecord[] = await store.effectsPage({ state, after, limit: PAGE });
    if (page.length > 0) yield page;
    if (page.length < PAGE) break;
    const end: EffectRecord = page[page.length - 1]!;
    after = { createdAt: end.createdAt, effectKey: end.effectKey };
  }
}

export const effects: Command = {
  name: 'effects',
  summary: 'list effect records (reserved, executing, committed, failed, ambiguous)',
  positionals: [],
  options: {
    state: { type: 'string', value: 'STATE', help: `only records in STATE: ${STATES.join('|')}` },
    all: { type: 'boolean', help: `every record, streamed oldest first (default: the newest ${NEWEST_EFFECTS})` },
    'store-url': STORE_URL,
  },
  async run({ io, values, out, err }) {
    const state = values['state'] as string | undefined;
    if (state !== undefined && !(STATES as readonly string[]).includes(state))
      throw new UsageError(`--state must be one of ${STATES.join('|')}, got ${JSON.stringify(state)}`);
    const store = await openListing(storeTarget(io, values['store-url'] as string | undefined), err);
    try {
      // `new` is never stored: it means "no record".
      const wanted = state === 'new' ? null : (state as EffectState | undefined);
      const now = Date.now();
      let count = 0;
      const show = (r: EffectRecord): void => {
        count += 1;
        let line = `${r.effectKey}  ${r.state}  attempt ${r.attempt}  ${r.actionId}  ${stamp(r.updatedAt)}`;
        const live = r.state === 'reserved' || r.state === 'executing';
        if (live && r.leaseExpiresAt !== null && Date.parse(r.leaseExpiresAt) < now) line += '  (lease expired)';
        if (r.resolvedBy !== null) line += `  resolved by ${r.resolvedBy}`;
        out(line);
      };
      let more = false;
      if (wanted !== null && values['all'] === true) {
        for await (const page of effectPages(store, wanted)) {
          page.forEach(show);
          await io.drained?.();
        }
      } else if (wanted !== null) {
        let newest: EffectRecord[];
        if (store.effectsPage) newest = await store.effectsPage({ state: wanted, newest: true, limit: NEWEST_EFFECTS + 1 });
        else newest = await store.listEffects(wanted);
        more = newest.length > NEWEST_EFFECTS;
        newest.slice(-NEWEST_EFFECTS).forEach(show);
      }
      if (count === 0) {
        out(state === undefined ? 'no effects yet' : `no effects are ${state}`);
        return 0;
      }
      if (more) err(`(the newest ${NEWEST_EFFECTS} records; --all lists every one)`);
      return 0;
    } finally {
      await store.close();
    }
  },
};
