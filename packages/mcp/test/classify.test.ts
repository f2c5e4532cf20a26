// The outcome table of spec 04 §5, row by row, on the errors the SDK's client really throws.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { classifyError, classifyResult, NOT_EXECUTED_CODES, UpstreamNotConnected } from '@ctrlrun/mcp';

// As Node's fetch throws them: a socket error names its system call (`connect`, `read`, `write`).
const fetchFailed = (code: string, syscall?: string) =>
  new TypeError('fetch failed', { cause: Object.assign(new Error(`${syscall ?? 'connect'} ${code}`), { code, ...(syscall ? { syscall } : {}) }) });

describe('classifyResult', () => {
  it('complete is COMMITTED; isError is AMBIGUOUS unless the operator asserted not_executed_on_error; another resultType is AMBIGUOUS', () => {
    expect(classifyResult({ content: [] }, { notExecutedOnError: false })).toBe('committed');
    expect(classifyResult({ content: [], resultType: 'complete' }, { notExecutedOnError: false })).toBe('committed');
    expect(classifyResult({ content: [], isError: true }, { notExecutedOnError: false })).toBe('ambiguous');
    expect(classifyResult({ content: [], isError: true }, { notExecutedOnError: true })).toBe('failed');
    expect(classifyResult({ content: [], isError: 'true' }, { notExecutedOnError: true })).toBe('committed');
    for (const resultType of ['input_required', 'incomplete', '', null, 1]) {
      expect(classifyResult({ content: [], resultType }, { notExecutedOnError: true }), String(resultType)).toBe('ambiguous');
    }
  });
});

describe('classifyError', () => {
  it('never connected (refused, DNS, connect timeout, TLS, a failed spawn) is FAILED; a cause deep in the chain counts', () => {
    for (const code of ['ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT']) {
      expect(classifyError(fetchFailed(code)), code).toEqual({ kind: 'transport', outcome: 'failed' });
    }
    for (const code of ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']) {
      expect(classifyError(fetchFailed(code, 'connect')), code).toEqual({ kind: 'transport', outcome: 'failed' });
    }
    expect(classifyError(new Error('outer', { cause: fetchFailed('ECONNREFUSED', 'connect') })).outcome).toBe('failed');
    expect(classifyError(new UpstreamNotConnected('spawn ENOENT')).outcome).toBe('failed');
  });

  it('anything after sending is AMBIGUOUS: a reset, a closed connection, the SDK timeout, an unknown error, a non-error', () => {
    for (const err of [
      fetchFailed('ECONNRESET'),
      fetchFailed('EPIPE'),
      // Unreachable on a connected socket (Linux reports the ICMP soft error when retransmission gives up).
      fetchFailed('EHOSTUNREACH', 'read'),
      fetchFailed('ENETUNREACH', 'write'),
      // A socket code that names no system call proves nothing.
      fetchFailed('EHOSTUNREACH'),
      fetchFailed('UND_ERR_SOCKET'),
      new McpError(-32000, 'Connection closed'),
      new McpError(-32001, 'Request timed out'),
      new Error('?'),
      'a string',
      null,
    ]) {
      expect(classifyError(err).outcome, String(err)).toBe('ambiguous');
    }
  });

  it('a JSON-RPC error from the upstream is relayed: FAILED only for the not-understood codes', () => {
    fc.assert(
      fc.property(fc.integer({ min: -33000, max: 1000 }), (code) => {
        fc.pre(code !== -32000 && code !== -32001);
        const c = classifyError(new McpError(code, 'x'));
        expect(c.kind).toBe('rpc');
        expect(c.outcome).toBe(NOT_EXECUTED_CODES.has(code) ? 'failed' : 'ambiguous');
      }),
    );
    expect([...NOT_EXECUTED_CODES].sort()).toEqual([-32700, -32600, -32601, -32602, -32020, -32021, -32022].sort());
    expect(classifyError(new McpError(-32603, 'internal')).outcome).toBe('ambiguous');
  });

  it('a bare HTTP status: 401 is FAILED, anything else AMBIGUOUS', () => {
    expect(classifyError(new StreamableHTTPError(401, 'Unauthorized'))).toEqual({ kind: 'http', outcome: 'failed', status: 401 });
    for (const status of [400, 403, 404, 500, 502, 503]) expect(classifyError(new StreamableHTTPError(status, 'x')).outcome, String(status)).toBe('ambiguous');
  });
});
