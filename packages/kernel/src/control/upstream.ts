/**
 * The upstream pin (policy v8 `upstream`, spec 05 §3.2): an action whose entry pins the server it
 * reaches — the TLS certificate it presents (`tls_cert_sha256`, `tls_cert_file`) and the schema of
 * the tool as the server lists it (`tool_schema_sha256`) — runs only when a gateway observed that
 * server immediately before forwarding and what it saw matches. Without an observation, or with
 * one that lacks what the pin names, it is refused `upstream_unverified`; with one that differs,
 * `upstream_mismatch`. The kernel compares; the observer (the MCP gateway) looks.
 *
 * @module
 */
import { isPlainObject } from '../canonical.js';
import { InvalidArgument } from '../errors.js';
import { sha256TaggedText } from '../hash.js';
import type { UpstreamPin } from '../policy/index.js';
import type { UpstreamObservation } from './types.js';

/** The refusal reasons (the original's strings). */
export const UPSTREAM_UNVERIFIED = 'upstream_unverified';
export const UPSTREAM_MISMATCH = 'upstream_mismatch';

const DIGEST = /^sha256:[0-9a-f]{64}$/;

function digestOrNull(v: unknown, field: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string' || !DIGEST.test(v)) throw new InvalidArgument(`upstream.${field} must be 'sha256:' and 64 lowercase hex characters, or null`);
  return v;
}

/** The call's observation, checked (a malformed one is refused naming the field), or null. */
export function checkObservation(v: unknown): UpstreamObservation | null {
  if (v === null || v === undefined) return null;
  if (!isPlainObject(v)) throw new InvalidArgument('upstream must be { tlsCertSha256, toolSchemaSha256, certificateFiles? } or null');
  const files = v['certificateFiles'];
  const certificateFiles: Record<string, string | null> = Object.create(null) as Record<string, string | null>;
  if (files !== undefined) {
    if (!isPlainObject(files)) throw new InvalidArgument('upstream.certificateFiles must map each pinned path to a digest or null');
    for (const [path, d] of Object.entries(files)) certificateFiles[path] = digestOrNull(d, `certificateFiles[${JSON.stringify(path)}]`);
  }
  return Object.freeze({
    tlsCertSha256: digestOrNull(v['tlsCertSha256'], 'tlsCertSha256'),
    toolSchemaSha256: digestOrNull(v['toolSchemaSha256'], 'toolSchemaSha256'),
    certificateFiles: Object.freeze(certificateFiles),
  });
}

/**
 * Why a pinned action may not run on this observation, or null when it may. A certificate is
 * accepted when its digest is one the pin lists or the digest of one of its files (a file the
 * observer could not read accepts nothing); an unpinned part is not compared.
 */
export function upstreamRefusal(name: string, pin: UpstreamPin, seen: UpstreamObservation | null): { reason: string; message: string } | null {
  const unverified = (what: string) => ({
    reason: UPSTREAM_UNVERIFIED,
    message: `${name} pins its upstream (upstream:), and ${what}: refused, as the original refuses a pinned action nothing observed`,
  });
  if (seen === null) return unverified('nothing in this process observed the upstream it reaches');
  const pinsCertificate = pin.tlsCertSha256.length > 0 || pin.tlsCertFile.length > 0;
  if (pinsCertificate) {
    if (seen.tlsCertSha256 === null) return unverified('the gateway saw no TLS certificate from it');
    const accepted = new Set(pin.tlsCertSha256);
    for (const path of pin.tlsCertFile) {
      const d = seen.certificateFiles?.[path];
      if (typeof d === 'string') accepted.add(d);
    }
    if (accepted.size === 0)
      return unverified(`none of its pinned certificate files could be read (${pin.tlsCertFile.map((f) => JSON.stringify(f)).join(', ')})`);
    if (!accepted.has(seen.tlsCertSha256)) {
      return {
        reason: UPSTREAM_MISMATCH,
        message: `${name}: the upstream presented the certificate ${seen.tlsCertSha256}, which the policy does not pin: refused before the call`,
      };
    }
  }
  if (pin.toolSchemaSha256 !== null) {
    if (seen.toolSchemaSha256 === null) return unverified('the upstream does not list the tool now');
    if (seen.toolSchemaSha256 !== pin.toolSchemaSha256) {
      return {
        reason: UPSTREAM_MISMATCH,
        message: `${name}: the upstream lists the tool with the schema ${seen.toolSchemaSha256}, not the pinned ${pin.toolSchemaSha256}: refused before the call`,
      };
    }
  }
  return null;
}

function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedJson(v[k])}`).join(',')}}`;
  }
  const text = JSON.stringify(v);
  if (text === undefined) throw new InvalidArgument('a tool schema holds only JSON values');
  return text;
}

/**
 * The digest a `tool_schema_sha256` pin names: `sha256:` and the hex SHA-256 of the tool's
 * `inputSchema` as the upstream lists it, written as JSON with every object's keys sorted by code
 * unit and no spaces (numbers as JSON writes them). The gateway computes it from `tools/list`
 * before forwarding a call to a pinned tool, and prints it for each pinned tool when it starts.
 */
export function toolSchemaDigest(inputSchema: unknown): string {
  if (!isPlainObject(inputSchema)) throw new InvalidArgument('a tool input schema must be a JSON object');
  return sha256TaggedText(sortedJson(inputSchema));
}
