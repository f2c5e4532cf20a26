/**
 * The Cloudflare entry (`worker/src/runtime/cloudflare.ts`) with one addition for the test: before the
 * store ever opens, `POST /__probe/setup` uses the object's own storage the way other code in the
 * same object might — the KV API (`ctx.storage.put`, which creates the hidden `_cf_KV` table), an
 * alarm (`_cf_METADATA`) and, when asked (`?foreign=TABLE`), a table of someone else's schema.
 * `GET /__probe/state` lists every table of the object's SQLite database and reads the KV value
 * back. Every other request goes to the entry as it ships.
 */
import entry, { CtrlrunStore } from '../../../worker/src/runtime/cloudflare.js';
import type { DurableObjectSqlStorage } from '@ctrlrun/store-do';
import type { WorkerEnv } from '../../../worker/src/config.js';

interface ProbeStorage extends DurableObjectSqlStorage {
  put(key: string, value: unknown): Promise<void>;
  get(key: string): Promise<unknown>;
  setAlarm(at: number): Promise<void>;
}

const TABLE = /^[a-z][a-z0-9_]{0,30}$/;

export class ProbedCtrlrunStore extends CtrlrunStore {
  readonly #storage: ProbeStorage;

  constructor(ctx: { storage: ProbeStorage }, env: WorkerEnv) {
    super(ctx, env);
    this.#storage = ctx.storage;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/__probe/setup' && request.method === 'POST') {
      await this.#storage.put('greeting', 'kept beside the store');
      await this.#storage.setAlarm(Date.now() + 24 * 3600_000);
      const foreign = url.searchParams.get('foreign');
      if (foreign !== null) {
        if (!TABLE.test(foreign)) return new Response('foreign: a lower-case table name', { status: 400 });
        this.#storage.sql.exec(`CREATE TABLE ${foreign} (id INTEGER PRIMARY KEY, total INTEGER)`);
      }
      return Response.json({ ok: true });
    }
    if (url.pathname === '/__probe/state') {
      const tables = this.#storage.sql
        .exec("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .toArray()
        .map((r) => String(r['name']));
      return Response.json({ tables, greeting: await this.#storage.get('greeting') });
    }
    return super.fetch(request);
  }

  /** The alarm set above is a day away; were it to fire, there is nothing to do. */
  async alarm(): Promise<void> {}
}

export default entry;
