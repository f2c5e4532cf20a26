/**
 * The verify report (`ctrlrun.verify/v1`) and its renderings: the human report, JUnit XML, the
 * badge, and the exit code. Not-applicable is never a pass: it is kept out of the fraction.
 *
 * @module
 */
import type { JsonObject, JsonValue } from '../canonical.js';
import { orderedJson } from '../canonical.js';
import { CATALOGUE, type GuaranteeId } from './catalogue.js';

/** The report's schema tag. */
export const VERIFY_SCHEMA = 'ctrlrun.verify/v1';

/** A guarantee's status, rendered by value. */
export type GuaranteeStatus = 'pass' | 'fail' | 'not_applicable' | 'skipped';

/** What a failed guarantee observed. */
export interface Counterexample {
  readonly expected: string;
  readonly observed: string;
  readonly receipts: readonly JsonValue[];
  readonly events: readonly JsonValue[];
  readonly effects: readonly JsonValue[];
}

/** One guarantee's result. */
export interface GuaranteeResult {
  readonly id: GuaranteeId;
  readonly title: string;
  readonly status: GuaranteeStatus;
  /** Null only on a pass. */
  readonly reason: string | null;
  readonly action: string | null;
  readonly arguments: JsonObject | null;
  readonly effect_key: string | null;
  readonly grant_id: string | null;
  readonly descends_from: readonly string[];
  /** `summary` (a pass's few words), `note` (printed once), and scenario facts. */
  readonly detail: JsonObject;
  /** Only on a fail. */
  readonly counterexample: Counterexample | null;
}

/** The whole report. */
export interface VerifyReport {
  readonly schema: typeof VERIFY_SCHEMA;
  readonly catalogue: typeof CATALOGUE;
  readonly ctrlrun_version: string;
  readonly started_at: string;
  readonly finished_at: string;
  readonly policy: { readonly path: string; readonly sha256: string; readonly schema: string; readonly mode: string; readonly actions: number };
  readonly authority: { readonly path: string | null; readonly sha256: string | null; readonly grants: number; readonly max_delegation_depth: number } | null;
  readonly store: { readonly backend: string; readonly scratch: true };
  /** True under `--only`. */
  readonly partial: boolean;
  readonly summary: {
    readonly passed: number;
    readonly failed: number;
    readonly applicable: number;
    readonly not_applicable: number;
    readonly skipped: number;
    /** `P/A`, or null when no badge may be drawn (a partial run, zero applicable). */
    readonly badge: string | null;
  };
  readonly guarantees: readonly GuaranteeResult[];
}

/** Exit 0: at least one applicable guarantee, none failed. 1: a fail. 2: zero applicable (`0/0` is never a pass). */
export function verifyExitCode(report: VerifyReport): 0 | 1 | 2 {
  if (report.summary.failed > 0) return 1;
  if (report.summary.applicable === 0) return 2;
  return 0;
}

/** The summary numbers of a list of results. */
export function summarize(results: readonly GuaranteeResult[], partial: boolean): VerifyReport['summary'] {
  const count = (s: GuaranteeStatus) => results.filter((r) => r.status === s).length;
  const passed = count('pass');
  const failed = count('fail');
  const applicable = passed + failed;
  return {
    passed,
    failed,
    applicable,
    not_applicable: count('not_applicable'),
    skipped: count('skipped'),
    badge: partial || applicable === 0 ? null : `${passed}/${applicable}`,
  };
}

/** The summary line: `P/A declared guarantees pass. K not applicable: ids.` (+ ` S not selected: ids.`). */
export function summaryLine(report: VerifyReport): string {
  const { passed, applicable } = report.summary;
  const na = report.guarantees.filter((g) => g.status === 'not_applicable').map((g) => g.id);
  const skipped = report.guarantees.filter((g) => g.status === 'skipped').map((g) => g.id);
  let line = `${passed}/${applicable} declared guarantees pass.`;
  line += na.length > 0 ? ` ${na.length} not applicable: ${na.join(', ')}.` : ' 0 not applicable.';
  if (report.partial) line += ` ${skipped.length} not selected: ${skipped.join(', ')}.`;
  return line;
}

const STATUS_CELL: Record<GuaranteeStatus, string> = { pass: 'PASS', fail: 'FAIL', not_applicable: 'N/A ', skipped: 'SKIP' };

function subjectOf(g: GuaranteeResult): string {
  return g.grant_id ?? g.action ?? '-';
}

/** The human report, one string ending in a newline; the summary is the last line. */
export function renderVerifyText(report: VerifyReport): string {
  const lines: string[] = [];
  lines.push(`CTRLRun verify — ctrlrun ${report.ctrlrun_version}, catalogue ${report.catalogue}`);
  lines.push(`policy     ${report.policy.path} (${report.policy.schema}, mode: ${report.policy.mode})`);
  const a = report.authority;
  lines.push(`authority  ${a === null ? 'none' : `${a.path === null ? 'same document' : a.path}, ${a.grants} grant${a.grants === 1 ? '' : 's'}`}`);
  lines.push(`store      ${report.store.backend}, scratch (created and destroyed for this run)`);
  lines.push('');
  const notes = new Set<string>();
  for (const g of report.guarantees) {
    let trailer: string;
    if (g.status === 'pass') {
      const summary = typeof g.detail['summary'] === 'string' ? ` (${g.detail['summary']})` : '';
      trailer = `${subjectOf(g)}${summary}`;
    } else if (g.status === 'fail') {
      trailer = `${g.reason} — ${subjectOf(g)}`;
    } else {
      trailer = g.reason ?? '';
    }
    lines.push(`${g.id.padEnd(4)} ${g.title.padEnd(32)} ${STATUS_CELL[g.status]}  ${trailer}`);
    if (g.status === 'fail' && g.counterexample) {
      const c = g.counterexample;
      lines.push(`       expected: ${c.expected}`);
      lines.push(`       observed: ${c.observed}`);
      lines.push(`       evidence: ${c.receipts.length} receipt(s), ${c.events.length} event(s), effects ${orderedJson(c.effects.map(effectSummary))}`);
    }
    const note = g.detail['note'];
    if (typeof note === 'string' && !notes.has(note)) {
      notes.add(note);
      lines.push(`       (${note})`);
    }
  }
  lines.push(summaryLine(report));
  return `${lines.join('\n')}\n`;
}

function effectSummary(e: JsonValue): JsonValue {
  if (typeof e !== 'object' || e === null || Array.isArray(e)) return e;
  return `${String(e['effect_key'])}=${String(e['state'])}`;
}

/** The report as compact-free JSON text (2-space indent), ending in a newline. */
export function renderVerifyJson(report: VerifyReport): string {
  return `${JSON.stringify(report, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v), 2)}\n`;
}

function xml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** JUnit XML: suite `ctrlrun.verify`; N/A and not-selected guarantees are `<skipped>`, never a pass. */
export function renderVerifyJunit(report: VerifyReport): string {
  const s = report.summary;
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>'];
  out.push(
    `<testsuites><testsuite name="ctrlrun.verify" hostname="localhost" tests="${report.guarantees.length}" failures="${s.failed}" errors="0" skipped="${s.not_applicable + s.skipped}" timestamp="${xml(report.started_at)}">`,
  );
  for (const g of report.guarantees) {
    const open = `  <testcase classname="ctrlrun.guarantees" name="${xml(`${g.id} ${g.title}`)}"`;
    if (g.status === 'pass') out.push(`${open}/>`);
    else if (g.status === 'fail') {
      const c = g.counterexample;
      const body = c ? `expected: ${c.expected}\nobserved: ${c.observed}\n${orderedJson({ receipts: c.receipts, events: c.events, effects: c.effects })}` : '';
      out.push(`${open}><failure type="${g.id}" message="${xml(g.reason ?? '')}">${xml(body)}</failure></testcase>`);
    } else out.push(`${open}><skipped message="${xml(g.reason ?? '')}"/></testcase>`);
  }
  out.push('</testsuite></testsuites>');
  return `${out.join('\n')}\n`;
}

/** The shields.io endpoint document. */
export interface VerifyBadge {
  readonly schemaVersion: 1;
  readonly label: 'CTRLRun';
  readonly message: string;
  readonly color: 'brightgreen' | 'red';
}

/**
 * The badge of a complete run with at least one applicable guarantee: `verified P/A`, red iff a
 * guarantee failed. Null for a partial run or a run that exits 2 or 3.
 */
export function verifyBadge(report: VerifyReport): VerifyBadge | null {
  if (report.summary.badge === null) return null;
  return { schemaVersion: 1, label: 'CTRLRun', message: `verified ${report.summary.badge}`, color: report.summary.failed > 0 ? 'red' : 'brightgreen' };
}

/** The badge as drawn: `CTRLRun verified N/M`. */
export function badgeText(badge: VerifyBadge): string {
  return `${badge.label} ${badge.message}`;
}
