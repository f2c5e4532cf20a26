/**
 * A real PostgreSQL server for tests, CI and the bench.
 *
 * - `PG_URL` set: that server is used (its role needs CREATEDB; each test file gets its own
 *   database, dropped at the end).
 * - Else, where PostgreSQL's server binaries are installed (`/usr/lib/postgresql/<n>/bin`, or
 *   `PG_BIN`), a throwaway cluster: `initdb` into a temp dir, a free port on 127.0.0.1, stopped and
 *   removed at the end. As root (CI), the cluster runs as the unprivileged `postgres` user
 *   (created if missing), because initdb and the server refuse to run as root.
 * - Neither: the PostgreSQL tests skip with one line saying why — except under `CI=true`, where a
 *   missing server fails them.
 *
 * Vitest runs this file as a `globalSetup`: one cluster for the whole run, its address handed to
 * the test files through `inject('ctrlrunPg')`. Test files use {@link pgServer} and
 * {@link freshDatabase}; the bench calls {@link startCluster} itself.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, inject, it } from 'vitest';

/** What the global setup hands the test files. */
export type PgTarget = { readonly url: string; readonly source: string } | { readonly skip: string; readonly required: boolean };

declare module 'vitest' {
  export interface ProvidedContext {
    ctrlrunPg: PgTarget;
  }
}

/** A running throwaway cluster. */
export interface PgCluster {
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (trust auth, superuser). */
  readonly url: string;
  readonly port: number;
  readonly version: string;
  /** Stops the server (fast shutdown) and removes its directory. */
  stop(): Promise<void>;
}

/** The newest installed PostgreSQL server binaries directory, or null. */
export function findServerBinaries(): string | null {
  const given = process.env['PG_BIN'];
  if (given) return existsSync(join(given, 'initdb')) ? given : null;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? null : join(root, versions[0], 'bin');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const shellQuote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Runs a server binary: directly, or as `postgres` through `su` when we are root. It runs from
 * `/`, because initdb and pg_ctl refuse a working directory their user cannot read (root's home).
 */
function runAsServerUser(command: string[], asRoot: boolean): string {
  const options = { encoding: 'utf8' as const, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'], cwd: '/' };
  if (!asRoot) return execFileSync(command[0]!, command.slice(1), options);
  return execFileSync('su', ['postgres', '-s', '/bin/sh', '-c', command.map(shellQuote).join(' ')], options);
}

/** As root: the unprivileged `postgres` user the cluster runs as (created when the machine lacks it). */
function serverUser(): { uid: number; gid: number } {
  const lookup = (): { uid: number; gid: number } | null => {
    try {
      const [uid, gid] = execFileSync('sh', ['-c', 'id -u postgres && id -g postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
        .trim()
        .split('\n')
        .map(Number);
      return uid !== undefined && gid !== undefined ? { uid, gid } : null;
    } catch {
      return null;
    }
  };
  const found = lookup();
  if (found) return found;
  execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/bin/sh', 'postgres'], { stdio: 'ignore' });
  const made = lookup();
  if (!made) throw new Error('could not create the postgres user to run the throwaway cluster as');
  return made;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Stops and removes clusters whose owning process died without its teardown (a killed test run). */
function reapOrphans(bin: string, asRoot: boolean): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith('ctrlrun-pg-')) continue;
    const dir = join(tmpdir(), name);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'));
    } catch {
      continue;
    }
    if (!Number.isSafeInteger(owner) || owner <= 0 || alive(owner)) continue;
    try {
      if (existsSync(join(dir, 'data', 'postmaster.pid')))
        runAsServerUser([join(bin, 'pg_ctl'), '-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop'], asRoot);
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Starts a throwaway cluster from the binaries in `bin`: UTF8, locale C, trust auth, listening on
 * a free port on 127.0.0.1 and on a socket in its own directory. `durable: false` (tests) turns
 * `fsync` off; the bench keeps the defaults.
 */
export async function startCluster(options: { bin?: string; durable?: boolean } = {}): Promise<PgCluster> {
  const bin = options.bin ?? findServerBinaries();
  if (bin === null) throw new Error('no PostgreSQL server binaries (initdb) found; set PG_BIN or PG_URL');
  const asRoot = process.getuid?.() === 0;
  reapOrphans(bin, asRoot);
  const dir = mkdtempSync(join(tmpdir(), 'ctrlrun-pg-'));
  writeFileSync(join(dir, 'owner.pid'), String(process.pid));
  if (asRoot) {
    const { uid, gid } = serverUser();
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const settings = ['-c listen_addresses=127.0.0.1', `-k ${dir}`, '-c max_connections=200'];
  if (options.durable === false) settings.push('-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off');
  try {
    runAsServerUser([join(bin, 'initdb'), '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '-D', data], asRoot);
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        runAsServerUser(
          [join(bin, 'pg_ctl'), '-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', `-p ${port} ${settings.join(' ')}`, 'start'],
          asRoot,
        );
        break;
      } catch (err) {
        if (attempt >= 3) throw err; // the free port was taken between the probe and the start
      }
    }
    const version = execFileSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).trim();
    let stopped = false;
    return {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      port,
      version,
      async stop() {
        if (stopped) return;
        stopped = true;
        try {
          runAsServerUser([join(bin, 'pg_ctl'), '-D', data, '-m', 'fast', '-w', 'stop'], asRoot);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (err) {
    const log = existsSync(join(dir, 'server.log')) ? execFileSync('tail', ['-n', '20', join(dir, 'server.log')], { encoding: 'utf8' }) : '';
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`starting the throwaway PostgreSQL cluster failed: ${(err as Error).message}\n${stderr}\n${log}`);
  }
}

/** The server to test against, decided once per run (see the module comment). */
export async function chooseTarget(): Promise<{ target: PgTarget; cluster: PgCluster | null }> {
  const required = process.env['CI'] === 'true';
  const given = process.env['PG_URL'];
  if (given) return { target: { url: given, source: 'PG_URL' }, cluster: null };
  const bin = findServerBinaries();
  if (bin === null) {
    return {
      target: { skip: 'no PostgreSQL server here: neither PG_URL nor server binaries (/usr/lib/postgresql/<n>/bin/initdb, or PG_BIN)', required },
      cluster: null,
    };
  }
  const cluster = await startCluster({ bin, durable: false });
  return { target: { url: cluster.url, source: `a throwaway ${cluster.version} cluster on port ${cluster.port}` }, cluster };
}

// ------------------------------------------------------------------ vitest globalSetup

let running: PgCluster | null = null;

/** Vitest global setup: one server for the whole run. */
export async function setup(project: { provide(key: 'ctrlrunPg', value: PgTarget): void }): Promise<void> {
  const { target, cluster } = await chooseTarget();
  running = cluster;
  project.provide('ctrlrunPg', target);
}

/** Vitest global teardown: the cluster stops and its directory goes. */
export async function teardown(): Promise<void> {
  await running?.stop();
  running = null;
}

// ------------------------------------------------------------------ test-file helpers

/** A database of its own for one test file (or the bench). */
export interface FreshDatabase {
  /** The database's URL. */
  readonly url: string;
  readonly name: string;
  /** A URL whose sessions see `schema` as their `search_path` (for worker processes). */
  urlFor(schema: string): string;
  /** Creates a schema (the store never creates its own). */
  createSchema(schema: string): Promise<void>;
  /** Runs one statement as the superuser in this database. */
  sql<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<Row[]>;
  /** Drops the database (terminating any session still on it). */
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

/** Creates a fresh database `ctrlrun_<label>_<hex>` on the server at `adminUrl`. */
export async function freshDatabase(adminUrl: string, label = 'test', options: { encoding?: string } = {}): Promise<FreshDatabase> {
  const name = `ctrlrun_${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const encoding = options.encoding ?? 'UTF8';
    await admin.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING '${encoding}' LC_COLLATE 'C' LC_CTYPE 'C'`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => undefined);
  return {
    url,
    name,
    urlFor: (schema) => {
      const u = new URL(url);
      u.searchParams.set('options', `-c search_path=${schema}`);
      return u.toString();
    },
    async createSchema(schema) {
      await pool.query(`CREATE SCHEMA "${schema.replaceAll('"', '""')}"`);
    },
    async sql<Row>(text: string, values: unknown[] = []) {
      return (await pool.query(text, values)).rows as Row[];
    },
    async drop() {
      await pool.end();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * Registers `body` against the run's PostgreSQL server. Without one it skips with the reason —
 * or, under `CI=true`, registers one failing test saying what is missing.
 */
export function describePg(title: string, body: (server: { readonly url: string; readonly source: string }) => void): void {
  const target: PgTarget = inject('ctrlrunPg') ?? {
    skip: 'the vitest global setup (test/support/pg-cluster.ts) did not run',
    required: process.env['CI'] === 'true',
  };
  if ('skip' in target) {
    if (target.required) {
      describe(title, () => {
        it(`needs a PostgreSQL server under CI=true: ${target.skip}`, () => {
          throw new Error(`PostgreSQL is required under CI=true: ${target.skip}`);
        });
      });
    } else {
      // Printed, not only in the suite's name (which the default reporter does not show for a skip).
      console.warn(`[skipped] ${title}: ${target.skip}`);
      describe.skip(`${title} — skipped: ${target.skip}`, () => {
        it('needs PostgreSQL', () => undefined);
      });
    }
    return;
  }
  describe(`${title} [${target.source}]`, () => body(target));
}
