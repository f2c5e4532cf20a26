// `npm run bench scan`: `ctrlrun scan` over a generated 5,000-file tree, syntax only and with a
// tsconfig.json (a program and its checker), in-process through main().
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '@ctrlrun/cli';
import { writeScanTree } from './_scan-tree.js';

const FILES = Number(process.env['SCAN_BENCH_FILES'] ?? 5000);
for (const tsconfig of [false, true]) {
  const root = mkdtempSync(join(tmpdir(), 'ctrlrun-scan-bench-'));
  try {
    const expected = writeScanTree(root, FILES, { tsconfig });
    let stdout = '';
    let stderrText = '';
    const started = performance.now();
    const code = await main(['scan', '--json', '--path', root], {
      stdout: (t) => void (stdout += t),
      stderr: (t) => void (stderrText += t),
      cwd: root,
      env: {},
    });
    const seconds = (performance.now() - started) / 1000;
    if (stdout === '') throw new Error(`scan failed: exit ${code}: ${stderrText}`);
    const doc = JSON.parse(stdout) as { findings: unknown[]; totals: { files_read: number; files_typed: number } };
    if (code !== 1 || doc.findings.length !== expected || doc.totals.files_read !== FILES)
      throw new Error(`unexpected scan result: ${stderrText} exit ${code}, ${doc.findings.length} findings, ${doc.totals.files_read} files`);
    console.log(
      `scan ${FILES} files ${tsconfig ? 'with a tsconfig (typed)' : 'syntax only'}: ${seconds.toFixed(2)} s (${((seconds * 1000) / FILES).toFixed(2)} ms/file, ${doc.totals.files_typed} typed)`,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
