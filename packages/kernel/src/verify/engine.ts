/**
 * The verify engine: runs each declared guarantee of the catalogue against the operator's policy,
 * each in its own scratch store, with fake executors and no network, composing `Control` exactly
 * as an application does. Runtime-agnostic: the caller injects how scratch stores are made and,
 * where the runtime has them, how separate processes are launched (G4).
 *
 * @module
 */
import { loadAuthority, type Authority } from '../authority/authority.js';
import { PolicyError } from '../errors.js';
import { sha256TaggedText } from '../hash.js';
import { loadPolicy, type Policy } from '../policy/policy.js';
import type { Clock } from '../time.js';
import { CATALOGUE, GUARANTEES, GUARANTEE_IDS, isGuaranteeId, type GuaranteeId } from './catalogue.js';
import { VerifyInternalError, VerifyRefusal } from './errors.js';
import { Builder, RUNNERS } from './guarantees.js';
import { summarize, VERIFY_SCHEMA, type GuaranteeResult, type VerifyReport } from './report.js';
import { actionViews, scenarioInstant, type Context } from './select.js';
import { SynthesisDefect } from './synthesize.js';

export type { ScratchStore, ScratchRequest, ScratchStoreFactory, ProcessRequest, ProcessOutcome, ProcessReport, ProcessLauncher } from './contracts.js';
import type { ScratchStoreFactory, ProcessLauncher } from './contracts.js';

/** Options of {@link runVerify}. */
export interface VerifyOptions {
  /** The policy document's text. */
  readonly policyText: string;
  /** Where it came from, as the report names it. */
  readonly policyPath: string;
  /** A standalone authority document (`--authority`): its text and path. */
  readonly authority?: { readonly text: string; readonly path: string } | null;
  /** Run only these guarantees (`--only`); the rest are `skipped`. */
  readonly only?: readonly GuaranteeId[] | null;
  readonly scratchStore: ScratchStoreFactory;
  readonly launchProcesses?: ProcessLauncher | null;
  /** The scratch backend as the report names it (`sqlite`, `postgresql`, `sql.js (in memory)`). */
  readonly backend: string;
  /** The running ctrlrun's version. */
  readonly version: string;
  /** The wall clock, for `started_at`/`finished_at` and G4 (default: the system clock). */
  readonly now?: Clock;
}

/**
 * Parses `--only` (`G1,G3`): ids separated by commas. Empty, or naming an id the catalogue does
 * not have → {@link VerifyRefusal} naming it and the registry.
 */
export function parseOnly(text: string): GuaranteeId[] {
  const parts = text.split(',').map((s) => s.trim());
  if (text.trim() === '' || parts.some((p) => p === '')) {
    throw new VerifyRefusal(`--only needs a comma-separated list of guarantee ids; the catalogue ${CATALOGUE} has ${GUARANTEE_IDS.join(', ')}`);
  }
  const ids: GuaranteeId[] = [];
  for (const p of parts) {
    const id = p.toUpperCase();
    if (!isGuaranteeId(id)) throw new VerifyRefusal(`--only names ${JSON.stringify(p)}, which is not a guarantee of ${CATALOGUE}: ${GUARANTEE_IDS.join(', ')}`);
    if (!ids.includes(id)) ids.push(id);
  }
  return ids;
}

/** Loads the policy for verify: a document that does not load is a refusal; so is observe mode. */
export function loadVerifyPolicy(text: string, source: string): Policy {
  let policy: Policy;
  try {
    policy = loadPolicy(text, { source });
  } catch (err) {
    if (err instanceof PolicyError) throw new VerifyRefusal(err.message);
    throw err;
  }
  if (policy.mode === 'observe') {
    throw new VerifyRefusal(`${source} is in observe mode: nothing is enforced, so no guarantee can hold; verify an enforcing configuration`);
  }
  return policy;
}

/** Loads `--authority`; a malformed document, or authority declared twice, is a refusal. */
function loadStandalone(policy: Policy, given: { text: string; path: string }): Authority {
  if (policy.authority !== null) {
    throw new VerifyRefusal(
      `authority is declared twice: in ${policy.source} and in --authority ${given.path}; two sources for one section is an ambiguity nobody can resolve later`,
    );
  }
  try {
    return loadAuthority(given.text, { source: given.path });
  } catch (err) {
    if (err instanceof PolicyError) throw new VerifyRefusal(err.message);
    throw err;
  }
}

function sha256Hex(text: string): string {
  return sha256TaggedText(text).slice('sha256:'.length);
}

/**
 * Runs the catalogue against a policy. Refusals throw {@link VerifyRefusal} (exit 2); verify's own
 * failures throw {@link VerifyInternalError} (exit 3); everything else is in the report.
 */
export async function runVerify(options: VerifyOptions): Promise<VerifyReport> {
  const now = options.now ?? (() => new Date());
  const startedAt = now().toISOString();
  const policy = loadVerifyPolicy(options.policyText, options.policyPath);
  const given = options.authority ?? null;
  const standalone = given === null ? null : { authority: loadStandalone(policy, given), text: given.text, source: given.path };
  const only = options.only ?? null;
  if (only !== null && only.length === 0) throw new VerifyRefusal(`--only selected nothing; the catalogue ${CATALOGUE} has ${GUARANTEE_IDS.join(', ')}`);
  const authority = standalone?.authority ?? policy.authority;
  const t0 = scenarioInstant(authority);
  const ctx: Context = {
    policy,
    policyText: options.policyText,
    policySource: options.policyPath,
    standalone,
    authority,
    views: actionViews(policy),
    t0,
    clock: () => new Date(t0.getTime()),
    wallClock: now,
    scratch: options.scratchStore,
    launcher: options.launchProcesses ?? null,
  };
  const results: GuaranteeResult[] = [];
  for (const g of GUARANTEES) {
    const b = new Builder(g);
    if (only !== null && !only.includes(g.id)) {
      results.push(b.skipped());
      continue;
    }
    try {
      results.push(await RUNNERS[g.id](ctx, b));
    } catch (err) {
      if (err instanceof VerifyInternalError) throw err;
      if (err instanceof SynthesisDefect) throw new VerifyInternalError(`${g.id}: ${err.message}`);
      throw new VerifyInternalError(`${g.id}: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
    }
  }
  const partial = only !== null;
  return {
    schema: VERIFY_SCHEMA,
    catalogue: CATALOGUE,
    ctrlrun_version: options.version,
    started_at: startedAt,
    finished_at: now().toISOString(),
    policy: { path: options.policyPath, sha256: sha256Hex(options.policyText), schema: policy.schema, mode: policy.mode, actions: policy.actionNames.length },
    authority:
      authority === null
        ? null
        : {
            path: given?.path ?? null,
            sha256: given === null ? null : sha256Hex(given.text),
            grants: authority.grants.size,
            max_delegation_depth: authority.maxDelegationDepth,
          },
    store: { backend: options.backend, scratch: true },
    partial,
    summary: summarize(results, partial),
    guarantees: results,
  };
}
