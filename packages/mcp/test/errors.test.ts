import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { GATEWAY_ERRORS, gatewayError, GatewayRefusal, REFUSAL_META_KEY, refusalResult, type GatewayErrorName } from '@ctrlrun/mcp';

const names = Object.keys(GATEWAY_ERRORS) as GatewayErrorName[];

describe('refusalResult: a ctrlrun refusal as a tools/call tool error', () => {
  it('is isError with one text block that says first the tool was not called (or its outcome is unknown), then the message; the code and fields in _meta and, when asked, structuredContent', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...names),
        fc.string({ maxLength: 200 }),
        fc.dictionary(
          fc.string({ maxLength: 10 }).filter((k) => k !== '_meta' && k !== 'error'),
          fc.jsonValue(),
          { maxKeys: 5 },
        ),
        fc.boolean(),
        (name, message, fields, structured) => {
          const err = gatewayError(name, message, fields);
          expect(err).toBeInstanceOf(GatewayRefusal);
          const result = refusalResult(err, { structured });
          const expected: Record<string, unknown> = { code: GATEWAY_ERRORS[name].code, error: GATEWAY_ERRORS[name].token, ...fields };
          expected['code'] = GATEWAY_ERRORS[name].code;
          expect(result.isError).toBe(true);
          expect(result.content).toHaveLength(1);
          const text = (result.content[0] as { text: string }).text;
          expect(text.endsWith(` ${message}`)).toBe(true);
          const lead =
            name === 'upstreamAmbiguous'
              ? /^ctrlrun: the tool's outcome is unknown\./
              : name === 'upstreamNotExecuted'
                ? /^ctrlrun: the tool did not run\./
                : /^ctrlrun (refused|held) this call[^.]*\. The tool was not called;/;
          expect(text).toMatch(lead);
          expect(result._meta?.[REFUSAL_META_KEY]).toEqual(expected);
          if (structured) expect(result.structuredContent).toEqual(expected);
          else expect(result).not.toHaveProperty('structuredContent');
        },
      ),
    );
  });

  it("a _meta among the fields (an upstream failure's receipt) becomes the result's _meta, not a field", () => {
    const receipt = { 'com.ctrlrun/receipt': { action_id: 'act_1', result: 'ambiguous' } };
    const result = refusalResult(gatewayError('upstreamAmbiguous', 'gone', { effect_key: 'k', _meta: receipt }), { structured: true });
    expect(result._meta).toEqual({ ...receipt, [REFUSAL_META_KEY]: { code: -41010, error: 'ctrlrun.upstream_ambiguous', effect_key: 'k' } });
    expect(result.structuredContent).toEqual({ code: -41010, error: 'ctrlrun.upstream_ambiguous', effect_key: 'k' });
  });
});
