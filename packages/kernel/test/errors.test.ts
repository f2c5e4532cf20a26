import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import * as errors from '@ctrlrun/kernel/errors';

const classes = Object.entries(errors).filter(([, v]) => typeof v === 'function' && (v as { prototype?: unknown }).prototype instanceof Error) as [
  string,
  new (...a: never[]) => Error,
][];

describe('errors', () => {
  it('every error class has a stable code and its reference name', () => {
    const codes = new Set<string>();
    for (const [exported, cls] of classes) {
      if (exported === 'KernelError') continue;
      const instance = constructSome(cls);
      expect(instance.name, exported).toBe(exported);
      expect((instance as unknown as { code: string }).code, exported).toMatch(/^ERR_[A-Z_]+$/);
      codes.add((instance as unknown as { code: string }).code);
    }
    expect(codes.size).toBe(classes.filter(([n]) => n !== 'KernelError').length);
  });

  it('names survive minification (consumers and the playground read err.name)', async () => {
    const out = await build({
      stdin: { contents: "export * from './packages/kernel/src/errors.ts';", resolveDir: process.cwd(), loader: 'ts' },
      bundle: true,
      minify: true,
      format: 'esm',
      write: false,
      platform: 'neutral',
    });
    const mod = (await import(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0]!.text).toString('base64')}`)) as Record<
      string,
      new (...a: unknown[]) => Error
    >;
    expect(new mod['ActionDenied']!('decision').name).toBe('ActionDenied');
    expect(new mod['DuplicateEffect']!('committed').name).toBe('DuplicateEffect');
    expect(new mod['AmbiguousEffect']!('k').name).toBe('AmbiguousEffect');
  });
});

function constructSome(cls: new (...a: never[]) => Error): Error {
  const C = cls as unknown as new (...a: unknown[]) => Error;
  switch (cls.name) {
    case 'SchemaMismatch':
      return new C('m', { applied: [], known: [], running: 'x' });
    case 'MissingDependency':
      return new C('mod', 'pkg');
    case 'Suspended':
      return new C('cont');
    default:
      return new C('x');
  }
}
