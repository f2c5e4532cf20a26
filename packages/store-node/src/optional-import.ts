/**
 * Imports a driver library that is an optional peer dependency, once per process. Internal to
 * `@ctrlrun/store-node`: each driver module keeps its own literal `import('…')` (so bundlers and
 * the type checker still see it) and hands it in as a thunk.
 *
 * @module
 */
import { MissingDependency, StoreError } from '@ctrlrun/kernel';

/** What {@link importOnce} needs to name a driver library in its errors. */
export interface OptionalImport<M> {
  /** The package name, as `MissingDependency` reports it. */
  name: string;
  /** The install spec for the message (`npm install …`). */
  install: string;
  /** The `[driver]` prefix of `StoreError` messages. */
  label: string;
  /** What the package is for, in the "not installed" message (`the PostgreSQL store`). */
  neededBy: string;
  /** Matches a module-not-found message that is about this package (not one of its own imports). */
  notFound: RegExp;
  /** Picks the export the driver uses out of the module, throwing a `StoreError` when it is absent. */
  pick: (mod: unknown) => M;
}

/**
 * Returns a loader that runs `load` once and caches its result; a failed import is not cached (the
 * next call tries again). A missing package is a {@link MissingDependency} naming the install; any
 * other failure a {@link StoreError}.
 */
export function importOnce<M>(load: () => Promise<unknown>, spec: OptionalImport<M>): () => Promise<M> {
  let loaded: Promise<M> | undefined;
  return () =>
    (loaded ??= load().then(spec.pick, (err: unknown) => {
      loaded = undefined;
      const code = (err as { code?: unknown })?.code;
      const text = (err as Error)?.message ?? String(err);
      if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && spec.notFound.test(text)) {
        throw new MissingDependency(spec.name, spec.install, {
          message: `${spec.name} is not installed; ${spec.neededBy} needs it: npm install ${spec.install}`,
        });
      }
      throw new StoreError(`${spec.label} loading ${spec.name} failed: ${text}`, { cause: err });
    }));
}
