/**
 * The Node runner of the conformance suite's cross-process cases (spec 03 §7.2): real OS
 * processes from `test/processes/worker.ts`. A store's test file passes it as `processes`
 * together with a `url`; the workers open that url with `openStore` from `@ctrlrun/store-node`
 * (or from `opener`, a module exporting `openStore(url)`).
 */
import { files, lastLine, RENDEZVOUS_TIMEOUT_S, runAll, tempDir } from '../processes/harness.js';
import type { ProcessRunner, RaceOutcome, WorkerReport } from '@ctrlrun/kernel/conformance';

/** A {@link ProcessRunner} spawning Node workers; `opener` overrides the module they open the url with. */
export function nodeProcesses(options: { opener?: string } = {}): ProcessRunner {
  return async ({ url, effectKey, contenders, continuation }): Promise<RaceOutcome> => {
    const marker = tempDir('marker');
    const rendezvous = tempDir('rendezvous');
    try {
      const finished = await runAll(
        Array.from({ length: contenders }, () => {
          const common = {
            url,
            ...(options.opener ? { opener: options.opener } : {}),
            rendezvous_dir: rendezvous.dir,
            contenders,
            rendezvous_timeout: RENDEZVOUS_TIMEOUT_S,
          };
          return continuation === undefined
            ? { kind: 'reserve' as const, ...common, effect_key: effectKey, marker_dir: marker.dir }
            : { kind: 'take' as const, ...common, continuation };
        }),
      );
      const reports = finished.map((f) => lastLine(f) as unknown as WorkerReport);
      return { reports, arrivals: files(rendezvous.dir).filter((f) => f.startsWith('arrived-')).length, marker: files(marker.dir) };
    } finally {
      marker.remove();
      rendezvous.remove();
    }
  };
}
