/**
 * What `ctrlrun verify` injects into the kernel's verify engine on Node: scratch SQLite files in a
 * temporary directory (one per scenario, removed after it), and a G4 launcher that races real
 * OS processes (`child_process`) on one scratch store, counting executor runs by exclusive file
 * creation outside the store.
 *
 * @module
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { orderedJson } from '@ctrlrun/kernel';
import type { ProcessLauncher, ProcessOutcome, ScratchStoreFactory } from '@ctrlrun/kernel/verify';
import { openAddress, peelSchema, SCHEMA_PARAM } from './stores.js';

/** Scratch SQLite stores under `root`; each is removed (with its WAL files) when disposed. */
export function sqliteScratch(root: string): ScratchStoreFactory {
  return async ({ guarantee, purpose, clock }) => {
    const path = join(root, `${guarantee}-${purpose}.db`);
    const store = await openAddress(`sqlite:${path}`, { clock });
    return {
      store,
      locator: `sqlite:${path}`,
      dispose: async () => {
        try {
          await store.close();
        } finally {
          for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${path}${suffix}`, { force: true });
        }
      },
    };
  };
}

/**
 * Scratch schemas `ctrlrun_verify_<16 hex>` in the PostgreSQL database at `url`, one per scenario,
 * each dropped when disposed; `close` ends the administrative connection.
 */
export async function postgresScratch(url: string): Promise<{ factory: ScratchStoreFactory; close: () => Promise<void> }> {
  const { url: base } = peelSchema(url);
  const pg = ((await import('pg')) as unknown as { default: typeof import('pg') }).default;
  const admin = new pg.Pool({ connectionString: base, max: 2 });
  admin.on('error', () => undefined);
  await admin.query('SELECT 1');
  const factory: ScratchStoreFactory = async ({ clock }) => {
    const schema = `ctrlrun_verify_${randomBytes(8).toString('hex')}`;
    await admin.query(`CREATE SCHEMA ${schema}`);
    const locator = `${base}${base.includes('?') ? '&' : '?'}${SCHEMA_PARAM}=${schema}`;
    const drop = () => admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    let store: Awaited<ReturnType<typeof openAddress>>;
    try {
      store = await openAddress(locator, { clock });
    } catch (err) {
      await drop().catch(() => undefined);
      throw err;
    }
    return {
      store,
      locator,
      dispose: async () => {
        try {
          await store.close();
        } finally {
          await drop();
        }
      },
    };
  };
  return { factory, close: () => admin.end() };
}

/**
 * Packages left out of a bundle and loaded from where they are installed: the native and WASM
 * drivers, which find their binaries relative to their own files, and the TypeScript compiler
 * (`scan`; it reads `__filename`, which an ES-module bundle lacks).
 */
const INSTALLED = /^(better-sqlite3|pg|@electric-sql\/pglite|sql\.js|typescript)$/;

/**
 * Bundles a TypeScript entry of this source checkout (with the workspace's source condition) into
 * one ES module that plain `node` runs: the native drivers stay external, resolved to where they
 * are installed. Needs esbuild, which a source checkout has.
 */
export async function bundleSource(entry: string, outfile: string): Promise<void> {
  const require = createRequire(import.meta.url);
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@ctrlrun/source'],
    logLevel: 'silent',
    banner: { js: "import { createRequire as __ctrlrunRequire } from 'node:module'; const require = __ctrlrunRequire(import.meta.url);" },
    plugins: [
      {
        name: 'installed-drivers',
        setup(build) {
          build.onResolve({ filter: INSTALLED }, (a) => {
            try {
              return { path: require.resolve(a.path), external: true };
            } catch {
              return { path: a.path, external: true };
            }
          });
        },
      },
    ],
  });
}

/**
 * How a child is started. Built: the sibling `race-child.js`. In a source checkout: the TypeScript
 * child bundled once per run (a plain `node` start per process, instead of a loader compiling the
 * kernel in every one of them), else run through tsx.
 */
async function childCommand(workDir: string): Promise<string[]> {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return [fileURLToPath(new URL('./race-child.js', here))];
  const script = fileURLToPath(new URL('./race-child.ts', here));
  try {
    const outfile = join(workDir, 'race-child.mjs');
    await bundleSource(script, outfile);
    return [outfile];
  } catch {
    const tsx = pathToFileURL(createRequire(here).resolve('tsx')).href;
    return ['--conditions=@ctrlrun/source', '--import', tsx, script];
  }
}

/** Give up on processes that have not all answered after this long (they are killed). */
const PROCESS_DEADLINE_MS = 120_000;

/** What one child says: `ready`, then one JSON line with its outcome. */
interface ChildState {
  readonly child: ChildProcessWithoutNullStreams;
  buffer: string;
  stderr: string;
  ready: boolean;
  outcome: ProcessOutcome | null;
}

/**
 * Races one process per run on the scratch store: every child opens the store, builds its Control
 * and its action, says `ready`; once all are ready, each is told `go` at once. Rejects if a
 * process cannot be started or dies without an answer.
 */
export function nodeProcessLauncher(workDir: string): ProcessLauncher {
  let command: Promise<string[]> | null = null;
  return async (request) => {
    const args = await (command ??= childCommand(workDir));
    return new Promise((resolve, reject) => {
      const markers = mkdtempSync(join(workDir, 'race-runs-'));
      const states: ChildState[] = [];
      let settled = false;
      const finish = (err: Error | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        for (const s of states) if (s.child.exitCode === null) s.child.kill('SIGKILL');
        if (err) {
          rmSync(markers, { recursive: true, force: true });
          reject(err);
          return;
        }
        const executorRuns = readdirSync(markers).length;
        rmSync(markers, { recursive: true, force: true });
        resolve({ parentPid: process.pid, processes: states.map((s) => s.outcome!), executorRuns });
      };
      const deadline = setTimeout(
        () => finish(new Error(`the ${states.length} processes did not all answer within ${PROCESS_DEADLINE_MS / 1000} s`)),
        PROCESS_DEADLINE_MS,
      );
      const maybeGo = () => {
        if (states.length === request.runs.length && states.every((s) => s.ready)) for (const s of states) s.child.stdin.write('go\n');
      };
      for (const run of request.runs) {
        let child: ChildProcessWithoutNullStreams;
        try {
          child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
        } catch (err) {
          finish(err as Error);
          return;
        }
        const state: ChildState = { child, buffer: '', stderr: '', ready: false, outcome: null };
        states.push(state);
        child.on('error', (err) => finish(new Error(`a process could not be started: ${err.message}`)));
        child.stderr.on('data', (d: Buffer) => void (state.stderr += d.toString()));
        child.stdout.on('data', (d: Buffer) => {
          state.buffer += d.toString();
          let nl: number;
          while ((nl = state.buffer.indexOf('\n')) >= 0) {
            const line = state.buffer.slice(0, nl);
            state.buffer = state.buffer.slice(nl + 1);
            if (line === 'ready') {
              state.ready = true;
              maybeGo();
            } else if (line.startsWith('{')) {
              state.outcome = JSON.parse(line) as ProcessOutcome;
            }
          }
        });
        // 'close' (not 'exit'): every line the child wrote has been read by then.
        child.on('close', (code) => {
          if (state.outcome === null) {
            finish(
              new Error(
                `a process (pid ${child.pid ?? '?'}) exited ${code ?? 'on a signal'} without an answer: ${state.stderr.trim().split('\n').slice(-3).join(' | ')}`,
              ),
            );
            return;
          }
          if (states.length === request.runs.length && states.every((s) => s.outcome !== null && s.child.exitCode !== null)) finish(null);
        });
        const message = {
          locator: request.locator,
          policyText: request.policyText,
          policySource: request.policySource,
          authorityText: request.authorityText,
          authoritySource: request.authoritySource,
          action: request.action,
          principal: request.principal,
          environment: request.environment,
          arguments: run,
          markers,
        };
        child.stdin.write(`${orderedJson(message)}\n`);
      }
      maybeGo();
    });
  };
}
