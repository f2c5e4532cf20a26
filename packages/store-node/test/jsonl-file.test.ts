// jsonlFileSink: rotation by size in real files, the fsync policy, and the records it copies.
import fs from 'node:fs';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Control, eventLine, loadPolicy, protect, type EventRecord, type StoredReceipt } from '@ctrlrun/kernel';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';
import { jsonlFileSink, jsonlFileWriter, type JsonlFileOptions } from '@ctrlrun/store-node';

const POLICY = `schema: ctrlrun.policy/v2
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: allow
`;

const dirs: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  while (dirs.length) rmSync(dirs.pop()!, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'ctrlrun-jsonl-'));
  dirs.push(d);
  return join(d, 'state'); // not yet there: the sink creates it
}

async function run(dir: string, options: JsonlFileOptions, calls: number) {
  const store = await createSqlJsStore();
  const sink = jsonlFileSink(dir, options);
  const events: EventRecord[] = [];
  const receipts: StoredReceipt[] = [];
  const control = new Control({
    policy: loadPolicy(POLICY),
    store,
    principal: { agent: 'a' },
    sinks: [sink, { onEvent: (e: EventRecord) => void events.push(e), onReceipt: (r: StoredReceipt) => void receipts.push(r) }],
    logger: {
      warn: (m: string) => {
        throw new Error(`unexpected warning: ${m}`);
      },
    },
  });
  const refund = protect((a) => a['payment_id'], { control, name: 'stripe.refund' });
  for (let i = 0; i < calls; i++) await refund({ payment_id: `p${i}` });
  sink.close();
  await store.close();
  return { events, receipts };
}

/** A stream's files, oldest first: NAME.N … NAME.1, NAME. */
function stream(dir: string, name: string): string[] {
  const rotated = readdirSync(dir)
    .filter((f) => f.startsWith(`${name}.`))
    .map((f) => Number(f.slice(name.length + 1)))
    .sort((a, b) => b - a)
    .map((n) => `${name}.${n}`);
  return [...rotated, name];
}

describe('jsonlFileSink', () => {
  it('rotates each file at the size, keeps maxFiles, never splits a line, and drops only the oldest', async () => {
    const dir = tempDir();
    const maxBytes = 1200;
    const { events, receipts } = await run(dir, { maxBytes, maxFiles: 3 }, 12);
    expect(readdirSync(dir).sort()).toEqual([
      'events.jsonl',
      'events.jsonl.1',
      'events.jsonl.2',
      'events.jsonl.3',
      'receipts.jsonl',
      'receipts.jsonl.1',
      'receipts.jsonl.2',
      'receipts.jsonl.3',
    ]);
    for (const name of ['events.jsonl', 'receipts.jsonl']) {
      const files = stream(dir, name);
      for (const f of files) {
        const size = statSync(join(dir, f)).size;
        expect(size, f).toBeLessThanOrEqual(maxBytes);
        expect(size, f).toBeGreaterThan(0);
        expect(readFileSync(join(dir, f), 'utf8').endsWith('\n'), f).toBe(true);
      }
      // Every rotated file was full: the next line would not have fitted.
      const lines = files.map((f) => readFileSync(join(dir, f), 'utf8'));
      for (let i = 0; i < lines.length - 1; i++) {
        const nextLine = lines[i + 1]!.slice(0, lines[i + 1]!.indexOf('\n') + 1);
        expect(Buffer.byteLength(lines[i]!) + Buffer.byteLength(nextLine)).toBeGreaterThan(maxBytes);
      }
    }
    // What is kept is exactly the newest lines, in order: a suffix of everything written.
    const written = events.map((e) => `${eventLine(e)}\n`).join('');
    const kept = stream(dir, 'events.jsonl')
      .map((f) => readFileSync(join(dir, f), 'utf8'))
      .join('');
    expect(kept.length).toBeLessThan(written.length);
    expect(written.endsWith(kept)).toBe(true);
    const keptReceipts = stream(dir, 'receipts.jsonl')
      .map((f) => readFileSync(join(dir, f), 'utf8'))
      .join('');
    expect(
      receipts
        .map((r) => `${r.json}\n`)
        .join('')
        .endsWith(keptReceipts),
    ).toBe(true);
    expect(
      keptReceipts
        .split('\n')
        .filter(Boolean)
        .every((l) => (JSON.parse(l) as { schema: string }).schema.startsWith('ctrlrun.receipt')),
    ).toBe(true);
  });

  it('without rotation nothing is lost; a reopened directory counts the bytes already there', async () => {
    const dir = tempDir();
    const { events } = await run(dir, { maxBytes: null }, 5);
    expect(readdirSync(dir).sort()).toEqual(['events.jsonl', 'receipts.jsonl']);
    expect(readFileSync(join(dir, 'events.jsonl'), 'utf8')).toBe(events.map((e) => `${eventLine(e)}\n`).join(''));

    const size = statSync(join(dir, 'events.jsonl')).size;
    const writer = jsonlFileWriter(dir, { maxBytes: size + 5 });
    writer.append('events.jsonl', '{"next":1}\n'); // would pass maxBytes: the old content rotates out first
    writer.close();
    expect(statSync(join(dir, 'events.jsonl.1')).size).toBe(size);
    expect(readFileSync(join(dir, 'events.jsonl'), 'utf8')).toBe('{"next":1}\n');
  });

  it('a line longer than maxBytes is written whole into a file of its own; maxFiles 0 keeps no old file', () => {
    const dir = tempDir();
    const writer = jsonlFileWriter(dir, { maxBytes: 20, maxFiles: 0 });
    writer.append('events.jsonl', '{"a":1}\n');
    const long = `{"long":"${'é'.repeat(30)}"}\n`;
    writer.append('events.jsonl', long);
    writer.append('events.jsonl', '{"b":2}\n');
    writer.close();
    expect(readdirSync(dir)).toEqual(['events.jsonl']);
    expect(readFileSync(join(dir, 'events.jsonl'), 'utf8')).toBe('{"b":2}\n');
    const keep = jsonlFileWriter(join(dir, 'k'), { maxBytes: 20, maxFiles: 2 });
    for (const l of ['{"a":1}\n', long, '{"b":2}\n']) keep.append('events.jsonl', l);
    keep.close();
    expect(readFileSync(join(dir, 'k', 'events.jsonl.1'), 'utf8')).toBe(long);
    expect(readFileSync(join(dir, 'k', 'events.jsonl.2'), 'utf8')).toBe('{"a":1}\n');
  });

  it('fsync: true syncs every line and the directory after each rotation; the default syncs nothing', async () => {
    const sync = vi.spyOn(fs, 'fsyncSync');
    const quiet = tempDir();
    const { events, receipts } = await run(quiet, {}, 3);
    expect(sync).not.toHaveBeenCalled();

    const durable = tempDir();
    const synced = await run(durable, { fsync: true }, 3);
    expect(sync).toHaveBeenCalledTimes(synced.events.length + synced.receipts.length);
    expect(events.length + receipts.length).toBe(synced.events.length + synced.receipts.length);

    sync.mockClear();
    const rotating = tempDir();
    const writer = jsonlFileWriter(rotating, { fsync: true, maxBytes: 10 });
    for (let i = 0; i < 3; i++) writer.append('events.jsonl', `{"i":${i}}\n`);
    writer.close();
    // 3 lines, and 2 rotations each syncing the directory.
    expect(sync).toHaveBeenCalledTimes(5);
  });

  it('refuses bad options before touching the disk', () => {
    const dir = tempDir();
    expect(() => jsonlFileSink(dir, { maxBytes: 0 })).toThrow('maxBytes');
    expect(() => jsonlFileSink(dir, { maxBytes: 1.5 })).toThrow('maxBytes');
    expect(() => jsonlFileSink(dir, { maxFiles: -1 })).toThrow('maxFiles');
    expect(() => jsonlFileSink(dir, { fsync: 'yes' as never })).toThrow('fsync');
    expect(() => jsonlFileSink('')).toThrow('directory');
    expect(fs.existsSync(dir)).toBe(false);
    writeFileSync(join(dir, '..', 'file'), 'x');
    expect(() => jsonlFileSink(join(dir, '..', 'file'))).toThrow();
  });
});
