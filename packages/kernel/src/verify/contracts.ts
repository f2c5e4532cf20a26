/**
 * What the verify engine asks of its host: scratch stores and, where the runtime has them,
 * separate processes (G4). Kept apart from the engine so the guarantees and the selection can
 * name these shapes without importing the engine that imports them.
 *
 * @module
 */
import type { JsonObject } from '../canonical.js';
import type { StateStore } from '../store/state-store.js';
import type { Clock } from '../time.js';
import type { GuaranteeId } from './catalogue.js';
import type { VerifyPrincipal } from './rig.js';

/** A scratch store handed to one scenario; `dispose` removes it (called even on error). */
export interface ScratchStore {
  readonly store: StateStore;
  /**
   * How another process opens the same database (a file path, a URL), or null when it cannot
   * (an in-memory store): then G4 is not applicable.
   */
  readonly locator: string | null;
  dispose(): Promise<void>;
}

/** What a scratch store is made for. */
export interface ScratchRequest {
  readonly guarantee: GuaranteeId;
  /** `scenario`, `control`, … distinct within one guarantee. */
  readonly purpose: string;
  /** The clock the store must use. */
  readonly clock: Clock;
}

/** Makes a fresh, empty, migrated store. */
export type ScratchStoreFactory = (request: ScratchRequest) => Promise<ScratchStore>;

/** What G4 asks a launcher to run: one OS process per entry of `runs`, started together. */
export interface ProcessRequest {
  /** The scratch store's locator. */
  readonly locator: string;
  readonly policyText: string;
  readonly policySource: string;
  /** A standalone authority document's text (`--authority`), or null. */
  readonly authorityText: string | null;
  readonly authoritySource: string | null;
  readonly action: string;
  readonly principal: VerifyPrincipal;
  readonly environment: string;
  /** One per process: the arguments it acts with. */
  readonly runs: readonly JsonObject[];
}

/** What one process did. `outcome` is `committed` or the refusal as `describeOutcome` words it. */
export interface ProcessOutcome {
  readonly pid: number;
  readonly outcome: string;
}

/** What a launcher observed. */
export interface ProcessReport {
  readonly parentPid: number;
  readonly processes: readonly ProcessOutcome[];
  /** Executor runs, counted outside the store (by exclusive file creation). */
  readonly executorRuns: number;
}

/** Runs processes for G4 (the CLI: `child_process`; absent in a tab or a worker). */
export type ProcessLauncher = (request: ProcessRequest) => Promise<ProcessReport>;
