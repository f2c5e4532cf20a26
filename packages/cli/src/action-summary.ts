/**
 * The GitHub Action's job summary, rendered from the `ctrlrun verify --json` report (never from a
 * second run): a table of every guarantee, not-applicable rows in full with their reasons, and the
 * summary line last.
 *
 * @module
 */
import { summaryLine, type VerifyReport } from '@ctrlrun/kernel/verify';
import { visible } from './format.js';

const CELL: Record<string, string> = { pass: 'PASS', fail: 'FAIL', not_applicable: 'N/A', skipped: 'SKIP' };

function cell(text: string): string {
  return visible(text.replace(/\r?\n/g, ' ')).replace(/\|/g, '\\|');
}

/** Markdown for `$GITHUB_STEP_SUMMARY`. */
export function renderActionSummary(report: VerifyReport): string {
  const lines = [
    `### CTRLRun verify — catalogue ${report.catalogue}`,
    '',
    `Policy \`${cell(report.policy.path)}\` (${report.policy.schema}, mode: ${report.policy.mode}); scratch ${report.store.backend} stores, created and destroyed for this run.`,
    '',
    '| id | guarantee | status | detail |',
    '|---|---|---|---|',
  ];
  for (const g of report.guarantees) {
    const detail =
      g.status === 'pass' ? `${g.grant_id ?? g.action ?? ''}${typeof g.detail['summary'] === 'string' ? ` (${g.detail['summary']})` : ''}` : (g.reason ?? '');
    lines.push(`| ${g.id} | ${cell(g.title)} | ${CELL[g.status] ?? g.status} | ${cell(detail)} |`);
  }
  lines.push('', summaryLine(report), '');
  return lines.join('\n');
}
