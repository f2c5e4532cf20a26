/**
 * A test-only TCP proxy between `pg` and a PostgreSQL server that loses COMMITs on cue — the
 * spec's way to lose a COMMIT without a hook in shipping code (spec 03 §9).
 *
 * It reads the frontend stream message by message (startup, then `type + int32 length + body`),
 * remembers the statements of each transaction (Simple Query `Q` and Extended Query `P`arse), and
 * when armed, acts on the first `COMMIT` of a transaction whose statements match — or, for a
 * statement that commits on its own (extended query outside any transaction), on the `Sync` that
 * commits it:
 *
 * - `drop` ("never received", T155d/T155e): the COMMIT (or Sync) is not forwarded; the server side
 *   is closed (the backend rolls back), then the client is cut.
 * - `land` ("landed", T155/T155b): the COMMIT is forwarded; when the server answers, the answer is
 *   withheld and the client is cut before it sees `CommandComplete`.
 * - `late` (landed after the re-read): the client is cut at once and the COMMIT held, its
 *   transaction open on the server, until the plan says to forward it.
 *
 * An `interlude` runs after the server side is settled and before the client is cut (another
 * writer's turn, deterministically). `refuseConnections(n)` refuses the next n connections (T156).
 *
 * `hold(when)` holds the first statement matching `when` (and everything the client sends after
 * it on that connection) unforwarded until released: another writer acts in the window between
 * what the held connection read and what it writes (T313).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** What to do with the next matching COMMIT. */
export interface CommitPlan {
  /**
   * `late`: the client is cut at once, the COMMIT held; it reaches the server only when `landAfter`
   * resolves (its transaction open meanwhile, its locks held): a COMMIT that was on its way when
   * the client's re-read looked, and landed after it.
   */
  mode: 'drop' | 'land' | 'late';
  /** `late` only: when the held COMMIT is forwarded (its answer then swallowed, the server side closed). */
  landAfter?: Promise<void>;
  /** Only a transaction with a statement matching this (default: any transaction). */
  when?: RegExp;
  /** Runs after the server side is settled, before the client is cut. */
  interlude?: () => Promise<void>;
  /** Refuse this many new connections once the client is cut (the re-read's, T156). */
  refuseAfter?: number;
}

/** The proxy's handle. */
export interface CommitProxy {
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  route(url: string): string;
  /** Arms the next matching COMMIT; resolves with the transaction's statements once it fired. */
  arm(plan: CommitPlan): Promise<string[]>;
  /**
   * Holds the next statement matching `when`: resolves once one reached the proxy (it and all that
   * follows on its connection wait there); `release()` forwards them.
   */
  hold(when: RegExp): Promise<{ statement: string; release: () => void }>;
  /** Refuses the next `n` connections (accepted, then closed at once). */
  refuseConnections(n: number): void;
  /** Cuts every open connection, both sides, mid-whatever (a network partition's blunt end); returns how many client connections it cut. */
  cutAll(): number;
  /** Connections accepted so far (refused ones included). */
  readonly accepted: number;
  /** COMMITs lost so far. */
  readonly fired: number;
  close(): Promise<void>;
}

const COMMIT = /^\s*COMMIT\s*;?\s*$/i;
const BEGIN = /^\s*(BEGIN|START TRANSACTION)\b/i;

function cString(buf: Buffer, start: number): [string, number] {
  const end = buf.indexOf(0, start);
  if (end < 0) return [buf.toString('utf8', start), buf.length];
  return [buf.toString('utf8', start, end), end + 1];
}

/** Starts a proxy to `target` (host:port) on a free port of 127.0.0.1. */
export async function startCommitProxy(target: { host: string; port: number }): Promise<CommitProxy> {
  let refuse = 0;
  let accepted = 0;
  let fired = 0;
  let armed: { plan: CommitPlan; resolve: (statements: string[]) => void } | null = null;
  let holding: { when: RegExp; resolve: (held: { statement: string; release: () => void }) => void } | null = null;
  const sockets = new Set<Socket>();
  /** The client side of each open connection (a subset of `sockets`). */
  const clients = new Set<Socket>();

  const server: Server = createServer((client) => {
    accepted++;
    sockets.add(client);
    clients.add(client);
    client.on('close', () => {
      sockets.delete(client);
      clients.delete(client);
    });
    client.on('error', () => undefined);
    if (refuse > 0) {
      refuse--;
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    let pending = Buffer.alloc(0);
    let started = false;
    let statements: string[] = [];
    /** Inside BEGIN … COMMIT: a Sync there commits nothing. */
    let inTransaction = false;
    /** Prepared statements by name (a named statement's text is sent once, then Bound by name). */
    const named = new Map<string, string>();
    let withhold: (() => void) | null = null;
    /** A statement held here: nothing more is forwarded until it is released. */
    let held = false;
    /** Set once a plan has taken this connection over: from then on the plan alone cuts the client. */
    let dead = false;
    /** `late`: the server side outlives the client's, until the held COMMIT has gone through. */
    let outlive = false;
    client.on('close', () => {
      if (!outlive) upstream.destroy();
    });
    upstream.on('error', () => undefined);
    upstream.on('close', () => {
      if (!dead) client.destroy();
    });

    /**
     * ReadyForQuery messages from the server (one after the startup, then one per Sync or simple
     * Query), and the count at which the withheld answer is complete: with statements pipelined,
     * the first answer after a lost COMMIT may be an earlier statement's, not the COMMIT's.
     */
    let ready = 0;
    let readyAt = Infinity;
    /** Sync and simple Query messages forwarded so far. */
    let syncs = 0;
    let fromServer: Buffer = Buffer.alloc(0);
    const countReady = (chunk: Buffer): void => {
      fromServer = fromServer.length === 0 ? chunk : Buffer.concat([fromServer, chunk]);
      let at = 0;
      while (fromServer.length - at >= 5) {
        const len = fromServer.readInt32BE(at + 1);
        if (fromServer.length - at < 1 + len) break;
        if (fromServer[at] === 0x5a) ready++; // 'Z'
        at += 1 + len;
      }
      fromServer = fromServer.subarray(at);
    };
    upstream.on('data', (chunk) => {
      countReady(chunk);
      if (withhold) {
        if (ready < readyAt) return;
        const act = withhold;
        withhold = null;
        act();
        return;
      }
      if (!dead) client.write(chunk);
    });

    const cut = async (plan: CommitPlan, fire: () => void): Promise<void> => {
      dead = true;
      await plan.interlude?.();
      refuse += plan.refuseAfter ?? 0;
      fire();
      client.destroy();
    };

    /** Whether the armed plan applies to the statements seen since the transaction (or Sync) began. */
    const matches = (): boolean => armed !== null && (!armed.plan.when || statements.some((s) => armed!.plan.when!.test(s)));
    /**
     * The armed plan takes the message at `offset` (a COMMIT, or the Sync that commits a statement
     * alone): everything before it goes through; it is dropped, or sent with its answer withheld.
     */
    const lose = (offset: number, len: number): void => {
      const { plan, resolve } = armed!;
      armed = null;
      fired++;
      const seen = statements;
      // The lost message's own ReadyForQuery: the startup's, one per Sync or Query before it, its own.
      readyAt = 1 + syncs + 1;
      if (offset > 0) upstream.write(pending.subarray(0, offset));
      const fire = () => resolve(seen);
      dead = true;
      if (plan.mode === 'drop') {
        upstream.destroy();
        void cut(plan, fire);
      } else if (plan.mode === 'late') {
        outlive = true;
        const commit = Buffer.from(pending.subarray(offset, offset + 1 + len));
        withhold = () => upstream.destroy();
        void cut(plan, fire)
          .then(() => plan.landAfter)
          .then(() => upstream.write(commit));
      } else {
        withhold = () => {
          upstream.destroy();
          void cut(plan, fire);
        };
        upstream.write(pending.subarray(offset, offset + 1 + len));
      }
      pending = Buffer.alloc(0);
    };

    const onData = (chunk: Buffer): void => {
      if (dead) return;
      pending = Buffer.concat([pending, chunk]);
      if (held) return;
      const forward = 0;
      let offset = 0;
      for (;;) {
        if (!started) {
          if (pending.length - offset < 4) break;
          const len = pending.readInt32BE(offset);
          if (pending.length - offset < len) break;
          offset += len;
          started = true;
          continue;
        }
        if (pending.length - offset < 5) break;
        const type = String.fromCharCode(pending[offset]!);
        const len = pending.readInt32BE(offset + 1);
        if (pending.length - offset < 1 + len) break;
        const body = pending.subarray(offset + 5, offset + 1 + len);
        let text: string | null = null;
        if (type === 'Q') text = cString(body, 0)[0];
        if (type === 'P') {
          const [name, at] = cString(body, 0);
          text = cString(body, at)[0];
          if (name !== '') named.set(name, text);
        }
        if (type === 'B') {
          // A named statement bound without its Parse in this message run: its text, remembered.
          const [, at] = cString(body, 0);
          const name = cString(body, at)[0];
          const known = named.get(name);
          if (name !== '' && known !== undefined && statements.at(-1) !== known) statements.push(known);
        }
        if (type === 'S' && !inTransaction && statements.length > 0) {
          // A Sync outside BEGIN … COMMIT commits what came before it on its own.
          if (matches()) return lose(offset, len);
          statements = [];
        }
        if (text !== null && holding !== null && holding.when.test(text)) {
          const { resolve } = holding;
          holding = null;
          held = true;
          if (offset > forward) upstream.write(pending.subarray(forward, offset));
          pending = pending.subarray(offset);
          resolve({
            statement: text,
            release: () => {
              held = false;
              onData(Buffer.alloc(0));
            },
          });
          return;
        }
        if (text !== null) {
          const parts = text
            .split(';')
            .map((p) => p.trim())
            .filter(Boolean);
          if (parts.some((p) => BEGIN.test(p))) {
            statements = [];
            inTransaction = true;
          }
          if (COMMIT.test(text) && matches()) return lose(offset, len);
          if (COMMIT.test(text) || /^\s*ROLLBACK\b/i.test(text)) {
            statements = [];
            inTransaction = false;
          } else statements.push(text);
        }
        if (type === 'S' || type === 'Q') syncs++;
        offset += 1 + len;
      }
      if (offset > forward) upstream.write(pending.subarray(forward, offset));
      pending = pending.subarray(offset);
    };
    client.on('data', onData);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    port,
    route(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    arm(plan) {
      if (armed) throw new Error('the proxy is already armed');
      return new Promise((resolve) => {
        armed = { plan, resolve };
      });
    },
    hold(when) {
      if (holding) throw new Error('the proxy already holds for a statement');
      return new Promise((resolve) => {
        holding = { when, resolve };
      });
    },
    refuseConnections(n) {
      refuse += n;
    },
    cutAll() {
      const n = clients.size;
      for (const s of sockets) s.destroy();
      return n;
    },
    get accepted() {
      return accepted;
    },
    get fired() {
      return fired;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
